#!/usr/bin/env python3
"""PyTorch's dynamic loss scaling under precfuzz: the two ATen kernels torch.amp.GradScaler
runs every step, _amp_foreach_non_finite_check_and_unscale_ (unscale_) and _amp_update_scale_
(update), over T steps, judged by the contract of precfuzz's loss_scale/pytorch.

  precfuzz --kernels exec:"python3 examples/torch_grad_scaler.py" run -k loss_scale -v torch-gradscaler -t fp16 --cases 50

Each step the backward pass is taken to hold the scaled gradient in the case's dtype,
h = fl(S g) (rounded once, from the exact product); the gradient is unscaled in fp32, as
GradScaler does for fp32 parameters, and the step is skipped when it holds an inf or NaN.
Outputs per step: the applied gradient (0 when skipped), the status (0 applied, 1 skipped)
and the scale after update(). GradScaler has no hysteresis and no minimum scale: cases that
set them are refused. PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=loss_scale start=exec needs=torch cases=30 variants=torch-gradscaler
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import numpy as np  # noqa: E402
import torch  # noqa: E402

from precfuzz_kernel import kernel, numpy_dtype, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")


@kernel("loss_scale", variant="torch-gradscaler", like="pytorch", accums=["fp32"],
        params={"hysteresis": [0, 1], "min_scale": [0, 0]},
        summary=f"GradScaler's unscale_ and update kernels, torch {torch.__version__} on {DEVICE}")
def grad_scaler(case, g):
    steps, n = case.shape
    a = case.params
    window = int(a["window"]) or 2000  # GradScaler's growth_interval
    scale = torch.full((1,), a["scale0"] or 65536.0, dtype=torch.float32, device=DEVICE)
    tracker = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    applied = np.zeros((steps, n), dtype=np.float32)
    status = np.zeros(steps, dtype=np.float32)
    scales = np.zeros(steps, dtype=np.float32)
    for t in range(steps):
        s = float(scale.item())
        with np.errstate(all="ignore"):  # h is fl(S g): an overflow to inf is the point
            h = (g[t].astype(np.float64) * s).astype(numpy_dtype(case.dtype))
        grad = to_torch(h, DEVICE).float()
        found_inf = torch.zeros(1, dtype=torch.float32, device=DEVICE)
        torch._amp_foreach_non_finite_check_and_unscale_([grad], found_inf, (1.0 / scale).to(torch.float32))
        torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, window)
        skipped = bool(found_inf.item())
        status[t] = 1.0 if skipped else 0.0
        if not skipped:
            applied[t] = grad.cpu().numpy()
        scales[t] = scale.item()
    return {"grads": applied, "status": status, "scale": scales}


if __name__ == "__main__":
    sys.exit(serve())
