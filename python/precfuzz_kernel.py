"""The kernel side of precfuzz's kernel protocol, in a few lines of your own code.

    from precfuzz_kernel import kernel, serve

    @kernel("softmax", variant="my-softmax", like="safe", dtypes=["fp32", "fp16"], accums=["fp32"])
    def my_softmax(case, x):
        ...                      # x: a numpy array of the case's dtype and shape
        return y                 # an array of the output's dtype and shape (numpy or torch)

    if __name__ == "__main__":
        serve()

and then:  precfuzz --kernels exec:"python3 my_kernel.py" run -k softmax -v my-softmax -t fp16

precfuzz starts the script once and sends it case after case over its standard input; serve()
answers each with the function registered for the case's variant. The function gets a Case
and the case's inputs by name (as numpy arrays: float32, float16, or ml_dtypes.bfloat16 for
bf16, which then needs `pip install ml_dtypes`), and returns the output (one stage) or a dict
{stage name: array} (operations of several stages, e.g. Adam's m, v, param); case.outputs
says which, in which dtype and shape. A torch tensor may be returned as it is; to_torch()
gives the inputs as torch tensors. An exception is reported by precfuzz as the verdict
"failed" with its message (and the traceback here, on standard error); the process serves on.

Anything the kernel prints goes to standard error: standard output carries the protocol. This
holds from the moment the module is imported (import it before libraries that print when they
load).
Needs numpy only (torch and ml_dtypes are imported when used). The protocol itself is
described in docs/kernel-protocol.md.
"""

import io
import json
import os
import struct
import sys
import traceback

import numpy as np

PROTOCOL = 1
MAGIC = b"PFK1"

_kernels = {}  # variant -> (hello entry, function)
_channel = None  # serve()'s


def kernel(op, variant, like, summary=None, dtypes=None, accums=None, params=None, faults=None):
    """Registers the decorated function as `variant` of precfuzz's operation `op`, judged by
    the contract of the built-in variant `like` (its bound and domain). dtypes and accums
    (names: fp32, fp16, bf16; accums also "storage") narrow what it takes; the default is
    everything `like` takes. params narrows the operation's parameters: {"mask_value":
    ["-inf"]} (choices), {"layer": [1, 1]} (a range); precfuzz then refuses other cases
    (exit 2 on the command line; the fuzz drivers fit theirs into them), and a case that does
    not set the parameter gets the operation's default if it is taken, else the range's
    nearest end (the first choice). faults names the kernel's own
    fault switches: precfuzz --fault NAME sends NAME as case.fault, and the kernel turns it on."""

    def register(fn):
        if variant in _kernels:
            raise ValueError(f"variant {variant!r} registered twice")
        entry = {"op": op, "variant": variant, "like": like}
        if summary is not None:
            entry["summary"] = summary
        if dtypes is not None:
            entry["dtypes"] = list(dtypes)
        if accums is not None:
            entry["accums"] = list(accums)
        if params is not None:
            entry["params"] = {k: list(v) for k, v in params.items()}
        if faults is not None:
            entry["faults"] = list(faults)
        _kernels[variant] = (entry, fn)
        return fn

    return register


def _bfloat16():
    try:
        import ml_dtypes
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("bf16 tensors need ml_dtypes (pip install ml_dtypes)") from e
    return ml_dtypes.bfloat16


def numpy_dtype(name):
    """The numpy dtype of a precfuzz dtype name (fp32, fp16, bf16)."""
    if name == "fp32":
        return np.dtype(np.float32)
    if name == "fp16":
        return np.dtype(np.float16)
    if name == "bf16":
        return np.dtype(_bfloat16())
    raise ValueError(f"no dtype {name!r}")


def _param(v):
    """Case parameters: reals are exact hex strings ("0x1.8p-3"), choices their names ("-inf"
    is a choice of the mask value, not a number)."""
    if isinstance(v, str) and v.lstrip("-").startswith("0x"):
        return float.fromhex(v)
    return v


class Case:
    """One case: kernel, variant, dtype, accum (names), shape (a tuple of the operation's
    dimensions), params (a dict: floats, or names for choices), fault, and outputs: a list of
    {"name", "dtype", "shape"} the answer must hold. raw is the case's JSON as sent."""

    def __init__(self, header):
        c = header["case"]
        self.raw = c
        self.kernel = c["kernel"]
        self.variant = c["variant"]
        self.dtype = c["dtype"]
        self.accum = c["accum"]
        self.shape = tuple(c["shape"])
        self.params = {k: _param(v) for k, v in c.get("params", {}).items()}
        self.fault = c.get("fault", "")
        self.outputs = header["outputs"]
        self.id = header["id"]

    @property
    def np_dtype(self):
        """The numpy dtype of the case's storage dtype."""
        return numpy_dtype(self.dtype)


def to_torch(a, device="cpu"):
    """A numpy array (float32, float16, or ml_dtypes.bfloat16) as a torch tensor on device,
    bit for bit."""
    import torch

    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).to(device)
    return torch.from_numpy(a.copy()).to(device)


def from_torch(t):
    """A torch tensor as a numpy array of the same dtype (bfloat16 as ml_dtypes'), bit for bit."""
    import torch

    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(_bfloat16())
    return t.numpy()


def _to_numpy(x):
    if type(x).__module__.startswith("torch"):
        return from_torch(x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"an output is a {type(x).__name__}, not a numpy array or torch tensor")
    return x


def _npy_bytes(a):
    """numpy's .npy format; bfloat16 is written as 2-byte raw values ('<V2'), as numpy.save does."""
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        a = a.view(np.dtype("V2"))
    elif a.dtype not in (np.float32, np.float16):
        raise TypeError(f"an output is {a.dtype}, not float32, float16 or bfloat16")
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=False)
    return buf.getvalue()


def _npy_array(b):
    a = np.lib.format.read_array(io.BytesIO(b), allow_pickle=False)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = a.view(_bfloat16())
    return a


def _take_stdout():
    """The protocol gets the real standard output; print() and any C library's writes to file
    descriptor 1 go to standard error from now on."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


_protocol_out = _take_stdout()


class _Channel:
    def __init__(self):
        self.out = _protocol_out
        self.inp = sys.stdin.buffer

    def read_exactly(self, n):
        b = self.inp.read(n)
        if b is None or len(b) < n:
            return None
        return b

    def read(self):
        """The next frame as (header, {name: array}); None at the end of the input."""
        h = self.read_exactly(8)
        if h is None:
            return None
        if h[:4] != MAGIC:
            raise RuntimeError(f"not a precfuzz frame: {h!r}")
        (n,) = struct.unpack("<I", h[4:])
        header = json.loads(self.read_exactly(n))
        tensors = {}
        for t in header.get("tensors", []):
            b = self.read_exactly(t["nbytes"])
            tensors[t["name"]] = _npy_array(b)
        return header, tensors

    def write(self, header, tensors=None):
        blobs = [(name, _npy_bytes(a)) for name, a in (tensors or {}).items()]
        header = dict(header)
        header["tensors"] = [{"name": name, "nbytes": len(b)} for name, b in blobs]
        h = json.dumps(header).encode()
        self.out.write(MAGIC + struct.pack("<I", len(h)) + h)
        for _, b in blobs:
            self.out.write(b)
        self.out.flush()


def _answer(case, fn, inputs):
    y = fn(case, **inputs)
    if isinstance(y, dict):
        return {name: _to_numpy(a) for name, a in y.items()}
    if len(case.outputs) != 1:
        names = ", ".join(o["name"] for o in case.outputs)
        raise TypeError(f"{case.kernel} has several outputs ({names}): return a dict of them")
    return {case.outputs[0]["name"]: _to_numpy(y)}


def serve():
    """Says hello with the registered kernels, then answers cases until precfuzz closes the
    input. Returns the exit status (0)."""
    global _channel
    if not _kernels:
        raise RuntimeError("no kernel registered (@kernel(...) before serve())")
    ch = _channel = _Channel()
    ch.write({"type": "hello", "protocol": PROTOCOL, "kernels": [e for e, _ in _kernels.values()]})
    while True:
        msg = ch.read()
        if msg is None:
            return 0
        header, inputs = msg
        if header.get("type") != "case":
            raise RuntimeError(f"unexpected message {header.get('type')!r}")
        try:
            case = Case(header)
            if case.variant not in _kernels:
                raise KeyError(f"no kernel for variant {case.variant!r}")
            outputs = _answer(case, _kernels[case.variant][1], inputs)
        except Exception as e:  # the kernel's failure is precfuzz's finding, not the end
            traceback.print_exc(file=sys.stderr)
            ch.write({"type": "error", "id": header["id"], "message": f"{type(e).__name__}: {e}"})
            continue
        ch.write({"type": "result", "id": header["id"]}, outputs)
