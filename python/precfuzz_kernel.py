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
described in docs/kernel-protocol.md, and implemented in precfuzz.protocol (the package beside
this file), which precfuzz.check uses to serve a callable of a pytest process.
"""

import os
import sys


def _take_stdout():
    """The protocol gets the real standard output; print() and any C library's writes to file
    descriptor 1 go to standard error from now on."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


_protocol_out = _take_stdout()  # before anything imported can print

from precfuzz.protocol import (  # noqa: E402  (after the standard output is taken)
    MAGIC,
    PROTOCOL,
    Case,
    Channel,
    from_torch,
    npy_array as _npy_array,
    npy_bytes as _npy_bytes,
    numpy_dtype,
    serve_channel,
    to_numpy as _to_numpy,
    to_torch,
)

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


class _Channel(Channel):
    """The kernel process's channel: its standard input and the standard output taken at import."""

    def __init__(self):
        super().__init__(sys.stdin.buffer, _protocol_out)


def serve():
    """Says hello with the registered kernels, then answers cases until precfuzz closes the
    input. Returns the exit status (0)."""
    global _channel
    if not _kernels:
        raise RuntimeError("no kernel registered (@kernel(...) before serve())")
    _channel = _Channel()
    return serve_channel(_channel, _kernels)
