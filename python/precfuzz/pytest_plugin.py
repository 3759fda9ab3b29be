"""precfuzz's pytest plugin (registered by the package's pytest11 entry point): the `precfuzz`
fixture, whose check() and judge() fail the test with the finding and the line that replays
it, and the `precfuzz` marker, which gives a test's checks a time budget:

    @pytest.mark.precfuzz(seconds=30)
    def test_my_softmax(precfuzz):
        precfuzz.check(my_softmax, op="softmax", like="safe", to="torch")

A hazard (contract kept, result useless for training) is a PrecfuzzHazardWarning by default;
--precfuzz-hazards=fail makes it fail the test. --precfuzz-seconds=N gives every check N
seconds (CI's long fuzzing), --precfuzz-findings=DIR moves the case files. A replay line is
`cd ROOT && PRECFUZZ_REPLAY=CASE python -m pytest -q NODEID`: that test, on that case only.
"""

import warnings

import pytest

from . import checking as _check
from .checking import check
from .judging import judge


class PrecfuzzHazardWarning(UserWarning):
    """A kernel kept its contract but its result is useless for training (saturated, stagnant,
    biased, imprecise): the test passes, the warning names the case and its replay line."""


def pytest_addoption(parser):
    g = parser.getgroup("precfuzz", "precfuzz: exact-oracle checks of kernels")
    g.addoption("--precfuzz-seconds", type=float, default=None, metavar="N",
                help="every precfuzz check runs batches of cases for N seconds (overrides the marker)")
    g.addoption("--precfuzz-hazards", choices=("warn", "fail", "ignore"), default="warn",
                help="what a hazard does to the test (default: warn)")
    g.addoption("--precfuzz-findings", default=None, metavar="DIR",
                help="where findings' case files go (default: ROOT/.precfuzz/findings)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "precfuzz(seconds=None, cases=None, hazards=None): defaults for the precfuzz fixture's "
        "checks in this test: a time budget in seconds, cases per dtype and shape, warn|fail|ignore")
    s = config.getoption("--precfuzz-seconds")
    if s is not None and not s > 0:
        raise pytest.UsageError(f"--precfuzz-seconds: {s} is not a positive number of seconds")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _check._pytest_context.value = (str(item.config.rootpath), item.nodeid)
    try:
        yield
    finally:
        _check._pytest_context.value = None


class Precfuzz:
    """The `precfuzz` fixture."""

    def __init__(self, request):
        self._config = request.config
        m = request.node.get_closest_marker("precfuzz")
        self._marker = dict(m.kwargs) if m else {}
        unknown = set(self._marker) - {"seconds", "cases", "hazards"}
        if unknown:
            raise pytest.UsageError(f"@pytest.mark.precfuzz: unknown argument {sorted(unknown)[0]!r} "
                                    "(seconds, cases, hazards)")
        self.results = []

    def _hazards(self):
        h = self._marker.get("hazards") or self._config.getoption("--precfuzz-hazards")
        if h not in ("warn", "fail", "ignore"):
            raise pytest.UsageError(f"@pytest.mark.precfuzz(hazards={h!r}): warn, fail or ignore")
        return h

    def _on_hazards(self, hazards, report):
        h = self._hazards()
        if hazards and h == "fail":
            pytest.fail(report, pytrace=False)
        if hazards and h == "warn":
            warnings.warn(PrecfuzzHazardWarning(report), stacklevel=3)

    def check(self, fn, op, like, **kw):
        """precfuzz.check with the marker's and the command line's budget; fails the test on a
        finding. Returns the CheckResult."""
        seconds = self._config.getoption("--precfuzz-seconds") or self._marker.get("seconds")
        if seconds and "seconds" not in kw:
            kw["seconds"] = seconds
        if "cases" in self._marker and "cases" not in kw:
            kw["cases"] = self._marker["cases"]
        kw.setdefault("findings", self._config.getoption("--precfuzz-findings"))
        kw.setdefault("minimize", True)
        res = check(fn, op, like, **kw)
        self.results.append(res)
        if res.findings:
            pytest.fail(res.report(), pytrace=False)
        self._on_hazards(res.hazards, res.report())
        return res

    def judge(self, op, inputs, outputs, **kw):
        """precfuzz.judge; fails the test when the outputs break the contract (or the ulps
        bound). Returns the Judgement."""
        kw.setdefault("findings", self._config.getoption("--precfuzz-findings"))
        j = judge(op, inputs, outputs, **kw)
        if j.finding:
            pytest.fail(str(j), pytrace=False)
        self._on_hazards(j.hazards, str(j))
        return j


@pytest.fixture
def precfuzz(request):
    """check() and judge() that fail the test with the finding and its replay line."""
    return Precfuzz(request)
