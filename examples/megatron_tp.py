"""Megatron-core's own mixed-precision optimizer under precfuzz's tensor-parallel differential,
on 2 real ranks.

    precfuzz --kernels ranks:2:".venv/bin/python examples/megatron_tp.py" \
        diff-tp -v megatron-core-bf16 --param tied=0 --cases 100
    ... --fault norm-bf16                      # torchtitan PR 4135: the total norm summed in bf16

Every case runs megatron-core 0.16.1's megatron.core.optimizer.Float16OptimizerWithFloat16Params
(unmodified; torch.optim.AdamW inside, which is what megatron-core takes when neither
Transformer Engine nor apex is installed, with its local multi-tensor norm and scale) twice on
the case's transformer layer: as TP=1 on rank 0 alone and as TP=2 on both ranks (Megatron's
column-, row- and vocab-parallel splits; split parameters carry tensor_model_parallel,
partition_dim and partition_stride as megatron's layers set them). Each step accumulates every
micro-batch's bf16 gradient into the parameter's fp32 main_grad (param.main_grad.add_(grad),
what megatron's DistributedDataParallel does in its backward hook), then calls the optimizer's
step(): main grads copied to the fp32 main params, the norm over the parameters that are not
shared and not TP duplicates, all-reduced over the optimizer's grad_stats_parallel_group,
clip_grad_by_total_norm_fp32, AdamW, the copy back to bf16. The optimizer's tp_group and
grad_stats_parallel_group are set as megatron's get_megatron_optimizer sets them. precfuzz checks
the result against the contract tp_diff/megatron-core; the norm step() returns (binary64) is
reported rounded to fp32.

The device shim, and nothing else (no arithmetic): megatron-core makes its scalars with
device='cuda' (clip_grads.py, utils.py, optimizer.py): those modules see a torch whose tensor()
and zeros() put them on the CPU; and it checks param.type() against 'torch.cuda.BFloat16Tensor'
and 'torch.cuda.FloatTensor': Tensor.type() with no argument answers a CPU tensor's type with its
CUDA name.

Fault switches (precfuzz --fault NAME), each a monkeypatch of megatron-core's code for the case:
  norm-no-dedup        param_is_not_tensor_parallel_duplicate always true: every TP rank counts
                       the replicated weights (Transformer Engine ROCm PR 715's effect)
  norm-not-allreduced  the optimizer's grad_stats_parallel_group is the rank's own: each rank
                       clips by its own norm
  norm-bf16            the total norm taken over bf16 copies of the gradients (torchtitan PR
                       4135: a norm computed in bf16 depends on the split)
"""

import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import precfuzz_ranks as pr  # noqa: E402  (first: rank 0's standard output is the protocol's)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

RANK, WORLD = pr.init()
if WORLD != 2:
    raise SystemExit(f"megatron_tp.py runs on 2 ranks (--kernels ranks:2:...), not {WORLD}")

with warnings.catch_warnings():  # "Transformer Engine and Apex are not installed": known
    warnings.simplefilter("ignore")
    import megatron.core  # noqa: E402
    import megatron.core.optimizer.clip_grads as clip_grads  # noqa: E402
    import megatron.core.optimizer.optimizer as mcore_optimizer  # noqa: E402
    import megatron.core.tensor_parallel as tensor_parallel  # noqa: E402
    import megatron.core.utils as mcore_utils  # noqa: E402
    from megatron.core.optimizer.optimizer_config import OptimizerConfig  # noqa: E402

assert megatron.core.__version__ == "0.16.1", f"written against megatron-core 0.16.1, not {megatron.core.__version__}"
assert clip_grads.l2_norm_impl is mcore_utils.local_multi_tensor_l2_norm, "megatron-core found apex or TE"


# --- the device shim -----------------------------------------------------------------------------

class _TorchOnCpu:
    """torch as megatron-core's modules see it: tensors asked for on 'cuda' are made on the CPU."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def _cpu(kw):
        if "device" in kw:
            kw["device"] = "cpu"
        return kw

    def tensor(self, *a, **kw):
        return torch.tensor(*a, **self._cpu(kw))

    def zeros(self, *a, **kw):
        return torch.zeros(*a, **self._cpu(kw))


for _module in (clip_grads, mcore_optimizer, mcore_utils):
    _module.torch = _TorchOnCpu()

_real_type = torch.Tensor.type


def _type_as_cuda(self, dtype=None, non_blocking=False, **kw):
    if dtype is None and not kw:
        name = _real_type(self)
        return name.replace("torch.", "torch.cuda.", 1) if not name.startswith("torch.cuda.") else name
    return _real_type(self, dtype, non_blocking, **kw)


torch.Tensor.type = _type_as_cuda

# every rank makes every group, in the same order (torch.distributed's rule)
SINGLE = [dist.new_group([0]), dist.new_group([1])]
PAIR = dist.new_group([0, 1])


# --- fault switches --------------------------------------------------------------------------------

def _norm_in_bf16(grads_for_norm, norm_type=2, grad_stats_parallel_group=None):
    return _real_norm([g.to(torch.bfloat16) for g in grads_for_norm], norm_type, grad_stats_parallel_group)


_real_norm = clip_grads.get_grad_norm_fp32
FAULTS = {
    "norm-no-dedup": [(tensor_parallel, "param_is_not_tensor_parallel_duplicate", lambda p, tp_group=None: True)],
    "norm-not-allreduced": [],  # the group is set per optimizer (run below)
    "norm-bf16": [(mcore_optimizer, "get_grad_norm_fp32", _norm_in_bf16)],
}


class fault:
    def __init__(self, name):
        if name and name not in FAULTS:
            raise ValueError(f"no fault {name!r} here ({', '.join(FAULTS)})")
        self.patches = FAULTS.get(name, []) if name else []

    def __enter__(self):
        self.saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in self.patches]
        for obj, attr, new in self.patches:
            setattr(obj, attr, new)

    def __exit__(self, *exc):
        for obj, attr, old in self.saved:
            setattr(obj, attr, old)


# --- the model and its optimizer -----------------------------------------------------------------

_built = {}


def optimizer_for(layer, tp, tp_rank):
    """(model parameters by block, the optimizer): built once per layout, reset per case."""
    key = (tp, tp_rank, layer.case.shape)
    if key not in _built:
        params = {}
        for b in layer.blocks:
            shard = b.shard(np.zeros((b.rows, b.cols), np.float32), tp_rank, tp)
            p = torch.nn.Parameter(torch.zeros(shard.shape, dtype=torch.bfloat16))
            split = b.kind != pr.REPLICATED and tp > 1
            tensor_parallel.set_tensor_model_parallel_attributes(p, split, (1 if b.kind == pr.ROW else 0) if split else -1, 1)
            p.main_grad = torch.zeros(shard.shape, dtype=torch.float32)
            params[b.name] = p
        decay = [params[b.name] for b in layer.blocks if b.decay]
        no_decay = [params[b.name] for b in layer.blocks if not b.decay]
        adamw = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}])
        config = OptimizerConfig(optimizer="adam", bf16=True, clip_grad=1.0, log_num_zeros_in_grad=False)
        opt = mcore_optimizer.Float16OptimizerWithFloat16Params(adamw, config, None, lambda o: None)
        _built[key] = (params, opt)
    return _built[key]


def run(layer, case, init, grads, tp, tp_rank, group):
    """One run of the case's steps: ({block name: (steps, 4, *shard shape)} of master, parameter,
    m, v after each step, [the gradient norm each step returned])."""
    params, opt = optimizer_for(layer, tp, tp_rank)
    index = {b.name: torch.from_numpy(b.shard(np.arange(b.offset, b.offset + b.size).reshape(b.rows, b.cols),
                                              tp_rank, tp).reshape(-1).astype(np.int64)) for b in layer.blocks}
    init_t = torch.from_numpy(np.asarray(init, dtype=np.float32))
    grads_t = torch.from_numpy(np.asarray(grads, dtype=np.float32).reshape(layer.steps, layer.mb, -1)).to(torch.bfloat16)
    # as get_megatron_optimizer sets them: the TP group, the group the norm is reduced over
    opt.tp_group = group
    opt.grad_stats_parallel_group = SINGLE[RANK] if case.fault == "norm-not-allreduced" else group
    # the case's state: fp32 main params from init (as after loading a checkpoint), bf16 model
    # params rounded from them, no Adam state; its hyperparameters
    for name, p in params.items():
        p.main_param.data.copy_(init_t[index[name]].view(p.shape))
        p.data.copy_(p.main_param.data)
        p.grad = None
    opt.optimizer.state.clear()
    for gi, g in enumerate(opt.optimizer.param_groups):
        g["lr"], g["betas"], g["eps"] = layer.lr, layer.betas, layer.eps
        g["weight_decay"] = layer.wd if gi == 0 else 0.0
    opt.config.clip_grad = layer.max_norm
    hist = {b.name: np.zeros((layer.steps, 4) + tuple(params[b.name].shape), np.float32) for b in layer.blocks}
    norms = []
    with fault(case.fault):
        for s in range(layer.steps):
            for p in params.values():
                p.main_grad.zero_()
            for k in range(layer.mb):
                for name, p in params.items():  # DDP's backward hook: main_grad += grad
                    p.main_grad.add_(grads_t[s, k, index[name]].view(p.shape))
            ok, grad_norm, _ = opt.step()
            if not ok:
                raise RuntimeError(f"step {s + 1} was skipped")
            norms.append(grad_norm)  # binary64; the outputs round it to fp32
            for name, p in params.items():
                st = opt.optimizer.state[p.main_param]
                h = hist[name][s]
                h[0] = p.main_param.detach().numpy()
                h[1] = p.detach().float().numpy()
                h[2] = st["exp_avg"].numpy()
                h[3] = st["exp_avg_sq"].numpy()
    return hist, norms


@pr.kernel("tp_diff", variant="megatron-core-bf16", like="megatron-core", dtypes=["bf16"], params={"tied": [0, 0]},
           faults=list(FAULTS),
           summary="megatron-core 0.16.1 Float16OptimizerWithFloat16Params (torch AdamW) on 2 gloo ranks")
def megatron_bf16(case, init, grads, gscale):
    layer = pr.TPLayer(case)
    out = {"tp2": run(layer, case, init, grads, 2, RANK, PAIR)}
    if RANK == 0:
        out["tp1"] = run(layer, case, init, grads, 1, 0, SINGLE[0])
    return out


@megatron_bf16.combine
def outputs(case, results):
    return pr.TPLayer(case).tp_outputs(results[0]["tp1"][0], [r["tp2"][0] for r in results], results[0]["tp1"][1],
                                       [r["tp2"][1] for r in results])


if __name__ == "__main__":
    sys.exit(pr.serve())
