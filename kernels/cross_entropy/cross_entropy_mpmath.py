"""The exact values of cross-entropy with mpmath (not MPFR), for tests/oracle_mpmath_check.py:
exact(case, inputs) gives every output element's exact value in the layout precfuzz uses: the
per-row losses, the reduced loss (mean or sum; none has none), the gradient (None: undefined)."""
import mpmath

from mpmath_util import parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 3x17"
CHECKS = [
    "-t fp16 --cases 3 --shape 3x40",
    "-v fused -t fp32 --cases 3 --shape 4x33 --scale 30 --param label_smoothing=0.25 --param z_loss=0x1p-10",
    "-v chunked -t bf16 --cases 3 --shape 3x50 --param chunk=7 --param reduction=sum --scale 8",
    "-v logsoftmax -t bf16 -a bf16 --cases 3 --shape 4x9 --param label_smoothing=0.5 --param reduction=none --special-rate 0.1",
]


def exact(case, inputs):
    rows, cols = case["shape"]
    p = {k: (parse_hex(v) if isinstance(v, str) and v.startswith(("0x", "-0x")) else v) for k, v in case["params"].items()}
    eps = mpmath.mpf(p.get("label_smoothing", 0))
    z = mpmath.mpf(p.get("z_loss", 0))
    ignore = p.get("ignore_index", -100)
    reduction = p.get("reduction", "mean")
    x, target = inputs["logits"], inputs["target"]
    counted = [i for i in range(rows) if target[i] != ignore]
    g = mpmath.mpf(1) / len(counted) if reduction == "mean" and counted else mpmath.mpf(1)
    losses, grads, undefined = [], [], False
    for i in range(rows):
        xr = x[i * cols:(i + 1) * cols]
        if target[i] == ignore:
            losses.append(mpmath.mpf(0))
            grads.extend([mpmath.mpf(0)] * cols)
            continue
        if not all(mpmath.isfinite(v) for v in xr):
            losses.append(None)
            grads.extend([None] * cols)
            undefined = True
            continue
        t = int(target[i])
        m = max(xr)
        e = [mpmath.exp(v - m) for v in xr]
        Z = mpmath.fsum(e)
        lse = m + mpmath.log(Z)
        losses.append(lse - (1 - eps) * xr[t] - eps / cols * mpmath.fsum(xr) + z * lse ** 2)
        # the textbook gradient, directly (1000 bits absorb the cancellation of p_t - 1 in the test cases)
        for j in range(cols):
            grads.append(g * (e[j] / Z * (1 + 2 * z * lse) - eps / cols - ((1 - eps) if j == t else 0)))
    out = list(losses)
    if reduction != "none":
        if undefined or (reduction == "mean" and not counted):
            out.append(None)
        else:
            s = mpmath.fsum(losses[i] for i in counted)
            out.append(s / len(counted) if reduction == "mean" else s)
    return out + grads
