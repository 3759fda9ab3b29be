#!/usr/bin/env python3
"""Megatron's dynamic loss scaler under precfuzz: megatron.core.optimizer.grad_scaler
.DynamicGradScaler (megatron-core 0.16.1; scripts/python-env.sh --frameworks) over T steps, with
the unscaling Megatron's MixedPrecisionOptimizer does before it (_unscale_main_grads_and_check_for_nan:
torch._amp_foreach_non_finite_check_and_unscale_ by grad_scaler.inv_scale), judged by the
contract of precfuzz's loss_scale/megatron, with Megatron's argument defaults (initial scale
2^32, window 1000, hysteresis 2, minimum 1).

  precfuzz --kernels exec:".venv/bin/python examples/megatron_grad_scaler.py" run -k loss_scale -v megatron-grad-scaler -t fp16

DynamicGradScaler makes its tensors with device='cuda'. Without a GPU (PRECFUZZ_DEVICE=cpu, the
default) they are made on the CPU instead: the module's name torch is given a stand-in whose
tensor() ignores the device; everything else is torch's, and the scaler's arithmetic (fp32
multiplications and a max) is correctly rounded on either device. PRECFUZZ_DEVICE=cuda runs it
as Megatron does.

Each step the backward pass is taken to hold h = fl(S g) in the case's dtype (rounded once from
the exact product); the main gradient is h in fp32, unscaled by inv_scale = fl32(1/S); a step
with an inf or NaN is skipped, and update(found_inf) runs after the unscaling, as in
MixedPrecisionOptimizer.step. Megatron never stops: at the minimum it keeps skipping.
Outputs per step: the applied gradient (0 when skipped), the status, the scale after update()."""
# precfuzz-target: kernel=loss_scale start=exec needs=frameworks cases=20 variants=megatron-grad-scaler
import logging
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from precfuzz_kernel import kernel, numpy_dtype, serve, to_torch  # noqa: E402  (first: it takes stdout)

import numpy as np  # noqa: E402
import torch  # noqa: E402

# megatron imports torch.utils.cpp_extension, which logs "No CUDA runtime is found" on a machine
# without a GPU, and warns that Transformer Engine and Apex are absent: neither is used here
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import megatron.core  # noqa: E402
    from megatron.core.optimizer import grad_scaler as megatron_grad_scaler  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")


class _TorchOnDevice:
    """torch, but tensor(..., device=...) makes its tensor on DEVICE."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def tensor(data, *args, device=None, **kwargs):
        return torch.tensor(data, *args, device=DEVICE, **kwargs)


if DEVICE != "cuda":
    megatron_grad_scaler.torch = _TorchOnDevice()


@kernel("loss_scale", variant="megatron-grad-scaler", like="megatron", accums=["fp32"],
        summary=f"megatron-core {megatron.core.__version__} DynamicGradScaler, torch {torch.__version__} on {DEVICE}")
def grad_scaler(case, g):
    steps, n = case.shape
    a = case.params
    scaler = megatron_grad_scaler.DynamicGradScaler(
        initial_scale=a["scale0"] or 2.0**32, min_scale=a["min_scale"] or 1.0, growth_factor=2.0,
        backoff_factor=0.5, growth_interval=int(a["window"]) or 1000, hysteresis=int(a["hysteresis"]) or 2)
    applied = np.zeros((steps, n), dtype=np.float32)
    status = np.zeros(steps, dtype=np.float32)
    scales = np.zeros(steps, dtype=np.float32)
    for t in range(steps):
        s = float(scaler.scale.item())
        with np.errstate(all="ignore"):  # h is fl(S g): an overflow to inf is the point
            h = (g[t].astype(np.float64) * s).astype(numpy_dtype(case.dtype))
        main_grad = to_torch(h, DEVICE).float()
        found_inf = torch.zeros(1, dtype=torch.float32, device=DEVICE)
        torch._amp_foreach_non_finite_check_and_unscale_([main_grad], found_inf, scaler.inv_scale)
        skipped = bool(found_inf.item() > 0)
        scaler.update(skipped)
        status[t] = 1.0 if skipped else 0.0
        if not skipped:
            applied[t] = main_grad.cpu().numpy()
        scales[t] = scaler.scale.item()
    return {"grads": applied, "status": status, "scale": scales}


if __name__ == "__main__":
    sys.exit(serve())
