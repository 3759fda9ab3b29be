#!/usr/bin/env python3
"""PyTorch's softmax backward under precfuzz: the gradient of torch.softmax(x, dim=-1) for an
incoming dy (autograd, which calls _softmax_backward_data with the saved output y in x's dtype),
on fp32, fp16 and bf16 rows, judged by the contract of precfuzz's softmax_bwd/stored (the
forward's y stored in the storage dtype and read back, the backward's sum and products in fp32,
as ATen's softmax backward kernels compute them).

  precfuzz --kernels exec:"python3 examples/torch_softmax_backward.py" run -k softmax_bwd -v torch-softmax-bwd -t bf16 --cases 100

PRECFUZZ_DEVICE=cuda runs it on the GPU."""
# precfuzz-target: kernel=softmax_bwd start=exec needs=torch cases=20 variants=torch-softmax-bwd
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")


@kernel("softmax_bwd", variant="torch-softmax-bwd", like="stored", accums=["fp32"],
        summary=f"autograd of torch.softmax(x, -1), torch {torch.__version__} on {DEVICE}")
def softmax_backward(case, x, dy):
    t = to_torch(x, DEVICE).requires_grad_(True)
    y = torch.softmax(t, dim=-1)
    y.backward(to_torch(dy, DEVICE))
    return t.grad


if __name__ == "__main__":
    sys.exit(serve())
