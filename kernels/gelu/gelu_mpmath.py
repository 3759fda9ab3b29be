"""The exact values of GELU with mpmath (not MPFR), for tests/oracle_mpmath_check.py: exact(case,
inputs) gives every output element's exact value (None: undefined), from the definition as
written: (x / 2)(1 + erf(x / sqrt 2)), or (x / 2)(1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))."""
import mpmath

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 3x40 --scale 4"
CHECKS = [
    "-v torch -t fp32 --cases 2 --shape 2x50 --param approximate=tanh --scale 8",
    "-v fused -t bf16 --cases 2 --shape 1x64 --input x:value=-7.5",
    "-v torch -t fp16 --cases 2 --shape 2x33 --special-rate 0.1 --scale 3",
]


def exact(case, inputs):
    tanh_form = case["params"]["approximate"] == "tanh"
    out = []
    for x in inputs["x"]:
        if not mpmath.isfinite(x):
            out.append(None)
        elif tanh_form:
            # 1 + tanh(w) as written: for w far below 0 it cancels to e^(2w), so the working
            # precision grows with |w| (3 |w| bits hold e^(2w) beside 1)
            w = mpmath.sqrt(2 / mpmath.pi) * (x + mpmath.mpf(44715) / 10**6 * x**3)
            if w < -10**5:  # e^(2w) beside 1 would need millions of bits: its leading term
                g = 2 * mpmath.exp(2 * w)
            else:
                with mpmath.workprec(mpmath.mp.prec + int(3 * abs(w))):
                    w = mpmath.sqrt(2 / mpmath.pi) * (x + mpmath.mpf(44715) / 10**6 * x**3)
                    g = 1 + mpmath.tanh(w)
            out.append(x / 2 * g)
        else:
            out.append(x / 2 * mpmath.erfc(-x / mpmath.sqrt(2)))
    return out
