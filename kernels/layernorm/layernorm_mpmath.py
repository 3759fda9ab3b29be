"""The exact values of LayerNorm with mpmath (not MPFR), for tests/oracle_mpmath_check.py:
exact(case, inputs) gives every output element's exact value in the layout precfuzz uses: the
rows' means, their rstd, then y row by row (None: undefined)."""
import mpmath

from mpmath_util import parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 3x17"
CHECKS = [
    "-v welford -t fp16 --cases 2 --shape 3x40 --param zero_centered_gamma=yes --param weights=fp32",
    "-v two-pass -t bf16 -a bf16 --cases 2 --shape 2x33 --input x:offset=64,scale=0.25 --param eps_place=outside",
    "-v moments -t fp32 --cases 2 --shape 2x50 --param eps=0 --special-rate 0.05",
    "-v torch -t fp32 --cases 1 --shape 2x8 --input x:value=3",
]


def exact(case, inputs):
    rows, cols = case["shape"]
    p = case["params"]
    eps = parse_hex(p["eps"])
    outside = p["eps_place"] == "outside"
    one = 1 if p["zero_centered_gamma"] == "yes" else 0
    x, g, b = inputs["x"], inputs["gamma"], inputs["beta"]
    means, rstds, ys = [], [], []
    for i in range(rows):
        row = x[i * cols:(i + 1) * cols]
        if not all(mpmath.isfinite(v) for v in row):
            means.append(None)
            rstds.append(None)
            ys.extend([None] * cols)
            continue
        m = mpmath.fsum(row) / cols
        var = mpmath.fsum((v - m) ** 2 for v in row) / cols
        den = mpmath.sqrt(var) + eps if outside else mpmath.sqrt(var + eps)
        means.append(m)
        if den == 0:
            rstds.append(None)
            ys.extend([None] * cols)
            continue
        r = 1 / den
        rstds.append(r)
        for j in range(cols):
            if not (mpmath.isfinite(g[j]) and mpmath.isfinite(b[j])):
                ys.append(None)
            else:
                ys.append((row[j] - m) * r * (g[j] + one) + b[j])
    return means + rstds + ys
