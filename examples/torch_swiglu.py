#!/usr/bin/env python3
"""PyTorch's SwiGLU under precfuzz: F.silu(a) * b as Llama's MLP writes it (HF's LlamaMLP:
act_fn(gate_proj(x)) * up_proj(x)), two eager ATen ops on fp32, fp16 and bf16 tensors on the CPU,
judged by the contract of precfuzz's swiglu/torch (which emulates it bit for bit). One thread, so
that silu's scalar tail is the tensor's.

  precfuzz --kernels exec:"python3 examples/torch_swiglu.py" run -k swiglu -v torch-swiglu -t bf16

PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=swiglu start=exec needs=torch cases=30 variants=torch-swiglu
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
torch.set_num_threads(1)


@kernel("swiglu", variant="torch-swiglu", like="torch", summary=f"F.silu(a) * b, torch {torch.__version__} on {DEVICE}")
def swiglu(case, a, b):
    return {"y": F.silu(to_torch(a, DEVICE)) * to_torch(b, DEVICE)}


if __name__ == "__main__":
    sys.exit(serve())
