"""Hypothesis strategies: every value exact in its dtype, the classes drawn, shrinking to the
simple values; and a Hypothesis test that judges a kernel through precfuzz."""

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

import precfuzz
from precfuzz.strategies import floats, limits, saturating_rows, tensors

bf16 = precfuzz.numpy_dtype("bf16")


def exact_in(dtype, v):
    """Independent of the strategies: v survives a round trip through the dtype (numpy and
    ml_dtypes round to nearest), and a bf16 value has at most 8 significant bits."""
    if math.isnan(v) or math.isinf(v):
        return True
    back = float(np.array([v]).astype(precfuzz.numpy_dtype(dtype)).astype(np.float64)[0])
    if dtype == "bf16" and v:
        m, _ = math.frexp(abs(v))
        assert (m * 2**8).is_integer() or abs(v) < 2.0**-126
    return back == v


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_value_is_exact_in_its_dtype(dtype, data):
    v = data.draw(floats(dtype, allow_nan=True, allow_infinity=True))
    assert exact_in(dtype, v)


def test_limits_by_hand():
    assert limits("fp16") == (2.0**-24, 2.0**-14, 65504.0)
    assert limits("bf16") == (2.0**-133, 2.0**-126, 3.3895313892515355e38)
    assert limits("fp32") == (2.0**-149, 2.0**-126, 3.4028234663852886e38)


def test_the_classes_are_drawn():
    tiny, small, big = limits("bf16")
    assert find(floats("bf16"), lambda v: 0 < abs(v) < small)  # a subnormal
    assert find(floats("bf16"), lambda v: abs(v) == big)
    assert math.isnan(find(floats("bf16", allow_nan=True), lambda v: v != v))
    # the binades bound the normal values (specials, the largest finite among them, are outside
    # by design: left out here, or a shrink that ends on 65504 fails the bound, as one CI run did)
    assert find(floats("fp16", min_exp=-2, max_exp=2, specials=False), lambda v: v > 4) < 8


def test_shrinking_goes_to_simple_values():
    # a counterexample to "below 3" shrinks to one of the simplest: 3 (1.5 * 2^1) or 4 (2^2),
    # not one of the 2^7 other significands of those binades
    assert find(floats("bf16", specials=False, subnormals=False), lambda v: v >= 3) in (3.0, 4.0)
    a = find(tensors("fp16", (2, 3)), lambda x: (np.abs(x.astype(np.float32)) > 2).any())
    big = [v for v in np.abs(a.astype(np.float64)).ravel() if v > 2]
    assert big in ([2.001953125], [3.0], [4.0])  # one element, shrunk to the edge of the property


@settings(max_examples=50, deadline=None)
@given(tensors("bf16", (3, 5), outliers=2))
def test_tensors_have_the_dtype_and_shape(x):
    assert x.dtype == bf16 and x.shape == (3, 5)
    assert all(exact_in("bf16", float(v)) for v in x.astype(np.float64).ravel())


def test_saturating_rows_stop_a_bf16_sum():
    x = find(saturating_rows("bf16", 2, 1024), lambda x: True)
    assert x.shape == (2, 1024) and x.dtype == bf16
    for row in x.astype(np.float64):
        e = np.exp(row - row.max())
        s = np.float32(0)
        for t in e.astype(np.float32).astype(bf16):  # a running sum in bf16
            s = np.float32(np.array([s + np.float32(t)], np.float32).astype(bf16)[0])
        assert s <= 256 < e.sum()  # stuck at 2^8 well below the true sum (>= ~1000)
    with pytest.raises(ValueError, match="saturates from 8192 columns"):
        saturating_rows("fp16", 1, 4096)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors("bf16", (2, 16), elements=floats("bf16", min_exp=-4, max_exp=4, specials=False)))
def test_torch_softmax_in_bf16_keeps_safe_contract(x):
    torch = pytest.importorskip("torch")
    t = precfuzz.to_torch(x)
    j = precfuzz.judge("softmax", {"x": x}, torch.softmax(t, -1), like="safe", keep="never")
    assert j.ok, str(j)


def test_a_hypothesis_example_shrinks_through_precfuzz(tmp_path):
    # Hypothesis finds a row on which the fp16 running sum breaks safe's contract; its shrinking
    # would keep the row's 256 columns, precfuzz's minimizer takes the dimensions down
    from kernels import softmax_sum_in_storage

    def breaks(x):
        return not precfuzz.judge("softmax", {"x": x}, softmax_sum_in_storage(x), like="safe", keep="never").ok

    small_logits = floats("fp16", min_exp=-3, max_exp=0, subnormals=False, specials=False)
    # (Hypothesis' shrinking is left out here: each of its steps is a judge run)
    x = find(tensors("fp16", (1, 256), elements=small_logits), breaks,
             settings=settings(max_examples=50, deadline=None, database=None, phases=[Phase.generate]))
    res = precfuzz.check(softmax_sum_in_storage, op="softmax", like="safe", tensors={"x": x}, params={"mask": "none"},
                         minimize=True, findings=tmp_path)
    assert res.cases == 1 and len(res.findings) == 1, res.report()
    f = res.findings[0]
    assert f.shape == (1, 256) and f.case["inputs"]["x"]["file"].startswith(str(tmp_path))
    small = json.load(open(f.minimized))
    assert small["shape"][0] * small["shape"][1] < 256, small["shape"]
