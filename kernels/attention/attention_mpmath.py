"""The exact values of attention with mpmath (not MPFR), for tests/oracle_mpmath_check.py: exact(case,
inputs) gives every output element's exact value in the layout precfuzz uses (None: undefined)."""
import mpmath

from mpmath_util import lowest, parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 1x1x4x5x3"
CHECKS = [
    "-t fp16 --cases 2 --shape 2x1x3x5x4 --param mask=causal --param mask_value=-10000 --scale 3",
    "-v inward -t bf16 --cases 2 --shape 1x2x6x4x4 --param mask=causal --scale 2",
    "-v layer-scaled -t bf16 --cases 2 --shape 1x2x4x6x8 --param layer=3 --dist heavy --scale 2",
    "-v flash -t fp32 --cases 2 --shape 1x1x5x9x3 --param block=2 --param mask=causal --scale 4",
]


def attention(case, q, k, v):
    """Exact O, then (non-flash) S and P, in the layout precfuzz uses."""
    B, H, Lq, Lk, d = case["shape"]
    p = case["params"]
    sentinel = {"-inf": mpmath.mpf("-inf"), "-10000": mpmath.mpf(-10000),
                "lowest": mpmath.mpf(lowest(case["dtype"]))}[p["mask_value"]]
    Lstore = p["layer"] if case["variant"] == "layer-scaled" else 1
    # causal: query i sees keys j <= i + Lk - Lq (PyTorch's causal_lower_right: none when
    # i < Lq - Lk); causal-top-left: j <= i
    hide = {"causal": lambda i, j: j > i + Lk - Lq, "causal-top-left": lambda i, j: j > i}.get(p["mask"], lambda i, j: False)
    alpha = 1 / mpmath.sqrt(d)
    O, S, P = [], [], []
    for h in range(B * H):
        for i in range(Lq):
            qi = q[(h * Lq + i) * d:(h * Lq + i + 1) * d]
            s = [alpha * mpmath.fsum(qi[m] * k[(h * Lk + j) * d + m] for m in range(d)) for j in range(Lk)]
            S.extend(x / Lstore for x in s)
            t = [sentinel if hide(i, j) else s[j] for j in range(Lk)]
            if all(x == mpmath.ninf for x in t):  # a query that sees no key: P and O are 0 (PyTorch's)
                P.extend([mpmath.mpf(0)] * Lk)
                O.extend([mpmath.mpf(0)] * d)
                continue
            mx = max(x for x in t if mpmath.isfinite(x))
            e = [mpmath.mpf(0) if x == mpmath.ninf else mpmath.exp(x - mx) for x in t]
            z = mpmath.fsum(e)
            pr = [x / z for x in e]
            P.extend(pr)
            O.extend(mpmath.fsum(pr[j] * v[(h * Lk + j) * d + m] for j in range(Lk)) for m in range(d))
    return O if case["variant"] == "flash" else O + S + P


def exact(case, inputs):
    return attention(case, inputs["q"], inputs["k"], inputs["v"])
