"""The exact values of RMSNorm with mpmath (not MPFR), for tests/oracle_mpmath_check.py:
exact(case, inputs) gives every output element's exact value in the layout precfuzz uses: the
rows' rstd, then y row by row (None: undefined)."""
import mpmath

from mpmath_util import parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 3x17"
CHECKS = [
    "-v fused -t fp16 --cases 2 --shape 3x40 --param zero_centered_gamma=yes --param weights=fp32",
    "-v fused -t bf16 -a bf16 --cases 2 --shape 2x33 --param eps=0 --special-rate 0.05",
    "-v torch -t fp32 --cases 2 --shape 2x300 --param eps=0x1p-23",
]


def exact(case, inputs):
    rows, cols = case["shape"]
    p = case["params"]
    eps = parse_hex(p["eps"])
    one = 1 if p["zero_centered_gamma"] == "yes" else 0
    x, g = inputs["x"], inputs["gamma"]
    rstds, ys = [], []
    for i in range(rows):
        row = x[i * cols:(i + 1) * cols]
        if not all(mpmath.isfinite(v) for v in row):
            rstds.append(None)
            ys.extend([None] * cols)
            continue
        w = mpmath.fsum(v * v for v in row) / cols + eps
        if w == 0:
            rstds.append(None)
            ys.extend([None] * cols)
            continue
        r = 1 / mpmath.sqrt(w)
        rstds.append(r)
        ys.extend(row[j] * r * (g[j] + one) if mpmath.isfinite(g[j]) else None for j in range(cols))
    return rstds + ys
