#!/usr/bin/env python3
"""PyTorch's RMSNorm backward under precfuzz: autograd through F.rms_norm on fp32, fp16 and bf16
rows, with gamma in the input's dtype or in fp32, one thread (the composite's dgamma is ATen's
sum over the rows, which more threads would split), judged by the contract of precfuzz's
rmsnorm_bwd/torch (torch 2.15's CPU composite and its autograd, which that variant emulates bit
for bit). F.rms_norm has no fused CPU kernel: its backward is the graph of the forward's ATen ops.

  precfuzz --kernels exec:"python3 examples/torch_rms_norm_backward.py" run -k rmsnorm_bwd -v torch-rms-norm-backward -t bf16

PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=rmsnorm_bwd start=exec needs=torch cases=40 variants=torch-rms-norm-backward
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
torch.set_num_threads(1)
# bf16 activations with fp32 weights: "Mismatch dtype ... Cannot dispatch to fused implementation"
warnings.filterwarnings("ignore", message="Mismatch dtype between input and weight")


@kernel("rmsnorm_bwd", variant="torch-rms-norm-backward", like="torch", accums=["fp32"],
        params={"zero_centered_gamma": ["no"], "blocks": [1, 1]},
        summary=f"autograd through F.rms_norm, torch {torch.__version__} on {DEVICE}")
def rms_norm_backward(case, x, dy, gamma):
    t = to_torch(x, DEVICE).requires_grad_()
    g = to_torch(gamma, DEVICE).requires_grad_()
    y = F.rms_norm(t, [t.shape[-1]], g, float(case.params["eps"]))
    y.backward(to_torch(dy, DEVICE))
    return {"dx": t.grad, "dgamma": g.grad}


if __name__ == "__main__":
    sys.exit(serve())
