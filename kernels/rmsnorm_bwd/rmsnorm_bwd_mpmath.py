"""The exact values of RMSNorm's backward with mpmath (not MPFR), for tests/oracle_mpmath_check.py:
exact(case, inputs) gives every output element's exact value in the layout precfuzz uses: dx row
by row, then dgamma (None: undefined). The textbook formula, directly:
rstd = 1 / sqrt(mean(x^2) + eps), xhat = x rstd, a = g' dy, dx = rstd (a - xhat mean(a xhat)),
dgamma = sum over rows of dy xhat."""
import mpmath

from mpmath_util import parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 5x17"
CHECKS = [
    "-v fused -t fp16 --cases 2 --shape 6x40 --param zero_centered_gamma=yes --param weights=fp32 --param blocks=4",
    "-v fused -t bf16 -a bf16 --cases 2 --shape 3x33 --param eps=0 --special-rate 0.05",
    "-v torch -t fp32 --cases 2 --shape 40x37 --input x:scale=0x1p-10",
    "-v torch -t bf16 --cases 1 --shape 3x8 --input x:value=3",
]


def exact(case, inputs):
    rows, cols = case["shape"]
    p = case["params"]
    eps = parse_hex(p["eps"])
    one = 1 if p["zero_centered_gamma"] == "yes" else 0
    x, dy, g = inputs["x"], inputs["dy"], inputs["gamma"]
    fin = mpmath.isfinite
    dx, xhats = [], []
    for i in range(rows):
        row, d = x[i * cols:(i + 1) * cols], dy[i * cols:(i + 1) * cols]
        ms = mpmath.fsum(v * v for v in row) / cols if all(fin(v) for v in row) else None
        if ms is None or ms + eps == 0:
            xhats.append(None)
            dx.extend([None] * cols)
            continue
        r = 1 / mpmath.sqrt(ms + eps)
        xh = [v * r for v in row]
        xhats.append(xh)
        if not (all(fin(v) for v in d) and all(fin(v) for v in g)):
            dx.extend([None] * cols)
            continue
        a = [(g[j] + one) * d[j] for j in range(cols)]
        max_ = mpmath.fsum(a[j] * xh[j] for j in range(cols)) / cols
        dx.extend([r * (a[j] - xh[j] * max_) for j in range(cols)])
    dgamma = []
    for j in range(cols):
        col = [dy[i * cols + j] for i in range(rows)]
        if not all(fin(v) for v in col) or any(h is None for h in xhats):
            dgamma.append(None)
        else:
            dgamma.append(mpmath.fsum(col[i] * xhats[i][j] for i in range(rows)))
    return dx + dgamma
