"""The exact values of rotary embeddings with mpmath (not MPFR), for tests/oracle_mpmath_check.py:
exact(case, inputs) gives every output element's exact value in the layout precfuzz uses: y
position by position, head by head (None: undefined). The angle straight from its definition,
p / f (linear) times B^(-2k/dim), B = base f^(dim/(dim-2)) under ntk, by mpmath's own cos and sin."""
import mpmath

from mpmath_util import parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 5x2x12 --param offset=1000"
CHECKS = [
    "-v torch -t bf16 -a bf16 --cases 2 --shape 3x1x16 --param offset=300 --param layout=interleaved",
    "-v fused -t fp32 --cases 2 --shape 4x1x10 --param offset=999999 --param scaling=linear --param factor=8",
    "-v torch -t fp16 --cases 2 --shape 2x2x8 --param offset=0 --param scaling=ntk --param factor=4 --param base=500000",
    "-v torch -t fp32 --cases 2 --shape 3x1x6 --param offset=16777215 --special-rate 0.1",
]


def exact(case, inputs):
    rows, heads, dim = case["shape"]
    p = case["params"]
    base, f, off = parse_hex(p["base"]), parse_hex(p["factor"]), mpmath.mpf(p["offset"])
    scaling, layout = p["scaling"], p["layout"]
    B = base * f ** (mpmath.mpf(dim) / (dim - 2)) if scaling == "ntk" else base
    t = inputs["t"]
    h = dim // 2
    ys = []
    for i in range(rows):
        P = (off + i) / f if scaling == "linear" else off + i
        cs = [(mpmath.cos(P * B ** (-mpmath.mpf(2 * k) / dim)), mpmath.sin(P * B ** (-mpmath.mpf(2 * k) / dim)))
              for k in range(h)]
        for hd in range(heads):
            v = t[(i * heads + hd) * dim:(i * heads + hd + 1) * dim]
            for j in range(dim):
                if layout == "interleaved":
                    k, q, s = j // 2, j ^ 1, (1 if j % 2 else -1)
                else:
                    k, q, s = j % h, (j + h if j < h else j - h), (-1 if j < h else 1)
                if not (mpmath.isfinite(v[j]) and mpmath.isfinite(v[q])):
                    ys.append(None)
                    continue
                c, sn = cs[k]
                ys.append(v[j] * c + s * v[q] * sn)
    return ys
