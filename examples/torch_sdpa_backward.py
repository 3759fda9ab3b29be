#!/usr/bin/env python3
"""PyTorch's scaled dot-product attention backward under precfuzz: the gradients of
F.scaled_dot_product_attention(q, k, v) for an incoming dO (autograd), on fp32, fp16 and bf16,
judged by the contract of precfuzz's attention_bwd/flash (P recomputed from the saved log-sum-exp,
D = rowsum(dO o O), P and dS rounded to the storage dtype for the GEMMs), which bounds what
PyTorch's fused CPU kernel and its FlashAttention CUDA kernel compute.

  precfuzz --kernels exec:"python3 examples/torch_sdpa_backward.py" run -k attention_bwd -v torch-sdpa-bwd -t bf16 --cases 50

The masks as in examples/torch_sdpa.py: causal (aligned to the bottom right; with q_len > k_len the
first q_len - k_len queries see no key: output and gradients 0) is SDPA's is_causal
where q_len = k_len and a boolean mask otherwise; causal-top-left is is_causal=True. The fp32
delta only (delta=fp32). PRECFUZZ_DEVICE=cuda runs it on the GPU."""
# precfuzz-target: kernel=attention_bwd start=exec needs=torch cases=20 variants=torch-sdpa-bwd
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
# ATen's fused CPU kernel (native/cpu/FlashAttentionKernel.cpp) splits the keys into blocks of
# 512 in the forward and the backward: the contract's key block is that one (a case drawn with
# blocks of 2 was judged by a tighter bound than torch's blocking has, a false alarm)
BLOCK = {"block": [512, 512]} if DEVICE == "cpu" else {}


@kernel("attention_bwd", variant="torch-sdpa-bwd", like="flash", accums=["fp32"], params={"delta": ["fp32"], **BLOCK},
        summary=f"autograd of F.scaled_dot_product_attention, torch {torch.__version__} on {DEVICE}")
def sdpa_backward(case, q, k, v, do):
    q, k, v = (to_torch(a, DEVICE).requires_grad_(True) for a in (q, k, v))
    lq, lk = q.shape[2], k.shape[2]
    if case.params["mask"] == "none":
        o = F.scaled_dot_product_attention(q, k, v)
    elif case.params["mask"] == "causal-top-left" or lq == lk:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        keep = torch.ones(lq, lk, dtype=torch.bool, device=DEVICE).tril(lk - lq)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    o.backward(to_torch(do, DEVICE))
    return {"dQ": q.grad, "dK": k.grad, "dV": v.grad}


if __name__ == "__main__":
    sys.exit(serve())
