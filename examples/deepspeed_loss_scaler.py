#!/usr/bin/env python3
"""DeepSpeed's dynamic loss scaler under precfuzz: deepspeed.runtime.fp16.loss_scaler
.DynamicLossScaler.update_scale (DeepSpeed 0.19.8, installed without its CUDA ops:
DS_BUILD_OPS=0; scripts/python-env.sh --frameworks) over T steps, judged by the contract of
precfuzz's loss_scale/deepspeed-0.19, with the defaults a DeepSpeed config gives (initial scale
2^16, window 1000, hysteresis 2, minimum 1; consecutive_hysteresis off).

  precfuzz --kernels exec:".venv/bin/python examples/deepspeed_loss_scaler.py" run -k loss_scale -v ds-loss-scaler -t fp16

Each step the backward pass is taken to hold h = fl(S g) in the case's dtype (rounded once from
the exact product); an inf or NaN in it is an overflow, and the step is skipped; otherwise the
gradient is unscaled in fp32, h * fl32(1/S). update_scale's "Current loss scale already at
minimum" exception stops the run: that step and every later one have the status 2 (stopped).
Outputs per step: the applied gradient (0 when skipped or stopped), the status, the scale after
the step."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from precfuzz_kernel import kernel, numpy_dtype, serve  # noqa: E402  (first: DeepSpeed logs to stdout)

import numpy as np  # noqa: E402
import deepspeed  # noqa: E402
from deepspeed.runtime.fp16 import loss_scaler as ds_loss_scaler  # noqa: E402
from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler  # noqa: E402

# update_scale asks deepspeed.comm for the rank only to decide whether to log; one process
# without DeepSpeed's launcher is rank 0
ds_loss_scaler.dist.get_rank = lambda *args, **kwargs: 0


@kernel("loss_scale", variant="ds-loss-scaler", like="deepspeed-0.19", accums=["fp32"],
        summary=f"DeepSpeed {deepspeed.__version__} DynamicLossScaler.update_scale")
def loss_scaler(case, g):
    steps, n = case.shape
    a = case.params
    scaler = DynamicLossScaler(init_scale=a["scale0"] or 2.0**16, scale_window=int(a["window"]) or 1000,
                               min_scale=a["min_scale"] or 1.0, delayed_shift=int(a["hysteresis"]) or 2,
                               consecutive_hysteresis=False, raise_error_at_min_scale=True)
    applied = np.zeros((steps, n), dtype=np.float32)
    status = np.zeros(steps, dtype=np.float32)
    scales = np.zeros(steps, dtype=np.float32)
    stopped = False
    for t in range(steps):
        s = float(scaler.cur_scale)
        with np.errstate(all="ignore"):
            h = (g[t].astype(np.float64) * s).astype(numpy_dtype(case.dtype)).astype(np.float32)
        overflow = not bool(np.all(np.isfinite(h)))
        if not stopped:
            try:
                scaler.update_scale(overflow)
            except Exception as e:  # "Current loss scale already at minimum - cannot decrease scale anymore"
                if "already at minimum" not in str(e):
                    raise
                stopped = True
        if stopped:
            status[t] = 2
        elif overflow:
            status[t] = 1
        else:
            applied[t] = h * np.float32(1.0 / s)
        scales[t] = scaler.cur_scale
    return {"grads": applied, "status": status, "scale": scales}


if __name__ == "__main__":
    sys.exit(serve())
