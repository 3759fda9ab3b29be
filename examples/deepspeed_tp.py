"""DeepSpeed's own BF16_Optimizer under precfuzz's tensor-parallel differential, on 2 real ranks.

    precfuzz --kernels ranks:2:".venv/bin/python examples/deepspeed_tp.py" \
        diff-tp -v deepspeed-bf16 --param tied=0 --cases 100
    ... --fault tp-replicated-unclipped        # seed 002: BLOOM's LayerNorm weights drift apart

Every case runs DeepSpeed 0.19.8's deepspeed.runtime.bf16_optimizer.BF16_Optimizer (unmodified;
torch.optim.AdamW inside, since FusedAdam needs CUDA) twice on the case's transformer layer:
as TP=1 on rank 0 alone, and as TP=2 on both ranks (Megatron's column-, row- and vocab-parallel
splits, the split parameters marked tensor_model_parallel as Megatron marks them, an mpu object
giving the groups). Each step feeds every micro-batch's bf16 gradient to the optimizer's own
fp32 accumulation (update_hp_grads), then calls step(): DeepSpeed's norm over its deduplicated
norm set, all-reduced over the TP group, its clip, AdamW, the bf16 write-back. Every rank's
master, parameter, m and v after every step come back to precfuzz, which checks (contract
tp_diff/deepspeed) that replicated parameters are bitwise equal on both TP ranks and that both
runs lie in the set every summation order of the norm allows.

The device shim, and nothing else: DS_ACCELERATOR=cpu, gloo, no shared-memory op build
(deepspeed.comm.torch.build_shm_op, only inference all-reduce uses it, would JIT-compile C++),
and see_memory_usage silenced (it runs gc.collect() and prints), fp16 allowed on a CPU whose oneDNN
lacks it (DeepSpeed asks the accelerator, not torch). They add no arithmetic.

Fault switches (precfuzz --fault NAME), each a monkeypatch of DeepSpeed's code for the case:
  tp-replicated-unclipped  seed 002 (DeepSpeed PR 1801): get_grads_for_norm as the write-up
                           gives it, the TP filter one indentation level out, so TP rank 1
                           leaves its replicated parameters out of the clip as well as the norm
  norm-no-dedup            replicated weights marked tensor-parallel (Transformer Engine ROCm
                           PR 715): every TP rank counts them in the norm
  norm-rank0-only          only TP rank 0's gradients reach the norm, the other ranks adding 0
                           (the effect of DeepSpeed PR 5411's bug: flattened groups seen as not
                           tensor-parallel)
  norm-not-allreduced      the norm taken without the mpu: each rank clips by its own norm
  norm-averaged            per-rank norms averaged over the group instead of their squares summed
                           (DeepSpeed issue 8469)

Through the engine (deepspeed.initialize, its optimizer as the config picks it), TP=1 x DP=1
against one layout of two ranks: deepspeed-zero1-bf16 (ZeRO-1, fp32 accumulation: its
BF16_Optimizer; DP=2), deepspeed-zero2-bf16 (DP=2), deepspeed-zero2-tp-bf16 (TP=2),
deepspeed-zero1-bf16acc (DP=2), all DeepSpeedZeroOptimizer in bf16 with bf16 accumulation, and
deepspeed-zero2-fp16 (DP=2), deepspeed-zero2-tp-fp16 (TP=2) and deepspeed-zero1-fp16 (DP=2):
ZeRO in fp16, the gradients accumulated in fp16, with a static loss scale or (--param scaler=1) DeepSpeed's DynamicLossScaler
set per case from loss_scale, growth_interval (its scale_window), hysteresis and min_loss_scale.
Their switches: dp-grad-unreduced (the bucket all-reduce never sent), norm-rank0-only (DeepSpeed
PR 5411: no parameter seen as tensor-parallel), norm-no-dedup, and unscale-after-update: no
patch at all. DeepSpeed 0.19.8's ZeRO step updates the scaler before unscale_and_clip_grads
divides by it, so on a step where the dynamic scale doubles and the clip does not bind the
gradients are halved (noted in DeepSpeed PR 8588's discussion): precfuzz reports that as a
finding without the switch, and with it compares DeepSpeed against its model of that order.

With --param resume_at=K the second layout also runs with a round trip through DeepSpeed's own
checkpoint code (docs/checkpoint.md): deepspeed-bf16 saves the module's bf16 weights and
BF16_Optimizer.state_dict() with torch.save and loads them into a fresh BF16_Optimizer
(load_state_dict, load_from_fp32_weights=True, the engine's default); the engine variants call
engine.save_checkpoint and, in a fresh deepspeed.initialize, engine.load_checkpoint. The objects
that saved have every tensor set to NaN first. Switches: ckpt-master-from-param
(zero_optimization.load_from_fp32_weights off), ckpt-scale-reset (fp16: the scaler set back to
the case's start after the load).
"""
# (fuzz=: make fuzz-torch aims at the bf16 variants, as it did before this line; the fp16 engine
# variants have not been run under the fuzz driver yet)
# precfuzz-target: kernel=tp_diff start=ranks:2 needs=frameworks cases=4 variants=deepspeed-bf16,deepspeed-zero1-bf16,deepspeed-zero2-bf16,deepspeed-zero2-tp-bf16,deepspeed-zero1-bf16acc,deepspeed-zero2-fp16,deepspeed-zero1-fp16,deepspeed-zero2-tp-fp16 fuzz=deepspeed-bf16,deepspeed-zero1-bf16,deepspeed-zero2-bf16,deepspeed-zero2-tp-bf16,deepspeed-zero1-bf16acc

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import precfuzz_ranks as pr  # noqa: E402  (first: rank 0's standard output is the protocol's)

os.environ.setdefault("DS_ACCELERATOR", "cpu")
# a private folder for torch's extension builds: no lock shared with another run
os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join("/tmp", f"precfuzz-ds-ext-{os.getpid()}"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

RANK, WORLD = pr.init()
if WORLD != 2:
    raise SystemExit(f"deepspeed_tp.py runs on 2 ranks (--kernels ranks:2:...), not {WORLD}")

import deepspeed.comm.torch  # noqa: E402,F401

sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # shim: no C++ build
import deepspeed  # noqa: E402
from deepspeed.accelerator import get_accelerator  # noqa: E402

# shim: the engine refuses fp16 on a CPU whose oneDNN has no fp16 kernels (an AMD EPYC, an Intel
# before Sapphire Rapids); the step's fp16 tensors run on torch's own CPU kernels, which every CPU has
get_accelerator().is_fp16_supported = lambda: True
import deepspeed.runtime.bf16_optimizer as bf16_module  # noqa: E402
from deepspeed.runtime.precision_config import DeepSpeedBF16Config  # noqa: E402
from deepspeed.runtime.utils import get_global_norm_of_tensors as _real_global_norm  # noqa: E402

import deepspeed.runtime.zero.muon.muon_optimizer  # noqa: E402,F401  (BF16_Optimizer imports it, and torch.compile, on first use: at start, not in a case)
bf16_module.see_memory_usage = lambda *a, **k: None  # shim: no gc.collect(), no print
deepspeed.init_distributed(dist_backend="gloo", verbose=False)

assert deepspeed.__version__ == "0.19.8", f"written against DeepSpeed 0.19.8, not {deepspeed.__version__}"

# every rank makes every group, in the same order (torch.distributed's rule)
SINGLE = [dist.new_group([0]), dist.new_group([1])]
PAIR = dist.new_group([0, 1])


class Mpu:
    """What BF16_Optimizer and the engine ask of Megatron's mpu: the TP group (= the
    model-parallel group, PP=1) and the data-parallel group."""

    def __init__(self, tp_group, dp_group):
        self.tp, self.dp = tp_group, dp_group

    def get_tensor_model_parallel_rank(self):
        return dist.get_rank(self.tp)

    def get_tensor_model_parallel_world_size(self):
        return dist.get_world_size(self.tp)

    def get_tensor_model_parallel_group(self):
        return self.tp

    get_model_parallel_rank = get_tensor_model_parallel_rank
    get_model_parallel_world_size = get_tensor_model_parallel_world_size
    get_model_parallel_group = get_tensor_model_parallel_group

    def get_data_parallel_group(self):
        return self.dp

    def get_data_parallel_rank(self):
        return dist.get_rank(self.dp)

    def get_data_parallel_world_size(self):
        return dist.get_world_size(self.dp)

    def get_pipeline_model_parallel_world_size(self):
        return 1


# --- fault switches: monkeypatches of DeepSpeed's code ----------------------------------------

_real_grads_for_norm = bf16_module.BF16_Optimizer.get_grads_for_norm
_real_is_mp = bf16_module.is_model_parallel_parameter


@torch.no_grad()
def _seed002_grads_for_norm(self, for_clipping=False):
    """The write-up's get_grads_for_norm (seed 002), in 0.19.8's return shape."""
    grads = []
    tensor_mp_rank = bf16_module.bwc_tensor_model_parallel_rank(mpu=self.mpu)
    for i, group in enumerate(self.bf16_groups):
        for j, lp in enumerate(group):
            if not for_clipping:
                if hasattr(lp, bf16_module.PIPE_REPLICATED) and lp.ds_pipe_replicated:
                    continue
            if not (tensor_mp_rank == 0 or bf16_module.is_model_parallel_parameter(lp)):
                continue  # as compared to the original code, this line is moved out by one indentation level
            if not self.fp32_groups_has_gradients[i][j]:
                continue
            grads.append(self.fp32_groups_gradients[i][j])
    return grads if for_clipping else (grads, {})


@torch.no_grad()
def _rank0_only_grads_for_norm(self, for_clipping=False):
    """DeepSpeed PR 5411's effect: only TP rank 0's gradients in the norm; the others add 0."""
    got = _real_grads_for_norm(self, for_clipping)
    if for_clipping or bf16_module.bwc_tensor_model_parallel_rank(mpu=self.mpu) == 0:
        return got
    return [torch.zeros(1)], {}


def _norm_without_mpu(input_tensors, norm_type=2, mpu=None, moe_ep_group=None):
    return _real_global_norm(input_tensors, norm_type=norm_type, mpu=None, moe_ep_group=moe_ep_group)


def _norm_averaged(input_tensors, norm_type=2, mpu=None, moe_ep_group=None):
    local = _real_global_norm(input_tensors, norm_type=norm_type, mpu=None, moe_ep_group=moe_ep_group)
    if mpu is not None:
        dist.all_reduce(local, op=dist.ReduceOp.SUM, group=mpu.get_model_parallel_group())
        local = local / dist.get_world_size(mpu.get_model_parallel_group())
    return local


@torch.no_grad()
def _partition_grads_for_norm(self, for_clipping=False):
    """The norm over this data-parallel rank's partition of the gradients only (the ZeRO norm
    bugs' class: DeepSpeed PR 5411, Megatron-LM PR 5916: gradients left out of the norm)."""
    if for_clipping:
        return _real_grads_for_norm(self, for_clipping)
    return list(self.fp32_groups_gradient_flat_partition), {}


FAULTS = {
    "tp-replicated-unclipped": [(bf16_module.BF16_Optimizer, "get_grads_for_norm", _seed002_grads_for_norm)],
    "norm-no-dedup": [(bf16_module, "is_model_parallel_parameter", lambda p: True)],
    "norm-rank0-only": [(bf16_module.BF16_Optimizer, "get_grads_for_norm", _rank0_only_grads_for_norm)],
    "norm-not-allreduced": [(bf16_module, "get_global_norm_of_tensors", _norm_without_mpu)],
    "norm-averaged": [(bf16_module, "get_global_norm_of_tensors", _norm_averaged)],
    # through the engine (deepspeed-zero1-bf16): the replicas' gradients never all-reduced
    "dp-grad-unreduced": [],  # DeepSpeedEngine.allreduce_gradients, patched below (the engine's module)
    "norm-shard-only": [(bf16_module.BF16_Optimizer, "get_grads_for_norm", _partition_grads_for_norm)],
    # the round trip's (load_bf16, run_engine below): zero_optimization.load_from_fp32_weights off
    "ckpt-master-from-param": [],
    "ckpt-scale-reset": [],  # the engines' fp16 scaler made anew after the load (run_engine)
}


# --- the model and its optimizer --------------------------------------------------------------

_built = {}  # (tp, tp_rank, shapes) -> (params by block, BF16_Optimizer): built once, reset per case


def optimizer_for(layer, tp, tp_rank, group, fresh=False):
    """This rank's bf16 parameters and their BF16_Optimizer (fresh: new ones, not the cached)."""
    key = (tp, tp_rank, tuple((b.name, b.rows, b.cols) for b in layer.blocks))
    if key not in _built or fresh:
        params = {}
        for b in layer.blocks:
            shard = b.shard(np.zeros((b.rows, b.cols), np.float32), tp_rank, tp)
            p = torch.nn.Parameter(torch.zeros(shard.shape, dtype=torch.bfloat16))
            if b.kind != pr.REPLICATED and tp > 1:  # as Megatron's layers mark their weights
                p.tensor_model_parallel = True
                p.partition_dim = 1 if b.kind == pr.ROW else 0
                p.partition_stride = 1
            params[b.name] = p
        decay = [params[b.name] for b in layer.blocks if b.decay]
        no_decay = [params[b.name] for b in layer.blocks if not b.decay]
        adamw = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}])
        names = {p: n for n, p in params.items()}
        opt = bf16_module.BF16_Optimizer(adamw, names, DeepSpeedBF16Config(enabled=True), mpu=Mpu(group, SINGLE[RANK]),
                                         clip_grad=1.0, dp_process_group=SINGLE[RANK], grad_acc_dtype=torch.float32)
        if fresh:
            return params, opt
        _built[key] = (params, opt)
    return _built[key]


def _zero_layout(opt):
    """(the low-precision groups, each group's fp32 partition) of either optimizer."""
    if isinstance(opt, bf16_module.BF16_Optimizer):
        return opt.bf16_groups, opt.fp32_groups_flat_partition
    return opt.bit16_groups, opt.single_partition_of_fp32_groups


def flat_offsets(opt):
    """(group, offset, numel) of every low-precision parameter in its group's flat buffer,
    parameters back to back (at DP=1 the fp32 partition is the whole buffer; at DP=2 each
    replica holds a slice of it)."""
    where = {}
    for i, group in enumerate(_zero_layout(opt)[0]):
        off = 0
        for lp in group:
            where[lp] = (i, off, lp.numel())
            off += lp.numel()
    return where


def shard_index(layer, tp, tp_rank):
    """{block name: the global indices of this rank's shard of it, in the shard's order}."""
    # keyed by the blocks, as optimizer_for is: the shape alone does not say how many layers
    key = ("index", tp, tp_rank, tuple((b.name, b.offset, b.rows, b.cols) for b in layer.blocks))
    if key not in _built:
        _built[key] = {b.name: torch.from_numpy(b.shard(np.arange(b.offset, b.offset + b.size).reshape(b.rows, b.cols),
                                                         tp_rank, tp).reshape(-1).astype(np.int64))
                       for b in layer.blocks}
    return _built[key]


def reset(opt, layer):
    """A BF16_Optimizer as at the case's start (its masters set apart): no Adam state, empty
    gradient buffers, the case's hyperparameters."""
    opt.optimizer.state.clear()
    opt._hp_optimizer_states_linked = False
    opt.clear_hp_grads()
    for i in range(len(opt.fp32_groups_has_gradients)):
        opt.fp32_groups_has_gradients[i] = [False] * len(opt.fp32_groups_has_gradients[i])
    _hyperparameters(opt, layer)


def _hyperparameters(opt, layer):
    """The case's lr, betas, eps, weight decay (group 0: the weights) and max_norm, in either optimizer."""
    for gi, g in enumerate(opt.optimizer.param_groups):
        g["lr"], g["betas"], g["eps"] = layer.lr, layer.betas, layer.eps
        g["weight_decay"] = layer.wd if gi == 0 else 0.0
    opt.clip_grad = layer.max_norm


def run(layer, case, init, grads, tp, tp_rank, group):
    """One run of the case's steps: ({block name: (steps, 4, *shard shape)} of master, parameter,
    m, v after each step, [the gradient norm each step reported])."""
    params, opt = optimizer_for(layer, tp, tp_rank, group)
    where = flat_offsets(opt)
    index = shard_index(layer, tp, tp_rank)
    init_t = torch.from_numpy(np.asarray(init, dtype=np.float32))
    # every micro-batch gradient rounded to bf16 at once (round to nearest even, as .to() does),
    # each parameter's shard of them gathered once: (steps, micro-batches, *shard shape)
    grads_t = torch.from_numpy(np.asarray(grads, dtype=np.float32).reshape(layer.steps, layer.mb, -1)).to(torch.bfloat16)
    shard_grads = {name: grads_t[:, :, index[name]].view((layer.steps, layer.mb) + tuple(p.shape))
                   for name, p in params.items()}
    # the case's state: fp32 masters from init (as after loading a checkpoint), bf16 copies of
    # them, no Adam state, empty gradient buffers; its hyperparameters
    for name, p in params.items():
        i, off, k = where[p]
        opt.fp32_groups_flat_partition[i].data[off:off + k].copy_(init_t[index[name]])
    reset(opt, layer)
    opt.update_lp_params()
    norms, flats = [], [None] * layer.steps
    state = np.zeros((layer.steps, 5))

    def record(s, opt):
        # each group's flat master, bf16 parameters, m and v, copied whole; the step count
        def adam(i, q):
            st = opt.optimizer.state.get(opt.fp32_groups_flat_partition[i], {})
            return st[q].numpy().copy() if q in st else np.zeros(opt.fp32_groups_flat_partition[i].numel(), np.float32)

        flats[s] = [np.stack([opt.fp32_groups_flat_partition[i].detach().numpy().copy(),
                              opt.bf16_groups_flat[i].detach().float().numpy(), adam(i, "exp_avg"), adam(i, "exp_avg_sq")])
                    for i in range(len(opt.bf16_groups))]
        state[s, 0] = float(opt.optimizer.state.get(opt.fp32_groups_flat_partition[0], {}).get("step", 0))

    def train(steps, params, opt):
        for s in steps:
            for k in range(layer.mb):
                for name, p in params.items():
                    p.grad = shard_grads[name][s, k]
                opt.update_hp_grads(clear_lp_grads=True)
            opt.step()
            norms.append(float(opt._global_grad_norm))  # an fp32 tensor: its value exactly
            record(s, opt)

    with pr.switched(FAULTS, case.fault):
        train(range(layer.resume or layer.steps), params, opt)
        if layer.resume:  # with DeepSpeed's own state dicts, into a fresh BF16_Optimizer
            with pr.checkpoint_dir(group) as path:
                save_bf16(params, opt, path, tp_rank)
                pr.poison(state_tensors(params.values(), opt))
                params, opt = optimizer_for(layer, tp, tp_rank, group, fresh=True)
                load_bf16(params, opt, path, tp_rank, case)
            where = flat_offsets(opt)
            record(layer.resume - 1, opt)
            train(range(layer.resume, layer.steps), params, opt)
    hist = {}
    for name, p in params.items():
        i, off, k = where[p]
        hist[name] = np.stack([step[i][:, off:off + k] for step in flats]).reshape((layer.steps, 4) + tuple(p.shape))
    return hist, norms, state


# --- the round trip (resume_at): DeepSpeed's own state dicts -----------------------------------

def save_bf16(params, opt, path, tp_rank):
    """What DeepSpeed's engine writes for this rank, by the same calls: the module's bf16 weights
    and BF16_Optimizer.state_dict(), each with torch.save, in the engine's file names."""
    torch.save({n: p.detach().clone() for n, p in params.items()}, os.path.join(path, f"mp_rank_{tp_rank:02d}_model_states.pt"))
    torch.save(opt.state_dict(), os.path.join(path, f"bf16_zero_pp_rank_0_mp_rank_{tp_rank:02d}_optim_states.pt"))


def load_bf16(params, opt, path, tp_rank, case):
    """The engine's load, by the same calls: the module's weights into the bf16 parameters, then
    BF16_Optimizer.load_state_dict(load_from_fp32_weights=True), the engine's default. The fault
    ckpt-master-from-param: load_from_fp32_weights=False (zero_optimization.load_from_fp32_weights
    in the config)."""
    weights = torch.load(os.path.join(path, f"mp_rank_{tp_rank:02d}_model_states.pt"), weights_only=True)
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(weights[n])
    sd = torch.load(os.path.join(path, f"bf16_zero_pp_rank_0_mp_rank_{tp_rank:02d}_optim_states.pt"), weights_only=False)
    opt.load_state_dict([sd], load_from_fp32_weights=case.fault != "ckpt-master-from-param")


def state_tensors(params, opt):
    """The low-precision parameters, the fp32 masters and every tensor of the Adam state."""
    return list(params) + list(_zero_layout(opt)[1]) + [v for st in opt.optimizer.state.values() for v in st.values()]


@pr.kernel("tp_diff", variant="deepspeed-bf16", like="deepspeed", dtypes=["bf16"],
           params={"tied": [0, 0], "tp": [2, 2], "dp": [1, 1], "experts": [0, 0], "comm": [0, 0], "resume_at": [0, 1e6]},
           faults=[f for f in FAULTS if f not in ("dp-grad-unreduced", "norm-shard-only", "unscale-after-update",
                                                   "ckpt-scale-reset")],
           summary="DeepSpeed 0.19.8 BF16_Optimizer (torch AdamW) on 2 gloo ranks: TP=1 on rank 0, TP=2 on both; "
                   "its state dicts for resume_at")
def deepspeed_bf16(case, init, grads, gscale):
    layer = pr.TPLayer(case)
    out = {"tp2": run(layer, case, init, grads, 2, RANK, PAIR)}
    if layer.resume:  # the same run straight beside the round trip
        straight = pr.TPLayer(case)
        straight.resume = 0
        out["straight"] = run(straight, case, init, grads, 2, RANK, PAIR)
    if RANK == 0:
        one = pr.TPLayer(case)
        one.resume = 0
        out["tp1"] = run(one, case, init, grads, 1, 0, SINGLE[0])
    return out


@deepspeed_bf16.combine
def outputs(case, results):
    layer = pr.TPLayer(case)
    straight = {(0, 0, r): res["straight"] for r, res in enumerate(results)} if layer.resume else None
    return layer.tp_outputs([{(0, 0): results[0]["tp1"]}, {(0, r): res["tp2"] for r, res in enumerate(results)}], straight)


# --- through the engine: deepspeed.initialize, ZeRO stages 1 and 2 -----------------------------

import deepspeed.runtime.zero.stage_1_and_2 as zero_module  # noqa: E402
import deepspeed.utils.groups as ds_groups  # noqa: E402
from deepspeed.runtime.engine import DeepSpeedEngine  # noqa: E402

zero_module.see_memory_usage = lambda *a, **k: None  # shim: no gc.collect(), no print
_real_allreduce_gradients = DeepSpeedEngine.allreduce_gradients


def _allreduce_gradients_but_bf16_optimizer(self, *a, **k):
    """BF16_Optimizer's reduction skipped (DeepSpeedZeroOptimizer's epilogue runs from here too:
    its own reduction is switched off below)."""
    if not isinstance(self.optimizer, bf16_module.BF16_Optimizer):
        return _real_allreduce_gradients(self, *a, **k)
    return None


_real_allreduce_bucket = zero_module.DeepSpeedZeroOptimizer.allreduce_bucket
_NOT_SENT = {"x": [(zero_module.dist, "all_reduce", lambda *a, **k: None), (zero_module.dist, "reduce", lambda *a, **k: None)]}


def _unsent(fn, *a, **k):
    """fn as DeepSpeed wrote it, its all_reduce and reduce not sent: each replica keeps its own."""
    with pr.switched(_NOT_SENT, "x"):
        return fn(*a, **k)


FAULTS["dp-grad-unreduced"] = [
    (DeepSpeedEngine, "allreduce_gradients", _allreduce_gradients_but_bf16_optimizer),  # ZeRO-1, fp32 accumulation
    # DeepSpeedZeroOptimizer's gradient reduction (allreduce_bucket) with its collective never sent
    (zero_module.DeepSpeedZeroOptimizer, "allreduce_bucket", lambda self, *a, **k: _unsent(_real_allreduce_bucket, self, *a, **k)),
]
# DeepSpeed PR 5411's bug in DeepSpeedZeroOptimizer: no parameter seen as tensor-parallel, so only
# TP rank 0's gradients reach the norm; and replicated weights counted on every TP rank
FAULTS["norm-rank0-only"].append((zero_module, "is_model_parallel_parameter", lambda p: False))
FAULTS["norm-no-dedup"].append((zero_module, "is_model_parallel_parameter", lambda p: True))

# DeepSpeed 0.19.8's own order, nothing patched: step() updates the scaler before
# unscale_and_clip_grads divides by the new scale (precfuzz's model of it is this fault)
FAULTS["unscale-after-update"] = []

# the engines' kinds: ZeRO stage, gradient accumulation dtype, the optimizer deepspeed.initialize builds
ENGINES = {"zero1-fp32acc": (1, "fp32", bf16_module.BF16_Optimizer),
           "zero1": (1, None, zero_module.DeepSpeedZeroOptimizer),
           "zero2": (2, None, zero_module.DeepSpeedZeroOptimizer)}


class _Model(torch.nn.Module):
    """This TP rank's shards of the case's parameters (marked as Megatron marks them);
    forward(consts) is the loss sum(p * c), whose gradient is c exactly."""

    def __init__(self, layer, tp, tp_rank):
        super().__init__()
        self.names = [b.name for b in layer.blocks]
        for b in layer.blocks:
            p = torch.nn.Parameter(torch.from_numpy(b.shard(np.zeros((b.rows, b.cols), np.float32), tp_rank, tp)))
            if b.kind != pr.REPLICATED and tp > 1:
                p.tensor_model_parallel = True
                p.partition_dim = 1 if b.kind == pr.ROW else 0
                p.partition_stride = 1
            self.register_parameter(b.name.replace(".", "_"), p)

    def params(self):
        return {n: getattr(self, n.replace(".", "_")) for n in self.names}

    def forward(self, consts):
        ps = self.params()
        return sum((ps[n] * c).sum() for n, c in consts.items())


_engines = {}


def engine_for(layer, kind, dp, tp, fresh=False, fp32_weights=True):
    """The engine of a run of TP=tp x DP=dp on this rank: built once per kind, layout, dtype,
    scaler and shape (every rank builds every layout, so that the engine's collectives at build
    have every rank), reset per case; fresh: a new one, not kept (fp32_weights: the config's
    zero_optimization.load_from_fp32_weights)."""
    fp16 = layer.case.dtype == "fp16"
    key = ("engine", kind, dp, tp, layer.case.shape, layer.case.dtype, layer.dynamic,
           tuple((b.name, b.rows, b.cols) for b in layer.blocks))
    if key not in _engines or fresh:
        tp_rank = RANK if tp == 2 else 0
        mpu = Mpu(PAIR if tp == 2 else SINGLE[RANK], PAIR if dp == 2 else SINGLE[RANK])
        model = _Model(layer, tp, tp_rank)
        decay = [p for b, p in zip(layer.blocks, model.params().values()) if b.decay]
        no_decay = [p for b, p in zip(layer.blocks, model.params().values()) if not b.decay]
        adamw = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}])
        stage, accum, cls = ENGINES[kind]
        # fp16: a static scale ("loss_scale": S) or the dynamic scaler ("loss_scale": 0), set to
        # the case's scale and settings per case (reset_scaler)
        precision = ({"fp16": {"enabled": True, "loss_scale": 0 if layer.dynamic else layer.loss_scale}} if fp16
                     else {"bf16": {"enabled": True}})
        config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, **precision,
                  "zero_optimization": {"stage": stage, "load_from_fp32_weights": fp32_weights},
                  "gradient_clipping": 1.0,
                  "zero_allow_untested_optimizer": True, "steps_per_print": 10 ** 9, "wall_clock_breakdown": False}
        if accum:
            config["data_types"] = {"grad_accum_dtype": accum}
        eng, opt, _, _ = deepspeed.initialize(model=model, optimizer=adamw, config=config, mpu=mpu)
        assert type(opt) is cls, type(opt)
        if fresh:
            return eng, opt, model, mpu, shard_index(layer, tp, tp_rank)
        _engines[key] = (eng, opt, model, mpu, shard_index(layer, tp, tp_rank))
    return _engines[key]


def _reset_zero(opt, layer):
    """A DeepSpeedZeroOptimizer as at the case's start: no Adam state, the case's hyperparameters
    and loss scaler (its gradient buffers are empty after every step)."""
    opt.optimizer.state.clear()
    opt._hp_optimizer_states_linked = False
    _hyperparameters(opt, layer)
    if layer.case.dtype == "fp16":
        reset_scaler(opt.loss_scaler, layer)


def reset_scaler(scaler, layer):
    """DeepSpeed's loss scaler as a fresh one of the case's settings: the scale S; for the
    DynamicLossScaler (scaler=1) scale_window = growth_interval, delayed_shift = hysteresis,
    min_scale = min_loss_scale and its trackers at their start."""
    scaler.cur_scale = layer.loss_scale
    if layer.dynamic:
        scaler.scale_window, scaler.delayed_shift = layer.growth_interval, layer.hysteresis
        scaler.min_scale = layer.min_loss_scale
        scaler.cur_hysteresis, scaler.cur_iter, scaler.last_overflow_iter = scaler.delayed_shift, 0, -1


def run_engine(layer, case, init, grads, kind, dp, tp):
    """One run of the case's steps through the engine at TP=tp x DP=dp: ({block name: (steps, 4,
    *shard shape)} of master, parameter, m, v after each step, NaN where the other replica's
    partition holds the master, m and v; [the norm each step reported])."""
    eng, opt, model, mpu, index = engine_for(layer, kind, dp, tp)
    per = layer.mb // dp

    def setup(eng, mpu):
        ds_groups.mpu = mpu  # shim: the engine's module-global groups are the running engine's
        eng.communication_data_type = torch.bfloat16 if layer.comm else torch.float32
        eng.set_train_batch_size(per * dp)  # gradient_accumulation_steps = this replica's micro-batches
        eng.micro_steps = 0  # as a fresh engine: the boundary is every per-th micro-step from here

    setup(eng, mpu)
    params = model.params()
    replica = RANK if dp == 2 else 0
    masters = _zero_layout(opt)[1]
    # this rank's partition of each group's flat buffer, and each parameter's place in it
    parts = [(replica * m.numel(), (replica + 1) * m.numel()) for m in masters]
    where = flat_offsets(opt)
    locate = {n: where[p][:2] for n, p in params.items()}  # block name -> (group, offset in the flat buffer)
    init_a = np.asarray(init, dtype=np.float32)
    for name, p in params.items():
        i, o = locate[name]
        a, z = parts[i]
        lo, hi = max(o, a), min(o + p.numel(), z)
        if lo < hi:
            masters[i].data[lo - a:hi - a].copy_(torch.from_numpy(init_a[index[name][lo - o:hi - o].numpy()]))
    if isinstance(opt, bf16_module.BF16_Optimizer):
        reset(opt, layer)
    else:
        _reset_zero(opt, layer)
    opt.update_lp_params()  # the bf16 parameters from the masters, all-gathered
    g_all = torch.from_numpy(np.asarray(grads, dtype=np.float32).reshape(layer.steps, layer.mb, -1))
    # the engine averages over the replicas: each replica's loss times dp, so that the reduced
    # gradient is the micro-batches' sum, as the case's is. bf16: the constants rounded to bf16
    # (the gradient fl(dp g)); fp16: fp32 constants (dp g exact), so that the scaled loss's
    # gradient reaches the fp16 parameter as fl16(S dp g), rounded once
    consts = g_all * float(dp)
    if layer.case.dtype != "fp16":
        consts = consts.to(torch.bfloat16)
    hist = {n: np.full((layer.steps, 4) + tuple(p.shape), np.nan, np.float32) for n, p in params.items()}
    state = np.zeros((layer.steps, 5))
    norms = []

    def record(s, opt, model):
        params, masters = model.params(), _zero_layout(opt)[1]
        for name, p in params.items():
            i, o = locate[name]
            a, z = parts[i]
            h = hist[name][s]
            h[1] = p.detach().float().numpy()
            lo, hi = max(o, a), min(o + p.numel(), z)
            if lo < hi:
                # no Adam state before the first step taken: m and v are zeros
                st = opt.optimizer.state.get(masters[i]) or {"exp_avg": torch.zeros_like(masters[i]),
                                                              "exp_avg_sq": torch.zeros_like(masters[i])}
                for q, v in ((0, masters[i]), (2, st["exp_avg"]), (3, st["exp_avg_sq"])):
                    h[q].reshape(-1)[lo - o:hi - o] = v.detach()[lo - a:hi - a].numpy()
        state[s] = 0
        state[s, 0] = float(opt.optimizer.state.get(masters[0], {}).get("step", 0))
        sc = getattr(opt, "loss_scaler", None)
        if layer.case.dtype == "fp16" and sc is not None:  # DeepSpeed's scaler: no growth tracker, its window
            state[s, 1] = sc.cur_scale
            if layer.dynamic:
                state[s, 2] = sc.cur_iter - sc.last_overflow_iter - 1  # steps since the last overflow
                state[s, 3], state[s, 4] = sc.cur_hysteresis, sc.cur_iter

    def train(steps, eng, opt, model):
        params = model.params()
        for s in steps:
            for k in layer.micro_batches(replica, dp):
                c = {n: consts[s, k, index[n]].view(p.shape) for n, p in params.items()}
                # the micro-batches summed, not averaged: scale_wrt_gas=False, on a loss that is not
                # the forward's own output tensor (on that one, 0.19.8's output hook divides the
                # gradient by gradient_accumulation_steps anyway); times 1 is exact
                eng.backward(eng(c) * 1.0, scale_wrt_gas=False)
                eng.step()
            # a skipped step (fp16 overflow) reports inf: precfuzz's mark for it is -1
            norms.append(-1.0 if getattr(opt, "overflow", False) else float(opt._global_grad_norm))
            record(s, opt, model)

    with pr.switched(FAULTS, case.fault):
        train(range(layer.resume or layer.steps), eng, opt, model)
        if layer.resume:  # the engine's own save_checkpoint and load_checkpoint, into a fresh engine
            with pr.checkpoint_dir(PAIR) as path:
                eng.save_checkpoint(path, tag="precfuzz", save_latest=False)
                pr.poison(state_tensors(model.parameters(), opt))
                eng, opt, model, mpu, index = engine_for(layer, kind, dp, tp, fresh=True,
                                                         fp32_weights=case.fault != "ckpt-master-from-param")
                setup(eng, mpu)
                _hyperparameters(opt, layer)  # as the user's code builds it: the case's settings
                if layer.case.dtype == "fp16":
                    reset_scaler(opt.loss_scaler, layer)
                eng.load_checkpoint(path, tag="precfuzz")
                if case.fault == "ckpt-scale-reset":  # the scaler made anew after the load
                    reset_scaler(opt.loss_scaler, layer)
            record(layer.resume - 1, opt, model)
            train(range(layer.resume, layer.steps), eng, opt, model)
    return hist, norms, state


def _merge_replicas(two):
    """Each replica holds the masters, m and v of its partition: fill each one's gaps (NaN) from
    the other's (the bf16 parameters, all-gathered, stay each replica's own)."""
    for d, (hist, *_) in enumerate(two):
        other = two[1 - d][0]
        for name, h in hist.items():
            gap = np.isnan(h[:, [0, 2, 3]])
            h[:, [0, 2, 3]] = np.where(gap, other[name][:, [0, 2, 3]], h[:, [0, 2, 3]])
    return two


def _engine_variant(name, like, kind, tp, dp, faults, summary, dtype="bf16"):
    """A variant running the engine of that kind as TP=1 x DP=1 on each rank against TP=tp x DP=dp
    on both (tp x dp = 2)."""

    faults = faults + ["ckpt-master-from-param"] + (["ckpt-scale-reset"] if dtype == "fp16" else [])

    @pr.kernel("tp_diff", variant=name, like=like, dtypes=[dtype], faults=faults, summary=summary,
               params={"tied": [0, 0], "tp": [tp, tp], "dp": [dp, dp], "experts": [0, 0], "resume_at": [0, 1e6]})
    def step(case, init, grads, gscale):
        layer = pr.TPLayer(case)
        plain = pr.TPLayer(case)
        plain.resume = 0
        out = {"one": run_engine(plain, case, init, grads, kind, 1, 1),
               "two": run_engine(layer, case, init, grads, kind, dp, tp)}
        if layer.resume:  # the same run straight beside the round trip
            out["straight"] = run_engine(plain, case, init, grads, kind, dp, tp)
        return out

    def second(results, key):
        if dp == 2:
            return {(d, 0, 0): v for d, v in enumerate(_merge_replicas([res[key] for res in results]))}
        return {(0, 0, r): res[key] for r, res in enumerate(results)}

    @step.combine
    def outputs(case, results):
        layer = pr.TPLayer(case)
        return layer.tp_outputs([{(0, 0, 0): results[0]["one"]}, second(results, "two")],
                                second(results, "straight") if layer.resume else None)

    return step


_ENGINE = "DeepSpeed 0.19.8 engine (deepspeed.initialize), torch AdamW, on 2 gloo ranks"
_engine_variant("deepspeed-zero1-bf16", "deepspeed", "zero1-fp32acc", 1, 2, ["dp-grad-unreduced", "norm-shard-only"],
                f"{_ENGINE}: ZeRO stage 1, bf16 with fp32 gradient accumulation (BF16_Optimizer); DP=1 against DP=2")
_ENGINE_ZERO = "bf16 with bf16 gradient accumulation (DeepSpeedZeroOptimizer)"
_engine_variant("deepspeed-zero2-bf16", "deepspeed-zero2", "zero2", 1, 2, ["dp-grad-unreduced"],
                f"{_ENGINE}: ZeRO stage 2, {_ENGINE_ZERO}; DP=1 against DP=2")
_engine_variant("deepspeed-zero2-tp-bf16", "deepspeed-zero2", "zero2", 2, 1, ["norm-rank0-only", "norm-no-dedup"],
                f"{_ENGINE}: ZeRO stage 2, {_ENGINE_ZERO}; TP=1 against TP=2")
_engine_variant("deepspeed-zero1-bf16acc", "deepspeed-zero1", "zero1", 1, 2, ["dp-grad-unreduced"],
                f"{_ENGINE}: ZeRO stage 1, {_ENGINE_ZERO}; DP=1 against DP=2")
_ENGINE_FP16 = "fp16, fp16 accumulation, static or dynamic (scaler=1) loss scale"
_engine_variant("deepspeed-zero2-fp16", "deepspeed-zero2", "zero2", 1, 2, ["dp-grad-unreduced", "unscale-after-update"],
                f"{_ENGINE}: ZeRO stage 2, {_ENGINE_FP16}; DP=1 against DP=2", dtype="fp16")
_engine_variant("deepspeed-zero1-fp16", "deepspeed-zero1", "zero1", 1, 2, ["dp-grad-unreduced", "unscale-after-update"],
                f"{_ENGINE}: ZeRO stage 1, {_ENGINE_FP16}; DP=1 against DP=2", dtype="fp16")
_engine_variant("deepspeed-zero2-tp-fp16", "deepspeed-zero2", "zero2", 2, 1, ["norm-rank0-only", "norm-no-dedup",
                "unscale-after-update"], f"{_ENGINE}: ZeRO stage 2, {_ENGINE_FP16}; TP=1 against TP=2", dtype="fp16")


if __name__ == "__main__":
    sys.exit(pr.serve())
