"""Hypothesis strategies for fp32, fp16 and bf16 values and tensors, every value exactly
representable in its dtype (Hypothesis' own floats cannot give bf16-exact values).

They draw from the classes precfuzz's generators draw from (core/tensor.c): finite values of
a range of binades (as --dist loguniform --exp-range), the special values of --special-rate
(0, the smallest subnormal, a random subnormal, the smallest normal, the largest finite,
infinity, NaN), outliers of a large magnitude (--outliers), and rows whose sum stops growing in
their own dtype (the `saturated` hazard). Each value is drawn as its sign, binade and
significand bits, so a failing example shrinks toward 1.0, 0 and short significands.

    from hypothesis import given
    from precfuzz.strategies import tensors

    @given(tensors("bf16", (4, 64)))
    def test_softmax(x):
        y = my_softmax(x)
        precfuzz.judge("softmax", {"x": x}, y, like="safe")
"""

import numpy as np
from hypothesis import strategies as st

from .protocol import numpy_dtype

# significand bits (without the leading one), smallest and largest normal binade
_FORMATS = {"fp32": (23, -126, 127), "fp16": (10, -14, 15), "bf16": (7, -126, 127)}


def _format(dtype):
    if dtype not in _FORMATS:
        raise ValueError(f"dtype {dtype!r}: fp32, fp16 or bf16")
    return _FORMATS[dtype]


def limits(dtype):
    """(smallest subnormal, smallest normal, largest finite) of a dtype, as Python floats."""
    m, emin, emax = _format(dtype)
    return 2.0 ** (emin - m), 2.0**emin, (2 - 2.0**-m) * 2.0**emax


def floats(dtype, *, min_exp=None, max_exp=None, subnormals=True, specials=True, allow_nan=False,
           allow_infinity=False):
    """Python floats exactly representable in dtype. Finite values of the binades
    [2^min_exp, 2^(max_exp+1)) (default: all normal binades) with either sign; with subnormals,
    sometimes a subnormal; with specials, sometimes 0, -0, the smallest normal or the largest
    finite, and infinities and NaN where allowed."""
    m, emin, emax = _format(dtype)
    lo = emin if min_exp is None else min_exp
    hi = emax if max_exp is None else max_exp
    if not emin <= lo <= hi <= emax:
        raise ValueError(f"binades [{lo}, {hi}] outside {dtype}'s normal range [{emin}, {emax}]")
    tiny, smallest_normal, largest = limits(dtype)
    sp = [0.0, -0.0, smallest_normal, -smallest_normal, largest, -largest] if specials else []
    if allow_infinity:
        sp += [float("inf"), float("-inf")]
    if allow_nan:
        sp += [float("nan")]

    @st.composite
    def draw(d):
        kind = d(st.integers(0, 15))  # shrinks to 0: a normal value
        if kind >= 14 and sp:
            return d(st.sampled_from(sp))
        if kind >= 12 and subnormals:
            k = d(st.integers(1, 2**m - 1))
            return (-1.0 if d(st.booleans()) else 1.0) * k * tiny
        neg = d(st.booleans())
        e = d(st.integers(lo, hi))
        frac = d(st.integers(0, 2**m - 1))
        v = (1 + frac / 2.0**m) * 2.0**e
        return -v if neg else v

    return draw()


def _shape(shape):
    if isinstance(shape, st.SearchStrategy):
        return shape
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"shape {shape!r}: non-negative ints")
    return st.just(shape)


def tensors(dtype, shape, *, elements=None, outliers=0, outlier_binades=4):
    """numpy arrays of dtype (float32, float16, ml_dtypes.bfloat16) and shape (a tuple, or a
    strategy of tuples) whose elements come from `elements` (default: floats(dtype, min_exp=-8,
    max_exp=8), precfuzz's loguniform default: no subnormal, no special). outliers=k: up to k elements
    replaced by values of the top outlier_binades binades of the dtype, either sign."""
    npdt = numpy_dtype(dtype)
    el = elements if elements is not None else floats(dtype, min_exp=-8, max_exp=8, subnormals=False, specials=False)
    _, _, emax = _format(dtype)
    big = floats(dtype, min_exp=emax - outlier_binades + 1, max_exp=emax, subnormals=False, specials=False)

    @st.composite
    def draw(d):
        shp = d(_shape(shape))
        n = int(np.prod(shp)) if shp else 1
        vals = d(st.lists(el, min_size=n, max_size=n))
        if outliers and n:
            for _ in range(d(st.integers(0, outliers))):
                vals[d(st.integers(0, n - 1))] = d(big)
        # exact: every value is representable in dtype, so the cast does not round
        return np.array(vals, dtype=np.float64).astype(npdt).reshape(shp)

    return draw()


def saturating_rows(dtype, rows, cols, *, others=4):
    """rows x cols arrays of dtype in which each row is mostly one value v, so that a running
    sum of the row's exponentials (softmax, cross-entropy, attention) kept in the storage dtype
    stops growing (adding exp(0) = 1 to a sum of 2^p, p the dtype's precision, leaves it there:
    2048 for fp16, 256 for bf16), with up to `others` other values per row. cols must be at least 4 * 2^p (fp16 8192,
    bf16 1024; fp32's 2^26 is refused)."""
    m, _, _ = _format(dtype)
    need = 4 * 2 ** (m + 1)
    if dtype == "fp32":
        raise ValueError("saturating_rows: an fp32 row would need 2^26 columns")
    if cols < need:
        raise ValueError(f"saturating_rows: a {dtype} row saturates from {need} columns on, not {cols}")
    npdt = numpy_dtype(dtype)

    @st.composite
    def draw(d):
        out = np.empty((rows, cols), dtype=np.float64)
        for r in range(rows):
            v = d(floats(dtype, min_exp=-4, max_exp=4, subnormals=False, specials=False))
            out[r, :] = v
            for _ in range(d(st.integers(0, others))):
                out[r, d(st.integers(0, cols - 1))] = d(floats(dtype, min_exp=-4, max_exp=4, subnormals=False,
                                                               specials=False))
        return out.astype(npdt)

    return draw()
