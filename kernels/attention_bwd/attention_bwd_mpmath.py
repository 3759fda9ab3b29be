"""The exact attention backward with mpmath (not MPFR), for tests/oracle_mpmath_check.py: exact(case,
inputs) gives every output element's exact value in the layout precfuzz uses: dQ, dK, dV, then
(standard) dP and dS; None where a head reads a non-finite input."""
import mpmath

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 1x1x4x5x3"
CHECKS = [
    "-t fp16 --cases 2 --shape 1x2x5x6x4",
    "-v flash -t bf16 --cases 2 --shape 1x1x6x5x3 --param mask=causal --scale 4",
    "-v flash-pdp -t fp32 --cases 2 --shape 2x1x4x4x8 --param mask=causal-top-left --special-rate 0.05",
]


def masked(mask, i, j, lq, lk):
    if mask == "causal-top-left":
        return j > i
    if mask == "causal":
        return j > i + lk - lq  # none when i < lq - lk: P, and the row's gradients, 0
    return False


def exact(case, inputs):
    B, H, Lq, Lk, d = case["shape"]
    mask = case["params"]["mask"]
    standard = case["variant"] == "standard"
    q, k, v, do = inputs["q"], inputs["k"], inputs["v"], inputs["do"]
    alpha = 1 / mpmath.sqrt(d)
    dQ, dK, dV, dP, dS = [], [], [], [], []
    for h in range(B * H):
        Q = [q[(h * Lq + i) * d:(h * Lq + i + 1) * d] for i in range(Lq)]
        K = [k[(h * Lk + j) * d:(h * Lk + j + 1) * d] for j in range(Lk)]
        V = [v[(h * Lk + j) * d:(h * Lk + j + 1) * d] for j in range(Lk)]
        G = [do[(h * Lq + i) * d:(h * Lq + i + 1) * d] for i in range(Lq)]
        if not all(mpmath.isfinite(x) for rows in (Q, K, V, G) for r in rows for x in r):
            dQ += [None] * (Lq * d); dK += [None] * (Lk * d); dV += [None] * (Lk * d)
            dP += [None] * (Lq * Lk); dS += [None] * (Lq * Lk)
            continue
        P, S_, DP = [], [], []
        for i in range(Lq):
            s = [None if masked(mask, i, j, Lq, Lk) else alpha * mpmath.fsum(a * b for a, b in zip(Q[i], K[j]))
                 for j in range(Lk)]
            if all(x is None for x in s):  # a query that sees no key: P = 0 (PyTorch's)
                p = [mpmath.mpf(0)] * Lk
            else:
                m = max(x for x in s if x is not None)
                e = [0 if x is None else mpmath.exp(x - m) for x in s]
                z = mpmath.fsum(e)
                p = [x / z for x in e]
            dp = [mpmath.fsum(a * b for a, b in zip(G[i], V[j])) for j in range(Lk)]
            D = mpmath.fsum(a * b for a, b in zip(p, dp))
            P.append(p); DP.append(dp); S_.append([p[j] * (dp[j] - D) for j in range(Lk)])
        dQ += [alpha * mpmath.fsum(S_[i][j] * K[j][e] for j in range(Lk)) for i in range(Lq) for e in range(d)]
        dK += [alpha * mpmath.fsum(S_[i][j] * Q[i][e] for i in range(Lq)) for j in range(Lk) for e in range(d)]
        dV += [mpmath.fsum(P[i][j] * G[i][e] for i in range(Lq)) for j in range(Lk) for e in range(d)]
        dP += [DP[i][j] for i in range(Lq) for j in range(Lk)]
        dS += [S_[i][j] for i in range(Lq) for j in range(Lk)]
    return dQ + dK + dV + (dP + dS if standard else [])
