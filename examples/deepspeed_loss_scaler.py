#!/usr/bin/env python3
"""DeepSpeed 0.19.8's loss scaling under precfuzz, as its training paths run it: each step the
case's gradients go through DeepSpeed's own backward (the loss scaled by the current scale) and
its own optimizer step (overflow check, scale update, unscaling), on the CPU, in one process
(a gloo group of one on a file store: no socket to any other address). Installed without its
CUDA ops: DS_BUILD_OPS=0; scripts/python-env.sh --frameworks.

  precfuzz --kernels exec:".venv/bin/python examples/deepspeed_loss_scaler.py" run -k loss_scale -v ds-zero1-scaler -t fp16

Three paths, which a DeepSpeed config reaches as follows (fp16 enabled, "loss_scale": 0):
  ds-zero1-scaler    ZeRO stage 1 (stages 2 and 3 step the same way): DeepSpeedZeroOptimizer
                     with DynamicLossScaler.update_scale (runtime/zero/stage_1_and_2.py step),
                     judged by loss_scale/deepspeed-0.19;
  ds-fp16-optimizer  ZeRO off, a fused Adam (DeepSpeed's FusedAdam or apex's): FP16_Optimizer
                     (runtime/fp16/fused_optimizer.py), judged by loss_scale/deepspeed-0.19-fp16;
  ds-fp16-unfused    ZeRO off, any other optimizer: FP16_UnfusedOptimizer
                     (runtime/fp16/unfused_optimizer.py), judged by loss_scale/deepspeed-0.19-fp16.
The scaler takes the config's values (initial_scale_power 16, loss_scale_window 1000,
hysteresis 2, min_loss_scale 1) or the case's. No clipping ("gradient_clipping": 0; 0.19.8's
default is 1.0, which combines the clip with the unscaling: the clip and tp_diff families model
that). Each step's loss is sum(p * g) over an fp16
parameter p with g the step's fp32 gradients: its scaled gradient reaches p as fl16(S g),
rounded once (S is a power of two, S g exact in fp32). The inner optimizer only records the
gradient DeepSpeed hands it. Outputs per step: that gradient (0 when the step is skipped),
the status (0 applied, 1 skipped, 2 stopped: ZeRO's "Current loss scale already at minimum"),
the scale after the step."""
# precfuzz-target: kernel=loss_scale start=exec needs=frameworks cases=20 variants=ds-fp16-optimizer,ds-fp16-unfused,ds-zero1-scaler
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from precfuzz_kernel import kernel, serve  # noqa: E402  (first: DeepSpeed logs to stdout)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as tdist  # noqa: E402
import deepspeed.comm.torch  # noqa: E402,F401

# the device shim, no arithmetic: on the CPU accelerator DeepSpeed's comm backend JIT-compiles a
# shared-memory all-reduce op (about a minute of C++ per fresh machine, past the kernel
# timeout) that only its inference all-reduce uses
sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
import deepspeed  # noqa: E402
from deepspeed.accelerator import get_accelerator  # noqa: E402

# the engine refuses fp16 on a CPU whose oneDNN has no fp16 kernels (an AMD EPYC, an Intel before
# Sapphire Rapids); the step's fp16 tensors run on torch's own CPU kernels, which every CPU has
get_accelerator().is_fp16_supported = lambda: True
from deepspeed.runtime.fp16.fused_optimizer import FP16_Optimizer  # noqa: E402
from deepspeed.runtime.fp16.unfused_optimizer import FP16_UnfusedOptimizer  # noqa: E402
from deepspeed.runtime.fp16.loss_scaler import LossScaleConfig, LossScaleProfile  # noqa: E402

# a process group of one, on a file store: DeepSpeed's collectives run, nothing leaves the process
os.environ.update(MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
_store_dir = tempfile.mkdtemp(prefix="precfuzz-ds-")
tdist.init_process_group("gloo", store=tdist.FileStore(os.path.join(_store_dir, "store"), 1), rank=0, world_size=1)
deepspeed.init_distributed(dist_backend="gloo", verbose=False)


class Recorder(torch.optim.Optimizer):
    """The optimizer DeepSpeed steps: keeps the gradients it is handed, changes nothing."""

    def __init__(self, params):
        super().__init__(params, {})
        self.seen = None

    def step(self, closure=None):
        self.seen = [p.grad.detach().clone() for g in self.param_groups for p in g["params"] if p.grad is not None]


def settings(case):
    a = case.params
    return (a["scale0"] or 2.0 ** 16, int(a["window"]) or 1000, int(a["hysteresis"]) or 2, a["min_scale"] or 1.0)


def fp16_path(cls, profile, case, g):
    """FP16_Optimizer or FP16_UnfusedOptimizer as engine.py's _configure_fp16_optimizer builds it."""
    steps, n = case.shape
    scale0, window, hysteresis, min_scale = settings(case)
    p = torch.nn.Parameter(torch.zeros(n, dtype=torch.half))
    inner = Recorder([p])
    config = LossScaleConfig(low_precision_dtype=torch.half, dynamic_loss_scale=True, static_loss_scale=1.0,
                             dynamic_loss_args={"init_scale": scale0, "scale_window": window, "delayed_shift": hysteresis,
                                                "consecutive_hysteresis": False, "min_scale": min_scale},
                             profile=profile)
    opt = cls(inner, deepspeed=None, loss_scale_config=config, low_precision_dtype=torch.half, mpu=None,
              clip_grad=0.0, verbose=False)
    applied = np.zeros((steps, n), np.float32)
    status = np.zeros(steps, np.float32)
    scales = np.zeros(steps, np.float32)
    for t in range(steps):
        gt = torch.from_numpy(np.ascontiguousarray(g[t], dtype=np.float32))
        inner.seen = None
        opt.backward((p.float() * gt).sum())
        skipped = opt.step()
        status[t] = 1 if skipped else 0
        if not skipped:
            applied[t] = inner.seen[0].reshape(-1).numpy()
        scales[t] = opt.loss_scale_config.cur_scale
        opt.zero_grad(set_to_none=True)
    return {"grads": applied, "status": status, "scale": scales}


@kernel("loss_scale", variant="ds-fp16-optimizer", like="deepspeed-0.19-fp16", dtypes=["fp16"], accums=["fp32"],
        summary=f"DeepSpeed {deepspeed.__version__} FP16_Optimizer.step (ZeRO off, fused Adam)")
def fp16_optimizer(case, g):
    return fp16_path(FP16_Optimizer, LossScaleProfile.FUSED, case, g)


@kernel("loss_scale", variant="ds-fp16-unfused", like="deepspeed-0.19-fp16", dtypes=["fp16"], accums=["fp32"],
        summary=f"DeepSpeed {deepspeed.__version__} FP16_UnfusedOptimizer.step (ZeRO off)")
def fp16_unfused(case, g):
    return fp16_path(FP16_UnfusedOptimizer, LossScaleProfile.UNFUSED, case, g)


class _Param(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.p = torch.nn.Parameter(torch.zeros(n))

    def forward(self, gt):
        return (self.p.float() * gt).sum()


_engines = {}


def zero_engine(n):
    """A ZeRO stage 1 engine over one parameter of n elements, built once per n and reset per
    case (the scaler's settings and trackers; the parameter stays 0: the recorder moves nothing)."""
    if n not in _engines:
        model = _Param(n)
        config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                  "fp16": {"enabled": True, "loss_scale": 0}, "zero_optimization": {"stage": 1},
                  "gradient_clipping": 0.0,  # 0.19.8's default is 1.0; loss_scale has no clip
                  "zero_allow_untested_optimizer": True, "steps_per_print": 10 ** 9, "wall_clock_breakdown": False}
        eng, opt, _, _ = deepspeed.initialize(model=model, optimizer=Recorder(model.parameters()), config=config)
        _engines[n] = (eng, opt)
    return _engines[n]


@kernel("loss_scale", variant="ds-zero1-scaler", like="deepspeed-0.19", dtypes=["fp16"], accums=["fp32"],
        summary=f"DeepSpeed {deepspeed.__version__} ZeRO stage 1 step with its DynamicLossScaler")
def zero1(case, g):
    steps, n = case.shape
    scale0, window, hysteresis, min_scale = settings(case)
    eng, opt = zero_engine(n)
    sc = opt.loss_scaler
    sc.cur_scale, sc.scale_window, sc.delayed_shift, sc.min_scale = scale0, window, hysteresis, min_scale
    sc.cur_hysteresis, sc.cur_iter, sc.last_overflow_iter = hysteresis, 0, -1
    applied = np.zeros((steps, n), np.float32)
    status = np.zeros(steps, np.float32)
    scales = np.zeros(steps, np.float32)
    stopped = False
    for t in range(steps):
        if not stopped:
            gt = torch.from_numpy(np.ascontiguousarray(g[t], dtype=np.float32))
            opt.optimizer.seen = None
            # times 1: not the forward's own output tensor (0.19.8's output hook would divide by
            # gradient_accumulation_steps, here 1 anyway)
            eng.backward(eng(gt) * 1.0, scale_wrt_gas=False)
            try:
                eng.step()
            except Exception as e:  # "Current loss scale already at minimum - cannot decrease scale anymore"
                if "already at minimum" not in str(e):
                    raise
                stopped = True
                opt.zero_grad(set_to_none=True)
        if stopped:
            status[t] = 2
        elif opt.overflow:
            status[t] = 1
        else:
            applied[t] = opt.optimizer.seen[0].reshape(-1)[:n].numpy()
        scales[t] = sc.cur_scale
    return {"grads": applied, "status": status, "scale": scales}


if __name__ == "__main__":
    sys.exit(serve())
