"""Megatron-core's own mixed-precision optimizer under precfuzz's tensor-parallel differential,
on 2 or 4 real ranks.

    precfuzz --kernels ranks:2:".venv/bin/python examples/megatron_tp.py" \
        diff-tp -v megatron-core-bf16 --param tied=0 --cases 100
    ... --fault norm-bf16                      # torchtitan PR 4135: the total norm summed in bf16
    precfuzz --kernels ranks:4:".venv/bin/python examples/megatron_tp.py" \
        diff-tp -v megatron-core-bf16 --fault tied-grad-unreduced   # seed 004: PP=2, tied embedding

On 4 ranks a case with a tied embedding (tied=1) runs as TP=1 x PP=2 (ranks 0 and 1) and as
TP=2 x PP=2 (rank 2 pp + tp): the last stage holds the LM head, the embedding's tied copy
(marked shared, as megatron's output layer is), and after every step's micro-batches megatron's
own finalize_model_grads._allreduce_word_embedding_grads sums the two stages' gradients over
the embedding group.

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
  tied-grad-unreduced  seed 004 (BLOOM-176B: "tied weights weren't getting reduced"):
                       _allreduce_word_embedding_grads does nothing; each stage's copy of the
                       tied embedding steps on its own half of the gradient (4 ranks, tied=1)
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
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import precfuzz_ranks as pr  # noqa: E402  (first: rank 0's standard output is the protocol's)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

RANK, WORLD = pr.init()
if WORLD not in (2, 4):
    raise SystemExit(f"megatron_tp.py runs on 2 or 4 ranks (--kernels ranks:N:...), not {WORLD}")

with warnings.catch_warnings():  # "Transformer Engine and Apex are not installed": known
    warnings.simplefilter("ignore")
    import megatron.core  # noqa: E402
    import megatron.core.optimizer.clip_grads as clip_grads  # noqa: E402
    import megatron.core.optimizer.optimizer as mcore_optimizer  # noqa: E402
    import megatron.core.tensor_parallel as tensor_parallel  # noqa: E402
    import megatron.core.utils as mcore_utils  # noqa: E402
    import megatron.core.distributed  # noqa: E402,F401
    # the module (the package's attribute of that name is its function)
    finalize_model_grads = sys.modules["megatron.core.distributed.finalize_model_grads"]
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
SINGLE = [dist.new_group([r]) for r in range(WORLD)]
PAIR = dist.new_group([0, 1])  # TP=2 on stage 0; TP=1 x PP=2's pipeline
if WORLD == 4:
    STAGE1 = dist.new_group([2, 3])  # TP=2 on stage 1
    EMBED = [dist.new_group([0, 2]), dist.new_group([1, 3])]  # stage 0 and 1 of one TP rank
    ALL = dist.new_group([0, 1, 2, 3])


def place(tp, pp):
    """This rank's part in a run of TP x PP: None (not in it), or (pp rank, tp rank, TP group,
    model-parallel group, embedding group)."""
    if tp * pp > WORLD:
        raise ValueError(f"TP={tp} x PP={pp} needs {tp * pp} ranks, the group has {WORLD}")
    if RANK >= tp * pp:
        return None
    if tp == 1 and pp == 1:
        return 0, 0, SINGLE[0], SINGLE[0], None
    if pp == 1:
        return 0, RANK, PAIR, PAIR, None
    if tp == 1:
        return RANK, 0, SINGLE[RANK], PAIR, PAIR
    return RANK // 2, RANK % 2, (PAIR, STAGE1)[RANK // 2], ALL, EMBED[RANK % 2]


class _Chunk(torch.nn.Module):
    """What finalize_model_grads asks of a model chunk that shares its embedding and output
    weights: a DDP config, pre_process, the shared weight."""

    def __init__(self, weight):
        super().__init__()
        self.ddp_config = SimpleNamespace(use_megatron_fsdp=False)
        self.pre_process = True
        self.share_embeddings_and_output_weights = True
        self._weight = [weight]

    def shared_embedding_or_output_weight(self):
        return self._weight[0]


# --- fault switches --------------------------------------------------------------------------------

def _norm_in_bf16(grads_for_norm, norm_type=2, grad_stats_parallel_group=None):
    return _real_norm([g.to(torch.bfloat16) for g in grads_for_norm], norm_type, grad_stats_parallel_group)


_real_norm = clip_grads.get_grad_norm_fp32
FAULTS = {
    "norm-no-dedup": [(tensor_parallel, "param_is_not_tensor_parallel_duplicate", lambda p, tp_group=None: True)],
    "norm-not-allreduced": [],  # the group is set per optimizer (run below)
    "norm-bf16": [(mcore_optimizer, "get_grad_norm_fp32", _norm_in_bf16)],
    # seed 004: the tied embedding's two stages not summed (each stage steps on its own gradient)
    "tied-grad-unreduced": [(finalize_model_grads, "_allreduce_word_embedding_grads", lambda *a, **k: None)],
}


# --- the model and its optimizer -----------------------------------------------------------------

_built = {}


def optimizer_for(layer, tp, tp_rank, stage):
    """(model parameters by block, the optimizer) of a rank at TP rank tp_rank on pipeline stage
    `stage` (stage 1 holds the LM head: the tied embedding alone): built once per layout, reset
    per case."""
    key = (tp, tp_rank, stage, layer.case.shape)
    if key not in _built:
        params = {}
        for b in layer.blocks if stage == 0 else layer.blocks[-1:]:
            shard = b.shard(np.zeros((b.rows, b.cols), np.float32), tp_rank, tp)
            p = torch.nn.Parameter(torch.zeros(shard.shape, dtype=torch.bfloat16))
            split = b.kind != pr.REPLICATED and tp > 1
            tensor_parallel.set_tensor_model_parallel_attributes(p, split, (1 if b.kind == pr.ROW else 0) if split else -1, 1)
            if stage == 1:  # the output layer's weight on the last stage, as megatron marks it
                p.shared = True
                p.shared_embedding = True
            p.main_grad = torch.zeros(shard.shape, dtype=torch.float32)
            params[b.name] = p
        decay = [p for name, p in params.items() if layer.block(name).decay]
        no_decay = [p for name, p in params.items() if not layer.block(name).decay]
        groups = [{"params": g, "weight_decay": 0.0, "decay": d} for g, d in ((decay, True), (no_decay, False)) if g]
        adamw = torch.optim.AdamW(groups)
        config = OptimizerConfig(optimizer="adam", bf16=True, clip_grad=1.0, log_num_zeros_in_grad=False)
        opt = mcore_optimizer.Float16OptimizerWithFloat16Params(adamw, config, None, lambda o: None)
        _built[key] = (params, opt, _Chunk(params["embed.w"]))
    return _built[key]


def run(layer, case, init, grads, tp, pp):
    """This rank's part of one run of the case's steps as TP x PP: None when it has none, else
    ((pp rank, tp rank), ({block name: (steps, 4, *shard shape)} of master, parameter, m, v after
    each step, [the gradient norm each step returned]))."""
    at = place(tp, pp)
    if at is None:
        return None
    stage, tp_rank, tp_group, mp_group, embd_group = at
    params, opt, chunk = optimizer_for(layer, tp, tp_rank, stage)
    index, source = {}, {}
    for name in params:
        b = layer.block(name)
        local = torch.from_numpy(b.shard(np.arange(b.size).reshape(b.rows, b.cols), tp_rank, tp).reshape(-1).astype(np.int64))
        index[name] = b.offset + local
        # stage 1's gradient is the LM head's contribution (after the n parameters in grads)
        source[name] = (layer.n + local) if stage == 1 else index[name]
    init_t = torch.from_numpy(np.asarray(init, dtype=np.float32))
    grads_t = torch.from_numpy(np.asarray(grads, dtype=np.float32).reshape(layer.steps, layer.mb, -1)).to(torch.bfloat16)
    # as get_megatron_optimizer sets them: the TP group, the group the norm is reduced over
    opt.tp_group = tp_group
    opt.grad_stats_parallel_group = SINGLE[RANK] if case.fault == "norm-not-allreduced" else mp_group
    # the case's state: fp32 main params from init (as after loading a checkpoint), bf16 model
    # params rounded from them, no Adam state; its hyperparameters
    for name, p in params.items():
        p.main_param.data.copy_(init_t[index[name]].view(p.shape))
        p.data.copy_(p.main_param.data)
        p.grad = None
    opt.optimizer.state.clear()
    for g in opt.optimizer.param_groups:
        g["lr"], g["betas"], g["eps"] = layer.lr, layer.betas, layer.eps
        g["weight_decay"] = layer.wd if g["decay"] else 0.0
    opt.config.clip_grad = layer.max_norm
    hist = {name: np.zeros((layer.steps, 4) + tuple(p.shape), np.float32) for name, p in params.items()}
    norms = []
    with pr.switched(FAULTS, case.fault):
        for s in range(layer.steps):
            for p in params.values():
                p.main_grad.zero_()
            for k in range(layer.mb):
                for name, p in params.items():  # DDP's backward hook: main_grad += grad
                    p.main_grad.add_(grads_t[s, k, source[name]].view(p.shape))
            if pp > 1:  # finalize_model_grads: the tied embedding's gradients summed over its stages
                finalize_model_grads._allreduce_word_embedding_grads([chunk], SimpleNamespace(mtp_num_layers=None),
                                                                     embd_group, embd_group)
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
    return (stage, tp_rank), (hist, norms)


@pr.kernel("tp_diff", variant="megatron-core-bf16", like="megatron-core", dtypes=["bf16"],
           params=None if WORLD == 4 else {"tied": [0, 0]}, faults=list(FAULTS),
           summary=f"megatron-core 0.16.1 Float16OptimizerWithFloat16Params (torch AdamW) on {WORLD} gloo ranks")
def megatron_bf16(case, init, grads, gscale):
    layer = pr.TPLayer(case)
    pp = 2 if layer.tied else 1
    return [run(layer, case, init, grads, 1, pp), run(layer, case, init, grads, 2, pp)]


@megatron_bf16.combine
def outputs(case, results):
    runs = [dict(r[i] for r in results if r[i] is not None) for i in range(2)]
    return pr.TPLayer(case).tp_outputs(runs)


if __name__ == "__main__":
    sys.exit(pr.serve())
