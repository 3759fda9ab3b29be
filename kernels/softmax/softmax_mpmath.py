"""The exact values of softmax with mpmath (not MPFR), for tests/oracle_mpmath_check.py: exact(case,
inputs) gives every output element's exact value in the layout precfuzz uses (None: undefined)."""
import mpmath

from mpmath_util import lowest, parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 3x17"
CHECKS = [
    "-v safe -t fp16 --scale 8 --cases 3 --shape 3x40 --param mask=causal",
    "-v online -t bf16 --scale 4 --cases 3 --shape 7x4 --param mask=causal",
    "-v naive -t bf16 -a bf16 --dist loguniform --exp-range -20:6 --cases 3 --shape 5x33 --param mask=causal --param mask_value=lowest --special-rate 0.05",
    "-v online -t fp32 --scale 30 --cases 2 --shape 2x300 --param alpha=0.125 --param mask=causal --param mask_value=-10000",
]


def softmax_rows(case, xs):
    rows, cols = case["shape"]
    p = case["params"]
    alpha = parse_hex(p["alpha"])
    sentinel = {"-inf": mpmath.mpf("-inf"), "-10000": mpmath.mpf(-10000), "lowest": mpmath.mpf(lowest(case["dtype"]))}[p["mask_value"]]
    # causal: row i sees columns j <= i + cols - rows (none when i < rows - cols); top-left: j <= i
    hide = {"causal": lambda i, j: j > i + cols - rows, "causal-top-left": lambda i, j: j > i}.get(p["mask"], lambda i, j: False)
    out = []
    for i in range(rows):
        t = []
        for j in range(cols):
            if hide(i, j):
                t.append(sentinel)
            else:
                t.append(alpha * xs[i * cols + j])
        finite = [v for v in t if mpmath.isfinite(v)]
        if all(hide(i, j) for j in range(cols)) and not finite:  # masked whole by -inf: 0 by definition
            out.extend([mpmath.mpf(0)] * cols)
            continue
        if any(mpmath.isnan(v) or v == mpmath.inf for v in t) or not finite:
            out.extend([None] * cols)
            continue
        m = max(finite)
        e = [mpmath.mpf(0) if v == mpmath.ninf else mpmath.exp(v - m) for v in t]
        s = mpmath.fsum(e)
        out.extend(v / s for v in e)
    return out


def exact(case, inputs):
    return softmax_rows(case, inputs["x"])
