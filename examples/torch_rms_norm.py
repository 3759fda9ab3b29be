#!/usr/bin/env python3
"""PyTorch's RMSNorm under precfuzz: F.rms_norm on fp32, fp16 and bf16 rows, with gamma in the
input's dtype or in fp32, judged by the contract of precfuzz's rmsnorm/torch (torch 2.15's CPU
composite, which that variant emulates bit for bit). F.rms_norm returns y alone; rstd, which a
fused kernel saves for the backward, is computed here by the same ATen ops the composite runs
(x.float().pow(2).mean(-1).add_(eps).rsqrt()). One thread, so that a row longer than ATen's
grain (32768) is summed by one thread, in the order the emulation follows.

  precfuzz --kernels exec:"python3 examples/torch_rms_norm.py" run -k rmsnorm -v torch-rms-norm -t bf16

PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=rmsnorm start=exec needs=torch cases=50 variants=torch-rms-norm
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
torch.set_num_threads(1)


@kernel("rmsnorm", variant="torch-rms-norm", like="torch", accums=["fp32"], params={"zero_centered_gamma": ["no"]},
        summary=f"F.rms_norm, torch {torch.__version__} on {DEVICE}")
def rms_norm(case, x, gamma):
    t = to_torch(x, DEVICE)
    g = to_torch(gamma, DEVICE)
    eps = float(case.params["eps"])
    y = F.rms_norm(t, [t.shape[-1]], g, eps)
    rstd = t.float().pow(2).mean(-1, keepdim=True).add_(eps).rsqrt()
    return {"rstd": rstd.reshape(-1), "y": y}


if __name__ == "__main__":
    sys.exit(serve())
