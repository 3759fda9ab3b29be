#!/usr/bin/env python3
"""PyTorch's LayerNorm backward under precfuzz: aten::native_layer_norm_backward on the CPU, fed
the statistics its own forward (aten::native_layer_norm) saved, on fp32, fp16 and bf16 rows with
gamma in the input's dtype or in fp32 (bf16 activations with fp32 parameters, autocast's and
Megatron's layout), run on `blocks` threads (torch.set_num_threads: each thread sums its rows'
dgamma and dbeta in its own buffer); judged by the contract of precfuzz's layernorm_bwd/torch
(torch 2.15's CPU kernel, which that variant emulates bit for bit).

  precfuzz --kernels exec:"python3 examples/torch_layer_norm_backward.py" run -k layernorm_bwd -v torch-layer-norm-backward -t bf16

PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=layernorm_bwd start=exec needs=torch cases=40 variants=torch-layer-norm-backward
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")


@kernel("layernorm_bwd", variant="torch-layer-norm-backward", like="torch", accums=["fp32"],
        params={"zero_centered_gamma": ["no"]},
        summary=f"aten::native_layer_norm_backward, torch {torch.__version__} on {DEVICE}")
def layer_norm_backward(case, x, dy, gamma):
    torch.set_num_threads(int(case.params["blocks"]))
    t, d = to_torch(x, DEVICE), to_torch(dy, DEVICE)
    g = to_torch(gamma, DEVICE)
    beta = torch.zeros_like(g)
    eps = float(case.params["eps"])
    n = [t.shape[-1]]
    _, mean, rstd = torch.ops.aten.native_layer_norm(t, n, g, beta, eps)
    dx, dgamma, dbeta = torch.ops.aten.native_layer_norm_backward(d, t, n, mean, rstd, g, beta, [True, True, True])
    return {"dx": dx, "dgamma": dgamma, "dbeta": dbeta}


if __name__ == "__main__":
    sys.exit(serve())
