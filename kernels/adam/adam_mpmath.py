"""The exact values of one Adam step with mpmath (not MPFR), for tests/oracle_mpmath_check.py: exact(case,
inputs) gives every output element's exact value in the layout precfuzz uses (None: undefined)."""
import mpmath

from mpmath_util import parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 20"
CHECKS = [
    "-v fused -t bf16 --cases 2 --shape 20 --param step=7 --param wd=0.1 --param beta2=0.95",
    "-v torch -t bf16 --cases 2 --shape 20 --param step=7 --param wd=0.1 --param beta2=0.95",
    "-v torch-fused-cuda -t bf16 --cases 2 --shape 20 --param step=7 --param wd=0.1 --param beta2=0.95",
    "-v eps-inside -t bf16 --cases 2 --shape 20 --param step=7 --param wd=0.1 --param beta2=0.95",
    "-v no-bias-correction -t bf16 --cases 2 --shape 20 --param step=7 --param wd=0.1 --param beta2=0.95",
    "-v state-lowp -t bf16 --cases 2 --shape 20 --param step=7 --param wd=0.1 --param beta2=0.95",
    "-v no-master -t fp16 --cases 2 --shape 20 --param mode=l2 --param wd=0.01",
    "-v torch-fused -t bf16 --cases 2 --shape 20 --param grad_scale=1000 --param found_inf=0",
    "-v torch-fused -t fp16 --cases 2 --shape 20 --param found_inf=1",
]


def adam(case, pv, gv, mv, vv):
    """Exact m', v', p' (and the written-back parameter for variants with an fp32 master)."""
    p = {k: (parse_hex(x) if isinstance(x, str) and x.startswith(("0x", "-0x")) else x) for k, x in case["params"].items()}
    b1, b2, lr, eps, wd, t = p["beta1"], p["beta2"], p["lr"], p["eps"], p["wd"], int(p["step"])
    var = case["variant"]
    nobc = var == "no-bias-correction"
    bc1 = 1 if nobc else 1 - b1 ** t
    bc2 = 1 if nobc else 1 - b2 ** t
    # the fused kernels' grad_scale (the gradients arrive times S) and found_inf (no step at all)
    gs, skip = p.get("grad_scale", 1), int(p.get("found_inf", 0))
    M, V, P = [], [], []
    for p0, g0, m0, v0 in zip(pv, gv, mv, vv):
        if skip:
            M.append(m0)
            V.append(v0)
            P.append(p0)
            continue
        g0 = mpmath.mpf(g0) / gs
        g = g0 + wd * p0 if p["mode"] == "l2" else g0
        m = b1 * m0 + (1 - b1) * g
        v = b2 * v0 + (1 - b2) * g * g
        d = mpmath.sqrt(v / bc2 + eps) if var == "eps-inside" else mpmath.sqrt(v / bc2) + eps
        upd = (m / bc1) / d + (0 if p["mode"] == "l2" else wd * p0)
        M.append(m)
        V.append(v)
        P.append(p0 - lr * upd)
    master = var not in ("torch", "torch-foreach", "torch-fused", "torch-fused-cuda", "no-master")
    return M + V + P + (P if master else [])


def exact(case, inputs):
    return adam(case, inputs["p"], inputs["g"], inputs["m"], [abs(x) for x in inputs["v"]])
