"""The exact values of gradient clipping with mpmath (not MPFR), for tests/oracle_mpmath_check.py: exact(case,
inputs) gives every output element's exact value in the layout precfuzz uses (None: undefined)."""
import mpmath

from mpmath_util import parse_hex

# tests/generic_check.py: SMALL, the arguments of a small case (every variant in every dtype
# runs one); CHECKS, precfuzz run arguments of the paths each needs checked beside it.
SMALL = "--shape 3x17"
CHECKS = [
    "-v megatron -t fp16 --cases 2 --shape 3x17 --scale 0.5",
    "-v torch -t fp16 --cases 2 --shape 3x17 --scale 0.5",
    "-v inf -t fp16 --cases 2 --shape 3x17 --scale 0.5",
]


def clip(case, g):
    """Exact global norm and the clipped gradients."""
    max_norm = parse_hex(case["params"]["max_norm"])
    norm = max(abs(x) for x in g) if case["variant"] == "inf" else mpmath.sqrt(mpmath.fsum(x * x for x in g))
    f = min(mpmath.mpf(1), max_norm / (norm + mpmath.mpf(1e-6)))
    return [norm] + [x * f for x in g]


def exact(case, inputs):
    return clip(case, inputs["g"])
