"""The exact values of softmax with mpmath (not MPFR), for tests/oracle_mpmath_check.py: exact(case,
inputs) gives every output element's exact value in the layout precfuzz uses (None: undefined)."""
import mpmath

from mpmath_util import lowest, parse_hex


def softmax_rows(case, xs):
    rows, cols = case["shape"]
    p = case["params"]
    alpha = parse_hex(p["alpha"])
    sentinel = {"-inf": mpmath.mpf("-inf"), "-10000": mpmath.mpf(-10000), "lowest": mpmath.mpf(lowest(case["dtype"]))}[p["mask_value"]]
    off = cols - rows if cols >= rows else 0
    out = []
    for i in range(rows):
        t = []
        for j in range(cols):
            if p["mask"] == "causal" and j > i + off:
                t.append(sentinel)
            else:
                t.append(alpha * xs[i * cols + j])
        finite = [v for v in t if mpmath.isfinite(v)]
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
