"""Writes the tensor-file fixtures of tests/tensor_files.sh with the libraries users save
tensors with: numpy.save, ml_dtypes' bfloat16 and safetensors. The expected softmax outputs
are computed with mpmath (60 digits) and rounded to the dtype once, so "softmax_rn" is the
correctly rounded result; "softmax_3ulps" moves element [1, 2] up by 3 ulps. The same values
are written as hex floats into case files, so the test can compare a file-fed run with a
values-fed one.

    python3 tests/data/tensors/make.py tests/data/tensors   (numpy, ml_dtypes, safetensors, mpmath)
"""
import json
import os
import sys

import ml_dtypes
import mpmath
import numpy as np
from safetensors.numpy import save_file

out = sys.argv[1]
rng = np.random.default_rng(20261123)


def case(variant, dtype, shape, values):
    return {"format": "precfuzz-case/1", "kernel": "softmax", "variant": variant, "dtype": dtype,
            "accum": "fp32", "shape": list(shape),
            "inputs": {"x": {"values": [float(v).hex() for v in np.asarray(values, np.float64).ravel()]}}}


def softmax_rn(x, np_dtype, prec, emin):
    """Correctly rounded softmax rows: exact in mpmath, one rounding to the dtype (prec bits, exponents
    from emin, subnormals below)."""
    mpmath.mp.dps = 60
    y = np.empty(x.shape, np.float64)
    for i, row in enumerate(np.asarray(x, np.float64)):
        e = [mpmath.exp(mpmath.mpf(v)) for v in row]
        s = mpmath.fsum(e)
        for j, v in enumerate(e):
            q = v / s  # at 60 digits
            if q < mpmath.mpf(2) ** emin:  # subnormal: a multiple of the smallest subnormal, ties to even
                y[i, j] = float(mpmath.nint(q * mpmath.mpf(2) ** (prec - 1 - emin))) * 2.0 ** (emin - prec + 1)
            else:
                with mpmath.workprec(prec):
                    y[i, j] = float(+q)  # rounded once to prec bits
    return y.astype(np_dtype)


# fp16 logits, as numpy.save writes them
x16 = (rng.standard_normal((4, 8)) * 3).astype(np.float16)
np.save(os.path.join(out, "logits_fp16.npy"), x16)
np.save(os.path.join(out, "logits_fp16_fortran.npy"), np.asfortranarray(x16))
json.dump(case("safe", "fp16", x16.shape, x16), open(os.path.join(out, "logits_fp16.values.json"), "w"), indent=1)
y = softmax_rn(x16, np.float16, 11, -14)
np.save(os.path.join(out, "softmax_rn.npy"), y)
moved = y.copy()
for _ in range(3):
    moved[1, 2] = np.nextafter(moved[1, 2], np.float16(np.inf))
np.save(os.path.join(out, "softmax_3ulps.npy"), moved)
np.save(os.path.join(out, "softmax_fp32.npy"), y.astype(np.float32))

# bf16 logits in a safetensors file beside another tensor, and as numpy.save writes ml_dtypes' bfloat16
xb = (rng.standard_normal((3, 16)) * 5).astype(ml_dtypes.bfloat16)
save_file({"logits": xb, "bias": np.zeros(5, np.float32)}, os.path.join(out, "logits_bf16.safetensors"))
np.save(os.path.join(out, "logits_bf16.npy"), xb)
json.dump(case("safe", "bf16", xb.shape, xb.astype(np.float32)), open(os.path.join(out, "logits_bf16.values.json"), "w"), indent=1)

# what must be refused: float64, an integer safetensors tensor
np.save(os.path.join(out, "bad_float64.npy"), np.zeros((4, 8)))
save_file({"ids": np.zeros(4, np.int32)}, os.path.join(out, "bad_int32.safetensors"))
