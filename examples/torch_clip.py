#!/usr/bin/env python3
"""PyTorch's gradient clipping under precfuzz: torch.nn.utils.clip_grad_norm_ over k gradient
tensors of n elements each (the case's rows) in the case's dtype, judged by the contract of
precfuzz's clip/torch. Its outputs are the total norm it returns (in the gradients' dtype) and
the clipped gradients.

  precfuzz --kernels exec:"python3 examples/torch_clip.py" run -k clip -v torch-clip -t fp16 --cases 200

PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does), where PyTorch takes its
foreach path by default."""
# precfuzz-target: kernel=clip start=exec needs=torch cases=50 variants=torch-clip
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")


@kernel("clip", variant="torch-clip", like="torch", accums=["fp32"],
        summary=f"torch.nn.utils.clip_grad_norm_, torch {torch.__version__} on {DEVICE}")
def clip(case, g):
    grads = to_torch(g, DEVICE)
    params = []
    for row in grads:
        p = torch.nn.Parameter(torch.zeros_like(row))
        p.grad = row.clone()
        params.append(p)
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm=case.params["max_norm"])
    return {"norm": norm.reshape(1), "grads": torch.stack([p.grad for p in params])}


if __name__ == "__main__":
    sys.exit(serve())
