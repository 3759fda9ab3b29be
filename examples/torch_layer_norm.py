#!/usr/bin/env python3
"""PyTorch's LayerNorm under precfuzz: F.layer_norm (aten::native_layer_norm, which returns the
saved mean and rstd beside y) on fp32, fp16 and bf16 rows, with gamma and beta in the input's
dtype or in fp32 (weights=fp32: bf16 activations with fp32 parameters, which the CPU kernel
takes as they are), judged by the contract of precfuzz's layernorm/torch (torch 2.15's CPU
kernel, which that variant emulates bit for bit).

  precfuzz --kernels exec:"python3 examples/torch_layer_norm.py" run -k layernorm -v torch-layer-norm -t bf16

PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=layernorm start=exec needs=torch cases=50 variants=torch-layer-norm
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")


@kernel("layernorm", variant="torch-layer-norm", like="torch", accums=["fp32"],
        params={"zero_centered_gamma": ["no"], "eps_place": ["inside"]},
        summary=f"F.layer_norm (aten::native_layer_norm), torch {torch.__version__} on {DEVICE}")
def layer_norm(case, x, gamma, beta):
    t = to_torch(x, DEVICE)
    g, b = to_torch(gamma, DEVICE), to_torch(beta, DEVICE)
    eps = float(case.params["eps"])
    y, mean, rstd = torch.ops.aten.native_layer_norm(t, [t.shape[-1]], g, b, eps)
    return {"mean": mean.reshape(-1), "rstd": rstd.reshape(-1), "y": y}


if __name__ == "__main__":
    sys.exit(serve())
