#!/usr/bin/env python3
"""PyTorch's AdamW under precfuzz: one torch.optim.AdamW step on a parameter held in the case's
dtype, its gradient and state in the same dtype (no fp32 master). Three of PyTorch's
implementations, as three variants, each judged by the contract of precfuzz's emulation of it:

  torch-adamw           foreach=False: the single-tensor loop (the CPU default); adam/torch
  torch-adamw-foreach   foreach=True: the _foreach_* ops (the CUDA default); adam/torch-foreach
  torch-adamw-fused     fused=True: one fused kernel; adam/torch-fused on the CPU,
                        adam/torch-fused-cuda on CUDA (the two kernels compute m and v differently)

  precfuzz --kernels exec:"python3 examples/torch_adamw.py" run -k adam -v torch-adamw -t bf16 --cases 200

The case's step t is the optimizer's state step before this one plus one; m and v are its
exp_avg and exp_avg_sq. AdamW decays decoupled only: the l2 mode is refused. The fused variant
takes what torch.amp.GradScaler hands a fused optimizer (its grad_scale and found_inf
attributes, which AdamW.step passes to _fused_adamw_): the case's grad_scale and found_inf.
PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=adam start=exec needs=torch cases=30 variants=torch-adamw,torch-adamw-foreach,torch-adamw-fused
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
ABOUT = f"torch {torch.__version__} on {DEVICE}"


def adamw_step(case, p, g, m, v, **impl):
    a = case.params
    param = torch.nn.Parameter(to_torch(p, DEVICE))
    param.grad = to_torch(g, DEVICE)
    opt = torch.optim.AdamW([param], lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"],
                            weight_decay=a["wd"], **impl)
    # the state as AdamW keeps it: step a float32 tensor (on the parameter's device when fused)
    step_device = DEVICE if impl.get("fused") else "cpu"
    opt.state[param] = {"step": torch.tensor(a["step"] - 1, dtype=torch.float32, device=step_device),
                        "exp_avg": to_torch(m, DEVICE), "exp_avg_sq": to_torch(v, DEVICE)}
    if impl.get("fused"):  # as GradScaler.step sets them on an optimizer that unscales itself
        opt.grad_scale = torch.tensor(a["grad_scale"], dtype=torch.float32, device=DEVICE)
        opt.found_inf = torch.tensor(float(a["found_inf"]), dtype=torch.float32, device=DEVICE)
    opt.step()
    s = opt.state[param]
    return {"m": s["exp_avg"], "v": s["exp_avg_sq"], "param": param.detach()}


COMMON = dict(accums=["fp32"], params={"mode": ["adamw"], "grad_scale": [1, 1], "found_inf": [0, 0]})
FUSED = dict(accums=["fp32"], params={"mode": ["adamw"]})


@kernel("adam", variant="torch-adamw", like="torch", summary=f"torch.optim.AdamW(foreach=False), {ABOUT}", **COMMON)
def adamw(case, p, g, m, v):
    return adamw_step(case, p, g, m, v, foreach=False)


@kernel("adam", variant="torch-adamw-foreach", like="torch-foreach", summary=f"torch.optim.AdamW(foreach=True), {ABOUT}",
        **COMMON)
def adamw_foreach(case, p, g, m, v):
    return adamw_step(case, p, g, m, v, foreach=True)


@kernel("adam", variant="torch-adamw-fused", like="torch-fused-cuda" if DEVICE == "cuda" else "torch-fused",
        summary=f"torch.optim.AdamW(fused=True), {ABOUT}", **FUSED)
def adamw_fused(case, p, g, m, v):
    return adamw_step(case, p, g, m, v, fused=True)


if __name__ == "__main__":
    sys.exit(serve())
