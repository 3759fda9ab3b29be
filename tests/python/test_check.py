"""precfuzz.check: a Python callable judged on generated cases, findings with replay lines."""

import json
import os
import subprocess

import numpy as np
import pytest

import precfuzz
from kernels import softmax_exact, softmax_raises, softmax_sum_in_storage


def test_a_correct_kernel_has_no_finding(tmp_path):
    res = precfuzz.check(softmax_exact, op="softmax", like="safe", cases=10, params={"mask": "none"},
                         findings=tmp_path)
    assert res.ok and not res.findings and not res.hazards
    assert res.cases == 30  # 10 per dtype, three dtypes
    assert res.variant == "py-softmax_exact"
    assert not os.listdir(tmp_path)


def test_a_sum_in_fp16_is_found_with_a_case_file_and_replay_line(tmp_path):
    res = precfuzz.check(softmax_sum_in_storage, op="softmax", like="safe", dtypes=["fp16"], cases=4,
                         params={"mask": "none"}, findings=tmp_path)
    assert not res.ok and len(res.findings) == 4
    f = res.findings[0]
    assert (f.op, f.dtype, f.accum, f.verdict) == ("softmax", "fp16", "fp32", "inaccurate")
    assert f.shape == (4, 256) and f.params["mask"] == "none"
    case = json.loads(open(f.case_file).read())
    assert case["variant"] == "py-softmax_sum_in_storage" and case["expect"] == "inaccurate"
    assert os.path.isabs(f.case_file) and f.case_file.startswith(str(tmp_path))
    assert f"PRECFUZZ_REPLAY={f.case_file}" in f.replay and f.replay.startswith("cd /")
    assert "reproduce with: " + f.replay in str(f)


def test_the_minimizer_shrinks_a_finding(tmp_path):
    res = precfuzz.check(softmax_sum_in_storage, op="softmax", like="safe", dtypes=["fp16"], cases=1,
                         params={"mask": "none"}, findings=tmp_path, minimize=True)
    f = res.findings[0]
    small = json.loads(open(f.minimized).read())
    assert small["shape"][0] * small["shape"][1] <= 8  # from 4x256
    assert f.minimized in f.replay


def test_replay_runs_only_the_named_case(tmp_path, monkeypatch):
    res = precfuzz.check(softmax_sum_in_storage, op="softmax", like="safe", dtypes=["fp16"], cases=2,
                         params={"mask": "none"}, findings=tmp_path)
    monkeypatch.setenv("PRECFUZZ_REPLAY", res.findings[1].case_file)
    again = precfuzz.check(softmax_sum_in_storage, op="softmax", like="safe", dtypes=["fp16"], cases=2,
                           params={"mask": "none"}, findings=tmp_path)
    assert again.cases == 1 and again.replayed == [res.findings[1].case_file]
    assert again.findings[0].detail == res.findings[1].detail
    # another check (another variant) has nothing to replay
    other = precfuzz.check(softmax_exact, op="softmax", like="safe", cases=2, params={"mask": "none"},
                           findings=tmp_path)
    assert other.cases == 0 and other.ok


def test_an_exception_is_the_verdict_failed(tmp_path):
    res = precfuzz.check(softmax_raises, op="softmax", like="safe", dtypes=["fp32"], cases=2, findings=tmp_path)
    assert [f.verdict for f in res.findings] == ["failed", "failed"]
    assert "ValueError: this kernel always fails" in res.findings[0].detail


def test_case_and_torch_inputs(tmp_path):
    torch = pytest.importorskip("torch")
    seen = []

    def k(x, case):
        assert isinstance(x, torch.Tensor)
        seen.append((case.dtype, tuple(x.shape), x.dtype))
        return torch.softmax(x.float(), -1).to(x.dtype)

    res = precfuzz.check(k, op="softmax", like="safe", shapes=[(2, 8), "3x5"], cases=1, to="torch",
                         params={"mask": "none"}, findings=tmp_path)
    assert res.ok, res.report()
    assert sorted(seen) == sorted([(t, s, d) for t, d in [("fp32", torch.float32), ("fp16", torch.float16),
                                                          ("bf16", torch.bfloat16)] for s in [(2, 8), (3, 5)]])


def test_a_closure_with_state_runs_in_this_process(tmp_path):
    calls = []
    res = precfuzz.check(lambda x: calls.append(1) or softmax_exact(x), op="softmax", like="safe",
                         dtypes=["bf16"], cases=3, params={"mask": "none"}, findings=tmp_path)
    assert res.ok and len(calls) == 3 and res.variant == "py-lambda"


def test_seconds_runs_batches_until_the_budget_is_spent(tmp_path):
    res = precfuzz.check(softmax_exact, op="softmax", like="safe", dtypes=["fp32"], cases=2, seconds=1.5,
                         params={"mask": "none"}, findings=tmp_path)
    assert res.ok and res.cases > 2 and res.cases % 2 == 0


@pytest.mark.parametrize("kw, msg", [
    (dict(op="softmaxx", like="safe"), "precfuzz has no operation 'softmaxx'"),
    (dict(op="softmax", like="fast"), "softmax has no built-in variant 'fast'"),
    (dict(op="softmax", like="safe", dtypes=["fp8"]), "dtype 'fp8'"),
    (dict(op="softmax", like="safe", params={"alpah": 1.0}), "softmax has no parameter 'alpah'"),
    (dict(op="softmax", like="safe", params={"mask": 1}), "parameter mask: one of none"),
    (dict(op="softmax", like="safe", params={"alpha": "big"}), "parameter alpha: a number"),
    (dict(op="softmax", like="safe", variant="a b"), "variant 'a b'"),
    (dict(op="softmax", like="safe", shapes=["4by4"]), "shape '4by4'"),
    (dict(op="softmax", like="safe", to="jax-ish"), "to='jax-ish'"),
    (dict(op="attention", like="flash"), "the operation passes q, k, v by name"),
    (dict(op="softmax", like="safe", cases=0), "cases=0: an integer >= 1"),
    (dict(op="softmax", like="safe", dtypes=[]), "dtypes=.*: a non-empty list"),
    (dict(op="softmax", like="safe", accums=[]), "accums=.*: a non-empty list"),
    (dict(op="softmax", like="safe", seconds=0), "seconds=0: a positive number of seconds"),
])
def test_bad_arguments_are_named(kw, msg, tmp_path):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(")):
        precfuzz.check(softmax_exact, **{"cases": 1, "findings": tmp_path, **kw})


def test_a_signature_that_cannot_take_the_inputs_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"<lambda>\(logits\): the operation passes x by name"):
        precfuzz.check(lambda logits: logits, op="softmax", like="safe", cases=1, findings=tmp_path)
    # keyword catch-alls and defaults are fine
    res = precfuzz.check(lambda x, scale=1.0, **kw: softmax_exact(x), op="softmax", like="safe", dtypes=["fp32"],
                         cases=1, params={"mask": "none"}, findings=tmp_path)
    assert res.ok


def test_precfuzz_refusing_a_case_raises_its_line(tmp_path):
    with pytest.raises(precfuzz.PrecfuzzError, match="precfuzz run: .*shape"):
        precfuzz.check(softmax_exact, op="softmax", like="safe", shapes=[(2, 3, 4)], cases=1, findings=tmp_path)
    with pytest.raises(ValueError, match=r"shape \(0, 4\): give positive ints"):
        precfuzz.check(softmax_exact, op="softmax", like="safe", shapes=[(0, 4)], cases=1, findings=tmp_path)


def test_the_executable_is_found_or_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PRECFUZZ_BIN", str(tmp_path / "nothing"))
    with pytest.raises(precfuzz.PrecfuzzNotFound, match="PRECFUZZ_BIN=.*nothing: not an executable file"):
        precfuzz.binary()
    monkeypatch.delenv("PRECFUZZ_BIN")
    exe = precfuzz.binary()
    assert os.path.isabs(exe)
    out = subprocess.run([exe, "version"], capture_output=True, text=True).stdout
    assert precfuzz.__version__ in out  # the package and the executables are one version
