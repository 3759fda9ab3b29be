#!/usr/bin/env python3
"""PyTorch's scaled dot-product attention under precfuzz: F.scaled_dot_product_attention(q, k,
v) on fp32, fp16 and bf16, judged by the contract of precfuzz's attention/flash (key blocks,
running max and sum, fp32 accumulation), which is what PyTorch's fused CPU kernel and its
FlashAttention CUDA kernel compute. Only the output is compared (the fused kernels store no
scores or probabilities).

  precfuzz --kernels exec:"python3 examples/torch_sdpa.py" run -k attention -v torch-sdpa -t bf16 --cases 50

The operation's mask=causal (query i sees keys j <= i + k_len - q_len, aligned to the bottom
right, PyTorch's causal_lower_right: with q_len > k_len the first q_len - k_len queries see no
key, and SDPA gives them 0) is SDPA's is_causal where q_len = k_len and a boolean mask otherwise;
mask=causal-top-left (j <= i) is SDPA's own is_causal=True. A masked score is -inf in SDPA: the other mask values are refused, as are
layer-scaled scores (layer) and a storage-dtype softmax, which SDPA does not have.
PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=attention start=exec needs=torch cases=20 variants=torch-sdpa
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
# ATen's fused CPU kernel (native/cpu/FlashAttentionKernel.cpp) splits the keys into blocks of 512
BLOCK = {"block": [512, 512]} if DEVICE == "cpu" else {}


@kernel("attention", variant="torch-sdpa", like="flash", accums=["fp32"],
        params={"mask_value": ["-inf"], "layer": [1, 1], "softmax_accum": ["fp32"], **BLOCK},
        summary=f"F.scaled_dot_product_attention, torch {torch.__version__} on {DEVICE}")
def sdpa(case, q, k, v):
    q, k, v = (to_torch(a, DEVICE) for a in (q, k, v))
    lq, lk = q.shape[2], k.shape[2]
    if case.params["mask"] == "none":
        return F.scaled_dot_product_attention(q, k, v)
    if case.params["mask"] == "causal-top-left" or lq == lk:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    keep = torch.ones(lq, lk, dtype=torch.bool, device=DEVICE).tril(lk - lq)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


if __name__ == "__main__":
    sys.exit(serve())
