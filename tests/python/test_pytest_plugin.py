"""The pytest plugin: a finding fails the test with its replay line, which reruns that test on
that case from any directory; hazards warn (or fail); the marker gives a time budget."""

import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

TESTS = '''
import pytest
from kernels import softmax_exact, softmax_sum_in_storage

def test_bad(precfuzz):
    precfuzz.check(softmax_sum_in_storage, op="softmax", like="safe", dtypes=["fp16"], cases=2,
                   params={"mask": "none"})

def test_good(precfuzz):
    res = precfuzz.check(softmax_exact, op="softmax", like="safe", dtypes=["fp32"], cases=2,
                         params={"mask": "none"})
    assert res.cases == 2

@pytest.mark.precfuzz(seconds=1)
def test_budget(precfuzz):
    res = precfuzz.check(softmax_exact, op="softmax", like="safe", dtypes=["fp32"], cases=1,
                         params={"mask": "none"})
    assert res.cases > 1
'''

HAZARD = '''
import numpy as np
from kernels import softmax_sum_in_storage

def test_saturates(precfuzz):
    # bf16 throughout: within the bf16-accumulation contract, but the row's sum stops growing
    precfuzz.check(softmax_sum_in_storage, op="softmax", like="safe", dtypes=["bf16"], accums=["storage"],
                   shapes=[(1, 4096)], cases=1, params={"mask": "none"})
'''


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")]))
    monkeypatch.delenv("PRECFUZZ_REPLAY", raising=False)
    return pytester


def test_a_finding_fails_the_test_and_replays_from_anywhere(suite):
    suite.makepyfile(test_k=TESTS)
    r = suite.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    r.assert_outcomes(failed=1, passed=2)
    out = r.stdout.str()
    assert "FINDING softmax/py-softmax_sum_in_storage fp16/fp32 4x256: inaccurate" in out
    m = re.search(r"reproduce with: (cd .*)", out)
    assert m, out
    line = m.group(1)
    assert "PRECFUZZ_REPLAY=" in line and "test_k.py::test_bad" in line and ".min.json" in line
    assert str(suite.path / ".precfuzz" / "findings") in line
    # pasted into a shell elsewhere: the same test fails on that one case only
    env = {k: v for k, v in os.environ.items() if k != "PRECFUZZ_REPLAY"}
    p = subprocess.run(["bash", "-c", line], cwd="/", capture_output=True, text=True, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 failed" in p.stdout and "1 cases, 1 findings" in p.stdout


def test_hazards_warn_or_fail(suite):
    suite.makepyfile(test_h=HAZARD)
    r = suite.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-W", "default")
    r.assert_outcomes(passed=1, warnings=1)
    assert "PrecfuzzHazardWarning" in r.stdout.str() and "saturated" in r.stdout.str()
    r = suite.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--precfuzz-hazards=fail")
    r.assert_outcomes(failed=1)
    assert "HAZARD softmax/py-softmax_sum_in_storage bf16/bf16: saturated" in r.stdout.str()


def test_bad_options_are_named(suite):
    suite.makepyfile(test_m='''
import pytest
@pytest.mark.precfuzz(secs=3)
def test_x(precfuzz):
    pass
''')
    r = suite.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    assert "unknown argument 'secs'" in r.stdout.str() + r.stderr.str()
    r = suite.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--precfuzz-seconds=-1")
    assert r.ret != 0 and "--precfuzz-seconds: -1.0 is not a positive number of seconds" in r.stderr.str()
