"""The exact values of the softmax backward with mpmath (not MPFR), for tests/oracle_mpmath_check.py:
exact(case, inputs) gives every output element's exact value in the layout precfuzz uses (None:
undefined)."""
import mpmath


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
