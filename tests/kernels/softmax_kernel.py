#!/usr/bin/env python3
"""A kernel process for tests/exec_kernel.sh: softmax computed in float64 and rounded once to
the storage dtype (correct under any contract), or, by the first argument, a kernel that
misbehaves on purpose:

  ok            the correct softmax (variants np-softmax, like safe, and np-naive, like naive),
                and softmax backward (np-softmax-bwd, like softmax_bwd/stored)
  off-by-3      element [0, 1] moved 3 ulps up from the correct value
  wrong-widths  element [0, 1] 0.1% too large, but only at widths w with w % 7 == 3 (failures
                at scattered widths, as PyTorch's fp64 softmax had at 240 widths in 513..1023)
  crash-at N    killed by SIGSEGV on its N-th case (the kernel process crashes)
  exit-at N     exits with status 3 on its N-th case
  hang-at N     sleeps forever on its N-th case (precfuzz's timeout)
  wrong-dtype   answers fp16 cases with float32 outputs
  wrong-shape   answers with the row's transpose (same number of values)
  raise         raises ValueError on every case with a column count of 3
  print         prints to standard output before answering (the module sends it to stderr)
  garbage       writes text instead of a frame on its first case
  bad-hello     a hello whose kernel names no operation
  no-hello      exits before saying hello
  typo-hello    a hello whose kernel says "dtype" for "dtypes"
  lax-hello N   a hello the strict reader refuses: 1 a variant of 48 characters (a case holds 47),
                2 a NUL inside the variant's name, 3 data after the header's JSON, 4 a key twice
  bad-faults N  a hello whose fault switches are malformed: 1 a name starting with '-', 2 one
                name twice, 3 not a list
  chaos N       answers case k with malformed answer number (k + N) % 18: wrong types, ids,
                sizes, names, dtypes, truncated or trailing .npy bytes, an oversized header
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy as np  # noqa: E402

import precfuzz_kernel as pk  # noqa: E402

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
at = int(sys.argv[2]) if len(sys.argv) > 2 else 1
cases = 0

if mode == "no-hello":
    sys.exit(4)


LARGEST = {"fp32": float.fromhex("0x1.fffffep127"), "fp16": 65504.0, "bf16": float.fromhex("0x1.fep127")}


def softmax64(case, x):
    """softmax(alpha x) over the last dimension with the case's mask, in float64."""
    t = x.astype(np.float64) * case.params["alpha"]
    rows, cols = t.shape
    if case.params["mask"] != "none":  # causal: j <= i + cols - rows; causal-top-left: j <= i
        sentinel = {"-inf": -np.inf, "-10000": -10000.0, "lowest": -LARGEST[case.dtype]}[case.params["mask_value"]]
        off = cols - rows if case.params["mask"] == "causal" else 0
        for i in range(rows):
            t[i, max(i + off + 1, 0) :] = sentinel
    t0 = t.copy()
    with np.errstate(all="ignore"):  # inf - inf: NaN, as the exact result is undefined there
        t = t - t.max(axis=1, keepdims=True)
        e = np.exp(t)
        y = e / e.sum(axis=1, keepdims=True)
    y[np.all(np.isneginf(t0), axis=1)] = 0  # a row masked whole by -inf: 0, as precfuzz defines it
    return y


def kernel(case, x):
    global cases
    cases += 1
    if mode == "crash-at" and cases == at:
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "exit-at" and cases == at:
        os._exit(3)
    if mode == "hang-at" and cases == at:
        time.sleep(3600)
    if mode == "raise" and x.shape[1] == 3:
        raise ValueError("three columns are not supported")
    if mode == "print":
        print("debug output a kernel might print")
        os.write(1, b"and a write to file descriptor 1\n")
    if mode == "garbage":
        pk._channel.out.write(b"Traceback (most recent call last): not a frame\n")
        pk._channel.out.flush()
        time.sleep(3600)
    if mode == "chaos":
        chaos(case, x, (cases + at) % 18)
    y = softmax64(case, x).astype(case.np_dtype)
    if mode == "wrong-widths" and x.shape[1] % 7 == 3:
        y[0, 1] *= y.dtype.type(1.001)
    if mode == "off-by-3":
        bits = y.view(np.uint16 if y.dtype.itemsize == 2 else np.uint32)
        bits[0, 1] += 3
    if mode == "wrong-dtype" and case.dtype == "fp16":
        y = y.astype(np.float32)
    if mode == "wrong-shape":
        y = np.ascontiguousarray(y.T)
    return y


def softmax_bwd(case, x, dy):
    """softmax backward in float64, rounded once, answered as one unnamed array: the operation's
    only output (dx) takes it whatever its name."""
    t = x.astype(np.float64)
    e = np.exp(t - t.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    g = dy.astype(np.float64)
    return (s * (g - (g * s).sum(axis=1, keepdims=True))).astype(case.np_dtype)


def frame(header, blobs=()):
    """Writes one frame as given (no checks): the header dict or raw bytes, then the blobs."""
    import json
    import struct

    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    out = pk._channel.out
    out.write(b"PFK1" + struct.pack("<I", len(h)) + h)
    for b in blobs:
        out.write(b)
    out.flush()


def chaos(case, x, k):
    """One malformed answer to the case, then waits to be read (or killed)."""
    y = softmax64(case, x).astype(case.np_dtype)
    good = pk._npy_bytes(y)
    cid = case.id
    answers = [
        lambda: frame({"type": "result", "id": cid, "tensors": "output"}),
        lambda: frame({"type": "result", "id": cid + 1, "tensors": []}),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "output", "nbytes": -1}]}),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "output", "nbytes": 1e30}]}),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "output", "nbytes": 3.5}]}),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "", "nbytes": len(good)}]}, [good]),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "x" * 200, "nbytes": len(good)}]}, [good]),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "nope", "nbytes": len(good)}]}, [good]),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "output", "nbytes": len(good) - 3}]}, [good[:-3]]),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "output", "nbytes": len(good) + 4}]},
                      [good + b"junk"]),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "output", "nbytes": len(good)}] * 2}, [good, good]),
        lambda: frame({"type": "result", "id": cid, "tensors": [{"name": "output", "nbytes": 16}]}, [b"\x93NUMPY" + bytes(10)]),
        lambda: frame(b"{not json"),
        lambda: frame(b"[1, 2, 3]"),
        lambda: frame({"type": "error", "id": cid, "message": 42}),
        None,  # 15: below
        lambda: frame(b"", [b"\x00" * 8]),  # a header of length 0
        lambda: frame({"type": "result", "id": cid, "events": ["overflw"], "tensors": [{"name": "output", "nbytes": len(good)}]},
                      [good]),
    ]
    if k == 15:  # a header length of 2^31: precfuzz must not wait for (or allocate) it
        pk._channel.out.write(b"PFK1" + (2**31).to_bytes(4, "little"))
        pk._channel.out.flush()
        time.sleep(3600)
    answers[k]()
    time.sleep(3600)  # precfuzz either read a whole frame (and waits for nothing more) or kills us


if mode == "bad-hello":
    pk.kernel("no-such-op", variant="np-softmax", like="safe")(kernel)
elif mode == "bad-faults":
    pk.kernel("softmax", variant="np-softmax", like="safe",
              faults={1: ["ok", "-bad"], 2: ["twice", "twice"], 3: ["x"]}[at])(kernel)
    if at == 3:
        pk._kernels["np-softmax"][0]["faults"] = "x"
elif mode == "lax-hello":
    name = {1: "v" * 48, 2: "ok\u0000evil"}.get(at, "np-softmax")
    pk.kernel("softmax", variant=name, like="safe")(kernel)
    if at in (3, 4):  # the header's text as written, then spoiled
        import json  # the protocol's (precfuzz.protocol) json.dumps, patched

        _dumps = json.dumps
        json.dumps = lambda o, **k: _dumps(o, **k) + " x" if at == 3 else '{"type": "hello", ' + _dumps(o, **k)[1:]
elif mode == "typo-hello":
    pk.kernel("softmax", variant="np-softmax", like="safe")(kernel)
    pk._kernels["np-softmax"][0]["dtype"] = ["fp32"]
else:
    pk.kernel("softmax", variant="np-softmax", like="safe", summary="softmax in float64, rounded once")(kernel)
    pk.kernel("softmax", variant="np-naive", like="naive", dtypes=["fp32", "fp16"], accums=["fp32"],
              params={"mask": ["none"], "alpha": [0.5, 2]})(kernel)
    pk.kernel("softmax_bwd", variant="np-softmax-bwd", like="stored", accums=["fp32"],
              summary="softmax backward in float64, rounded once")(softmax_bwd)
sys.exit(pk.serve())
