"""The exact values of SwiGLU with mpmath (not MPFR), for tests/oracle_mpmath_check.py:
exact(case, inputs) gives every output element's exact value (None: undefined), from the
definition: a sigma(a) b with sigma(a) = 1 / (1 + e^(-a))."""
import mpmath

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 3x40 --scale 8"
CHECKS = [
    "-v torch -t fp32 --cases 2 --shape 2x50 --scale 64",
    "-v fused -t bf16 --cases 2 --shape 1x64 --input a:value=-90",
    "-v torch -t fp16 --cases 2 --shape 2x33 --special-rate 0.1 --scale 3",
]


def exact(case, inputs):
    out = []
    for a, b in zip(inputs["a"], inputs["b"]):
        if not (mpmath.isfinite(a) and mpmath.isfinite(b)):
            out.append(None)
        else:
            out.append(a * b / (1 + mpmath.exp(-a)))
    return out
