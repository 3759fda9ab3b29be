"""Kernels for the package's tests, each with what it does to the contract it claims."""

import numpy as np


def softmax_exact(x):
    """The softmax in binary64, rounded once to x's dtype: within 1 ulp of the correctly
    rounded result (two roundings of a value 2^-53-close), inside every contract."""
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(x.dtype)


def softmax_sum_in_storage(x):
    """The sum of exponentials kept in the storage dtype, left to right: fp16 loses a few ulps
    over 256 columns, outside the fp32-accumulation contract of safe."""
    e = np.exp(x.astype(np.float32) - x.astype(np.float32).max(-1, keepdims=True)).astype(x.dtype)
    s = np.zeros(x.shape[:-1], x.dtype)
    for j in range(x.shape[-1]):
        s = (s + e[..., j]).astype(x.dtype)
    return (e.astype(np.float32) / s[..., None].astype(np.float32)).astype(x.dtype)


def softmax_raises(x):
    raise ValueError("this kernel always fails")
