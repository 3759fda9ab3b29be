"""The exact values of the softmax backward with mpmath (not MPFR), for tests/oracle_mpmath_check.py:
exact(case, inputs) gives every output element's exact value in the layout precfuzz uses (None:
undefined)."""
import mpmath

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 3x17"
CHECKS = [
    "-t fp16 --cases 3 --shape 3x40",
    "-v recompute -t fp32 --cases 4 --shape 2x33 --scale 8 --special-rate 0.05",
    "-v stored -t bf16 -a bf16 --cases 4 --shape 3x9 --special-rate 0.2 --dist heavy",
]


def exact(case, inputs):
    rows, cols = case["shape"]
    x, dy = inputs["x"], inputs["dy"]
    out = []
    for i in range(rows):
        xr, gr = x[i * cols:(i + 1) * cols], dy[i * cols:(i + 1) * cols]
        if not all(mpmath.isfinite(v) for v in xr + gr):
            out.extend([None] * cols)
            continue
        m = max(xr)
        e = [mpmath.exp(v - m) for v in xr]
        z = mpmath.fsum(e)
        s = [v / z for v in e]
        # sum_j s_j = 1: the sum taken around c = dy at the largest x is exact where dy is constant
        c = gr[xr.index(m)]
        S = mpmath.fsum((g - c) * p for g, p in zip(gr, s))
        out.extend(p * ((g - c) - S) for g, p in zip(gr, s))
    return out
