#!/usr/bin/env python3
"""PyTorch's GELU under precfuzz: F.gelu (approximate 'none' and 'tanh') on fp32, fp16 and bf16
tensors on the CPU with oneDNN off (torch.backends.mkldnn.flags(enabled=False)): ATen's own
GeluKernelImpl in every dtype, which precfuzz's gelu/torch emulates bit for bit, judged by its
contract. With oneDNN on (the default on an x86 CPU), fp32 and bf16 in the erf form go to
oneDNN's gelu_erf instead: examples/torch_gelu_onednn.py. One thread, so that the tensor's
scalar tail is ATen's (each thread's chunk has its own).

  precfuzz --kernels exec:"python3 examples/torch_gelu.py" run -k gelu -v torch-gelu-native -t bf16

PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=gelu start=exec needs=torch cases=30 variants=torch-gelu-native
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
torch.set_num_threads(1)


@kernel("gelu", variant="torch-gelu-native", like="torch",
        summary=f"F.gelu with oneDNN off (ATen's kernel), torch {torch.__version__} on {DEVICE}")
def gelu_native(case, x):
    with torch.backends.mkldnn.flags(enabled=False):
        return {"y": F.gelu(to_torch(x, DEVICE), approximate=case.params["approximate"])}


if __name__ == "__main__":
    sys.exit(serve())
