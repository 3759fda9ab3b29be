"""precfuzz's kernel protocol (docs/kernel-protocol.md), the kernel side: frames, cases, and
tensors as numpy arrays (bf16 as ml_dtypes.bfloat16) or torch tensors, bit for bit. Used by
precfuzz_kernel (a kernel process of its own) and by precfuzz.check (a callable of the calling
process, served through a relay). Needs numpy only; torch and ml_dtypes are imported when used.
"""

import io
import json
import struct
import sys
import traceback

import numpy as np

PROTOCOL = 1
MAGIC = b"PFK1"


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


def param_value(v):
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
        self.params = {k: param_value(v) for k, v in c.get("params", {}).items()}
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


def to_numpy(x):
    """An output as a numpy array: numpy as it is, torch tensors bit for bit (bfloat16 as
    ml_dtypes'), and anything else that numpy converts (JAX arrays: np.asarray)."""
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch"):
        return from_torch(x)
    if hasattr(x, "__array__"):
        return np.asarray(x)
    raise TypeError(f"an output is a {type(x).__name__}, not an array (numpy, torch, JAX)")


def npy_bytes(a):
    """numpy's .npy format; bfloat16 is written as 2-byte raw values ('<V2'), as numpy.save does."""
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        a = a.view(np.dtype("V2"))
    elif a.dtype not in (np.float32, np.float16):
        raise TypeError(f"an output is {a.dtype}, not float32, float16 or bfloat16")
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=False)
    return buf.getvalue()


def npy_array(b):
    a = np.lib.format.read_array(io.BytesIO(b), allow_pickle=False)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = a.view(_bfloat16())
    return a


class Channel:
    """Frames over two binary streams (the kernel's standard input and output, or a socket)."""

    def __init__(self, inp, out):
        self.inp = inp
        self.out = out

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
            tensors[t["name"]] = npy_array(b)
        return header, tensors

    def write(self, header, tensors=None):
        blobs = [(name, npy_bytes(a)) for name, a in (tensors or {}).items()]
        header = dict(header)
        header["tensors"] = [{"name": name, "nbytes": len(b)} for name, b in blobs]
        h = json.dumps(header).encode()
        self.out.write(MAGIC + struct.pack("<I", len(h)) + h)
        for _, b in blobs:
            self.out.write(b)
        self.out.flush()


def answer(case, fn, inputs):
    """fn's outputs for a case, {stage name: numpy array}: fn returns one array (one stage) or
    a dict of them."""
    y = fn(case, **inputs)
    if isinstance(y, dict):
        return {name: to_numpy(a) for name, a in y.items()}
    if len(case.outputs) != 1:
        names = ", ".join(o["name"] for o in case.outputs)
        raise TypeError(f"{case.kernel} has several outputs ({names}): return a dict of them")
    return {case.outputs[0]["name"]: to_numpy(y)}


def serve_channel(ch, kernels):
    """Says hello with kernels ({variant: (hello entry, fn)}), then answers cases until the
    input ends. A kernel's exception is answered as an error frame (precfuzz's verdict
    "failed") with its traceback on standard error, and the next case is served."""
    ch.write({"type": "hello", "protocol": PROTOCOL, "kernels": [e for e, _ in kernels.values()]})
    while True:
        msg = ch.read()
        if msg is None:
            return 0
        header, inputs = msg
        if header.get("type") != "case":
            raise RuntimeError(f"unexpected message {header.get('type')!r}")
        try:
            case = Case(header)
            if case.variant not in kernels:
                raise KeyError(f"no kernel for variant {case.variant!r}")
            outputs = answer(case, kernels[case.variant][1], inputs)
        except Exception as e:  # the kernel's failure is precfuzz's finding, not the end
            traceback.print_exc(file=sys.stderr)
            ch.write({"type": "error", "id": header["id"], "message": f"{type(e).__name__}: {e}"})
            continue
        ch.write({"type": "result", "id": header["id"]}, outputs)
