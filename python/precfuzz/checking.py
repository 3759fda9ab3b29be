"""precfuzz.check: a Python callable (PyTorch, Triton, JAX, numpy) judged as a variant of one of
precfuzz's operations, on precfuzz's generated cases, against the exact (MPFR) result.

The callable runs in this process: precfuzz starts a relay (_relay.py) as its kernel process,
and the relay carries the protocol's frames to a server thread here. So a closure, a model's
weights or a CUDA context need not be picked or rebuilt, and a test's fixtures are in scope.
"""

import inspect
import json
import os
import re
import shlex
import socket
import sys
import tempfile
import threading
import time

from . import _binary
from ._files import write_atomic, write_json
from .protocol import Channel, serve_channel, to_torch

_VARIANT_OK = re.compile(r"^[A-Za-z0-9._+-]{1,47}$")

# Set by the pytest plugin around a test: (rootdir, nodeid), so that a replay line reruns it.
_pytest_context = threading.local()


def _list_json():
    """precfuzz list --json, once per executable."""
    exe = _binary.binary()
    cached = _list_json.cache.get(exe)
    if cached is None:
        p = _binary.run(["list", "--json"], check_status=(0,))
        cached = _list_json.cache[exe] = json.loads(p.stdout)
    return cached


_list_json.cache = {}


def op_info(op, like):
    """precfuzz list --json's entry of the built-in variant `like` of `op`; a ValueError naming
    what exists when there is none."""
    entries = _list_json()
    ops = sorted({e["kernel"] for e in entries})
    if op not in ops:
        raise ValueError(f"precfuzz has no operation {op!r} (it has: {', '.join(ops)})")
    variants = [e for e in entries if e["kernel"] == op and "library" not in e]
    for e in variants:
        if e["variant"] == like:
            return e
    names = ", ".join(e["variant"] for e in variants)
    raise ValueError(f"{op} has no built-in variant {like!r} to take the contract of (it has: {names})")


def _hexnum(v):
    return float(v).hex() if isinstance(v, float) else str(v)


def _shape_arg(s):
    if isinstance(s, str):
        if not re.fullmatch(r"[0-9]+(x[0-9]+)*", s):
            raise ValueError(f"shape {s!r}: give a tuple of ints or a string like '4x256'")
        return s
    dims = tuple(s)
    if not dims or not all(isinstance(d, int) and d > 0 for d in dims):
        raise ValueError(f"shape {s!r}: give positive ints")
    return "x".join(str(d) for d in dims)


def _narrowing(info, params):
    """params as the hello's narrowing and run's --param options. A value fixes the parameter;
    a list of names is the choices it takes; a (lo, hi) pair of numbers the range it takes."""
    hello, args = {}, []
    known = {p["name"]: p for p in info["params"]}
    for name, v in (params or {}).items():
        if name not in known:
            raise ValueError(f"{info['kernel']} has no parameter {name!r} (it has: {', '.join(known) or 'none'})")
        choice = "choices" in known[name]
        if isinstance(v, (list, tuple)):
            if choice:
                if not v or not all(isinstance(c, str) for c in v):
                    raise ValueError(f"parameter {name}: a list of its choices ({', '.join(known[name]['choices'])})")
                hello[name] = list(v)
            else:
                if len(v) != 2 or not all(isinstance(c, (int, float)) for c in v):
                    raise ValueError(f"parameter {name}: a number or a (lo, hi) pair of numbers")
                hello[name] = [float(v[0]), float(v[1])]
        elif choice:
            if not isinstance(v, str):
                raise ValueError(f"parameter {name}: one of {', '.join(known[name]['choices'])}")
            hello[name] = [v]
            args += ["--param", f"{name}={v}"]
        else:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ValueError(f"parameter {name}: a number, not {type(v).__name__}")
            hello[name] = [float(v), float(v)]
            args += ["--param", f"{name}={float(v).hex()}"]
    return hello, args


def _variant_name(fn, variant):
    if variant is not None:
        if not _VARIANT_OK.match(variant):
            raise ValueError(f"variant {variant!r}: 1 to 47 letters, digits or ._+-")
        return variant
    base = re.sub(r"[^A-Za-z0-9._+-]", "-", getattr(fn, "__name__", "kernel"))
    return ("py-" + base.strip("-"))[:47] or "py-kernel"


def _socket_dir():
    """A private directory whose socket path fits sockaddr_un (108 bytes)."""
    d = tempfile.mkdtemp(prefix="precfuzz-")
    if len(os.path.join(d, "k.sock")) >= 100:
        os.rmdir(d)
        d = tempfile.mkdtemp(prefix="precfuzz-", dir="/tmp")
    return d


class _Server:
    """Serves kernels ({variant: (hello entry, fn)}) to every relay that connects, a thread per
    connection: a kernel that hung past precfuzz's timeout keeps its thread, the restarted relay
    gets a new one."""

    def __init__(self, kernels):
        self.kernels = kernels
        self.dir = _socket_dir()
        self.path = os.path.join(self.dir, "k.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            try:
                serve_channel(Channel(conn.makefile("rb"), conn.makefile("wb")), self.kernels)
            except (OSError, ValueError, RuntimeError):
                pass  # precfuzz ended or restarted the relay

    def entry(self):
        relay = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_relay.py")
        return "exec:" + " ".join(shlex.quote(a) for a in (sys.executable, relay, self.path))

    def close(self):
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass


def findings_dir(given=None):
    """Where findings' case files go: given, else $PRECFUZZ_FINDINGS, else .precfuzz/findings
    under the pytest root directory (in a test) or the working directory. Absolute."""
    d = given or os.environ.get("PRECFUZZ_FINDINGS")
    if not d:
        ctx = getattr(_pytest_context, "value", None)
        d = os.path.join(ctx[0] if ctx else os.getcwd(), ".precfuzz", "findings")
    return os.path.abspath(d)


def replay_command(case_files):
    """The shell line that runs the calling test or script again on these case files only
    (PRECFUZZ_REPLAY): the pytest node in a test, else this process's command line."""
    env = "PRECFUZZ_REPLAY=" + shlex.quote(os.pathsep.join(case_files))
    ctx = getattr(_pytest_context, "value", None)
    if ctx:
        root, nodeid = ctx
        return f"cd {shlex.quote(root)} && {env} {shlex.quote(sys.executable)} -m pytest -q {shlex.quote(nodeid)}"
    argv = list(sys.argv)
    if not argv or argv[0] in ("", "-c", "-"):
        return f"{env} (then call precfuzz.check again with the same kernel)"
    argv[0] = os.path.abspath(argv[0]) if os.path.exists(argv[0]) else argv[0]
    cmd = " ".join(shlex.quote(a) for a in [sys.executable] + argv)
    return f"cd {shlex.quote(os.getcwd())} && {env} {cmd}"


class Finding:
    """A case on which the kernel broke the contract it claims (its verdict is not ok), or
    failed (raised, or answered another dtype or shape)."""

    def __init__(self, op, variant, c, case_file, replay):
        case = c["case"]
        self.op, self.variant = op, variant
        self.dtype, self.accum = case["dtype"], case["accum"]
        self.shape = tuple(case["shape"])
        self.params = case.get("params", {})
        self.verdict = c["verdict"]
        self.detail = c.get("detail", "")
        self.in_domain = c.get("in_domain", True)
        self.max_ulps = c.get("max_ulps")
        self.hazards = [Hazard(op, variant, case, h, case_file, replay) for h in c.get("hazards", [])]
        self.case = case
        self.case_file = case_file
        self.replay = replay
        self.minimized = None  # the minimizer's case file, when asked for (check(minimize=True))
        self.raw = c

    def __str__(self):
        shape = "x".join(map(str, self.shape))
        s = f"FINDING {self.op}/{self.variant} {self.dtype}/{self.accum} {shape}: {self.verdict}: {self.detail}"
        if not self.in_domain:
            s += f"\n  outside the contract's domain: {self.raw.get('outside_domain', '')}"
        s += f"\n  case: {self.case_file}"
        if self.minimized:
            s += f"\n  minimized: {self.minimized}"
        return s + f"\n  reproduce with: {self.replay}"

    __repr__ = __str__


class Hazard:
    """A result that keeps the contract but is useless for training: saturated, stagnant,
    biased, imprecise (docs/verdicts.md)."""

    def __init__(self, op, variant, case, h, case_file, replay):
        self.op, self.variant = op, variant
        self.dtype, self.accum = case["dtype"], case["accum"]
        self.kind = h["hazard"]
        self.note = h.get("note", "")
        self.measure = h.get("measure")
        self.case_file = case_file
        self.replay = replay

    def __str__(self):
        return (f"HAZARD {self.op}/{self.variant} {self.dtype}/{self.accum}: {self.kind}: {self.note}\n"
                f"  case: {self.case_file}\n  reproduce with: {self.replay}")

    __repr__ = __str__


class CheckResult:
    """What check() found: findings (contract broken), hazards (kept, but useless for training),
    and how many cases ran."""

    def __init__(self, op, variant, like):
        self.op, self.variant, self.like = op, variant, like
        self.findings, self.hazards = [], []
        self.cases = 0
        self.replayed = []  # case files run again (PRECFUZZ_REPLAY)

    @property
    def ok(self):
        """No finding (hazards do not change it, as precfuzz's exit status)."""
        return not self.findings

    def summary(self):
        s = (f"{self.op}/{self.variant} (contract of {self.like}): {self.cases} cases, "
             f"{len(self.findings)} findings, {len(self.hazards)} hazards")
        kinds = sorted({h.kind for h in self.hazards})
        return s + (f" ({', '.join(kinds)})" if kinds else "")

    def report(self, max_items=3):
        """The summary and the first findings and hazards, each with its replay line."""
        lines = [self.summary()]
        lines += [str(f) for f in self.findings[:max_items]]
        if len(self.findings) > max_items:
            lines.append(f"... and {len(self.findings) - max_items} more findings")
        lines += [str(h) for h in self.hazards[:max_items]]
        if len(self.hazards) > max_items:
            lines.append(f"... and {len(self.hazards) - max_items} more hazards")
        return "\n".join(lines)

    def __repr__(self):
        return f"<CheckResult {self.summary()}>"


def _kernel_fn(fn, to, device, inputs=()):
    """The protocol's fn(case, **inputs) from the user's fn(**inputs) or fn(case=..., **inputs);
    a ValueError when fn's parameters cannot take the operation's inputs by name."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes_case = "case" in params
    if params and inputs and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        names = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        missing = [n for n in inputs if n not in params]
        extra = [n for n, p in params.items() if n not in inputs and n != "case" and p.default is p.empty
                 and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if missing or extra:
            raise ValueError(f"{getattr(fn, '__name__', 'fn')}({', '.join(names)}): the operation passes "
                             f"{', '.join(inputs)} by name (and case if asked for)")

    if to == "numpy":
        conv = None
    elif to == "torch":
        conv = lambda a: to_torch(a, device)  # noqa: E731
    elif callable(to):
        conv = to
    else:
        raise ValueError(f"to={to!r}: 'numpy', 'torch' or a function of a numpy array")

    def k(case, **inputs):
        if conv is not None:
            inputs = {n: conv(a) for n, a in inputs.items()}
        return fn(case=case, **inputs) if takes_case else fn(**inputs)

    return k


def _record(res, out_json, findings_at):
    for c in out_json.get("cases", []):
        res.cases += 1
        if not c.get("finding") and not c.get("hazards"):
            continue
        case = dict(c["case"])
        seed = c.get("seed", 0)
        tag = c["verdict"] if c.get("finding") else "hazard-" + "-".join(h["hazard"] for h in c["hazards"])
        name = f"{res.op}-{res.variant}-{case['dtype']}-{case['accum']}-seed{seed}-{tag}.json"
        path = c.get("file") or os.path.join(findings_at, name)
        if not c.get("file"):
            if c.get("finding"):
                case["expect"] = c["verdict"]
            write_json(path, case)  # small: a generated case is its seeds, not its values
        f = Finding(res.op, res.variant, c, path, replay_command([path]))
        if c.get("finding"):
            res.findings.append(f)
        res.hazards.extend(f.hazards)


def _tensor_inputs(tensors, at):
    """{name: array} as .npy files under the findings directory (named by their content, so the
    case files that name them stay valid): ({name: path}, the dtype's name)."""
    import hashlib

    import numpy as np

    from .judging import dtype_name
    from .protocol import npy_bytes, to_numpy

    paths, dtype = {}, None
    for name, x in tensors.items():
        a = np.ascontiguousarray(to_numpy(x))
        dt = dtype_name(a)
        if dtype not in (None, dt):
            raise ValueError(f"tensors: {name} is {dt}, another input {dtype}: a case has one storage dtype")
        dtype = dt
        b = npy_bytes(a)
        d = os.path.join(at, "tensors")
        os.makedirs(d, exist_ok=True)
        paths[name] = os.path.join(d, f"{name}-{hashlib.sha256(b).hexdigest()[:16]}.npy")
        if not os.path.exists(paths[name]):
            write_atomic(paths[name], b)
    return paths, dtype


def check(fn, op, like, *, dtypes=None, accums=None, shapes=None, params=None, cases=100, seed=1,
          seconds=None, to="numpy", device="cpu", variant=None, inputs=None, scale=None, dist=None,
          timeout=60, kernels=(), findings=None, minimize=False, oracle=None, tensors=None):
    """Runs fn as a variant of precfuzz's operation `op` judged by the contract of its built-in
    variant `like`, on `cases` generated cases per dtype and shape, and returns a CheckResult.

    fn takes the operation's inputs by name (`precfuzz list`: softmax x; attention q, k, v;
    adam p, g, m, v; ...) as numpy arrays (to="torch": torch tensors on `device`; or a function
    of a numpy array), plus `case` if it has a parameter of that name (case.dtype, .shape,
    .params, .outputs), and returns the output (numpy, torch or JAX array of the output's dtype
    and shape) or a dict {stage: array} for operations of several outputs.

    dtypes, accums: names (fp32, fp16, bf16; accums also "storage"), default all `like` takes.
    shapes: a list of shapes (tuples or "4x256"), default the operation's. params: {name:
    value} fixes a parameter, {name: [choices]} or {name: (lo, hi)} narrows it (run draws the
    values users train with within it). inputs: {name: "scale=0x1p-20"}, run's --input specs.
    seconds: instead of a fixed number of cases, batches of cases on new seeds until the time
    is spent. findings: where case files go (default .precfuzz/findings). minimize: shrink
    each finding with precfuzz's minimizer (up to 3) and name the small case. tensors: {name:
    array} runs the one case of these inputs instead of generated ones (a Hypothesis example,
    a training run's tensors; their dtype and shape are the case's), e.g. to minimize it. Every finding
    and hazard carries `replay`, a shell line that reruns this test or script on that case only.
    """
    info = op_info(op, like)
    variant = _variant_name(fn, variant)
    # a check of nothing must not pass: every count, list and limit says what it is
    for name, v, lo in (("cases", cases, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name}={v!r}: an integer >= {lo}")
    for name, v in (("seconds", seconds), ("timeout", timeout)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
            raise ValueError(f"{name}={v!r}: a positive number of seconds")
    for name, v in (("dtypes", dtypes), ("accums", accums), ("shapes", shapes)):
        if v is not None and (isinstance(v, str) or not len(v)):
            raise ValueError(f"{name}={v!r}: a non-empty list")
    hello_params, param_args = _narrowing(info, params)
    at = findings_dir(findings)
    tensor_specs = _tensor_inputs(tensors, at) if tensors else None
    if tensor_specs:
        dtypes, cases, shapes, seconds = [tensor_specs[1]], 1, None, None
    dtypes = list(dtypes) if dtypes is not None else list(info["dtypes"])
    for t in dtypes:
        if t not in info["dtypes"]:
            raise ValueError(f"dtype {t!r}: {op}/{like} takes {', '.join(info['dtypes'])}")
    entry = {"op": op, "variant": variant, "like": like, "summary": f"Python {getattr(fn, '__qualname__', 'kernel')}",
             "dtypes": dtypes}
    if accums is not None:
        entry["accums"] = list(accums)
    if hello_params:
        entry["params"] = hello_params
    res = CheckResult(op, variant, like)

    replay = [p for p in os.environ.get("PRECFUZZ_REPLAY", "").split(os.pathsep) if p]
    if replay:
        mine = []
        for p in replay:
            try:
                with open(p) as f:
                    c = json.load(f)
            except (OSError, ValueError) as e:
                raise ValueError(f"PRECFUZZ_REPLAY: {p}: {e}") from None
            if isinstance(c, dict) and c.get("kernel") == op and c.get("variant") == variant:
                mine.append(os.path.abspath(p))
        if not mine:
            return res  # the finding is another check's

    server = _Server({variant: (entry, _kernel_fn(fn, to, device, info.get("inputs", ())))})
    env = {"PRECFUZZ_KERNEL_TIMEOUT": str(timeout), "PRECFUZZ_PROGRESS": "0"}
    ks = list(kernels) + [server.entry()]
    try:
        if replay:
            res.replayed = mine
            p = _binary.run(["replay", *mine, "--json"], kernels=ks, env=env)
            _record(res, json.loads(p.stdout), at)
            return res
        common = ["run", "-k", op, "-v", variant, "--json", *param_args]
        if scale is not None:
            common += ["--scale", _hexnum(float(scale))]
        if dist is not None:
            common += ["--dist", dist]
        if oracle is not None:
            common += ["--oracle", oracle]
        for name, spec in (inputs or {}).items():
            common += ["--input", f"{name}:{spec}"]
        for name, path in (tensor_specs[0] if tensor_specs else {}).items():
            common += ["--input", f"{name}:file={path}"]
        shape_args = [_shape_arg(s) for s in shapes] if shapes else [None]
        # accumulations: those given ("storage": the dtype itself), else run's default (fp32)
        acc_of = lambda t: [t if a == "storage" else a for a in accums] if accums else [None]  # noqa: E731
        combos = [(t, a, s) for t in dtypes for a in acc_of(t) for s in shape_args]
        deadline = time.monotonic() + seconds if seconds else None
        next_seed, batch = seed, cases
        while True:
            for t, a, s in combos:
                args = common + ["-t", t, "--seed", str(next_seed), "--cases", str(batch)]
                if a:
                    args += ["-a", a]
                if s:
                    args += ["--shape", s]
                p = _binary.run(args, kernels=ks, env=env)
                _record(res, json.loads(p.stdout), at)
                if deadline and time.monotonic() >= deadline:
                    break
            next_seed += batch
            if not deadline or time.monotonic() >= deadline:
                break
        if minimize:
            for f in res.findings[:3]:
                out = f.case_file[: -len(".json")] + ".min.json"
                p = _binary.run(["minimize", f.case_file, "-o", out], kernels=ks, env=env, check_status=(0, 2))
                if p.returncode == 0:
                    f.minimized = out
                    f.replay = replay_command([out])
        return res
    finally:
        server.close()
