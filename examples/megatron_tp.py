"""Megatron-core's own data-parallel wrapper and mixed-precision optimizers under precfuzz's
differential, on 2 or 4 real ranks.

    K='ranks:2:.venv/bin/python examples/megatron_tp.py'
    precfuzz --kernels "$K" diff-tp -v megatron-core-bf16 --param tied=0        # TP=1 against TP=2
    precfuzz --kernels "$K" diff-tp -v megatron-core-distopt-bf16 --param tied=0 \
        --param tp=1 --param dp=2                                # against TP=1 x DP=2, ZeRO-1 style
    ... --fault norm-bf16                      # torchtitan PR 4135: the total norm summed in bf16
    ... --param tp=1 --param dp=2 --param experts=2 --fault expert-norm-dropped   # EP=2: experts out of the norm
    precfuzz --kernels ranks:4:".venv/bin/python examples/megatron_tp.py" \
        diff-tp -v megatron-core-bf16 --fault tied-grad-unreduced   # seed 004: PP=2, tied embedding

Every case runs the case's transformer layer twice: as TP=1 on rank 0 alone (TP=1 x PP=2 on
ranks 0 and 1 when the embedding is tied) and as the case's second layout, TP=tp x DP=dp (x
PP=2 when tied; rank = (dp PP + pp) TP + tp): on 2 ranks TP=2 or TP=1 x DP=2, on 4 also TP=2 x
DP=2, TP=2 x PP=2 and TP=1 x PP=2 x DP=2. Each rank's parameters (Megatron's column-, row- and
vocab-parallel splits, marked as megatron's layers mark them) form a model chunk wrapped in
megatron-core 0.16.1's own DistributedDataParallel (fp32 gradient buffer, no overlap,
calculate_per_token_loss: the replicas' gradients are summed), and the optimizer is the one
get_megatron_optimizer builds, given the layout's process groups as a ProcessGroupCollection
(torch.optim.AdamW inside, megatron-core's local multi-tensor norm and scale: neither
Transformer Engine nor apex is installed):
  megatron-core-bf16          Float16OptimizerWithFloat16Params
  megatron-core-distopt-bf16  DistributedOptimizer: gradients reduce-scattered, fp32 masters and
                              Adam state sharded over the replicas, bf16 parameters all-gathered
Each step: zero_grad_buffer, every micro-batch of this replica's share added to main_grad (what
DDP's backward hook does), finish_grad_sync (the data-parallel all-reduce or reduce-scatter),
finalize_model_grads._allreduce_word_embedding_grads when tied (the last stage holds the LM
head: the embedding's copy, marked shared as megatron's output layer is; both stages mark it
shared_embedding, as LanguageModule does), step(). Every rank's master, parameter, m and v after
every step come back (a distributed optimizer's masters, m and v from the replica that holds
them); precfuzz checks them against the contract tp_diff/megatron-core; the norm step()
returns (binary64) is reported rounded to fp32, and a skipped step's as -1.

fp16 (megatron-core-fp16, -distopt-fp16): the micro-batch gradients come in as fl16(S g), S the
grad scaler's scale of the step: a ConstantGradScaler at the case's loss_scale, or with
--param scaler=1 a DynamicGradScaler (growth_interval, hysteresis, min_loss_scale from the case,
its trackers reset per case): a step whose gradients overflow is skipped by megatron itself.

With --param experts=2 the layer has two experts (exp0, exp1: an fc1 and an fc2 weight each,
marked allreduce=False as megatron's expert layers mark them), so get_megatron_optimizer builds
a ChainedOptimizer of a dense and an expert optimizer. With dp=2 the second layout is
expert-parallel (EP=2 over the replicas: expert e on replica e; the expert-data-parallel group
is then the rank alone and the expert norm's group TP x EP x PP): in micro-batch slot i an
expert gets both replicas' tokens, micro-batches i and i + mb/2, their gradients summed and
rounded to the dtype once, as its backward GEMM would leave them. ChainedOptimizer pools the two
optimizers' gradients into one norm where both reduce over the same group (EP=1, and the
distributed optimizer), and combines their two norms in binary64 where not (EP=2).

Checkpoints (docs/checkpoint.md), through dist_checkpointing as Megatron-LM's save_checkpoint and
load_checkpoint use it: --param resume_at=K saves the second layout after step K and loads it
into fresh objects beside the same run straight (bit for bit); --param reshard_at=K (the
Float16Optimizer's variants) saves each run at its layout and loads it at the other (the set).

The device shim, and nothing else (no arithmetic): megatron-core makes its scalars and buffers
with device='cuda' or torch.cuda.current_device() (clip_grads.py, utils.py, optimizer.py,
param_and_grad_buffer.py, distributed_data_parallel.py, distrib_optimizer.py): those modules see
a torch whose tensor(), zeros() and empty() put them on the CPU and whose current device is the
CPU; it checks param.type() against 'torch.cuda.BFloat16Tensor' and 'torch.cuda.FloatTensor':
Tensor.type() with no argument answers a CPU tensor's type with its CUDA name; and while one
run's ranks build their optimizer, get_megatron_optimizer's world is that run's ranks (it gathers
the parameter groups' keys over the world; both runs live in one process group).

Fault switches (precfuzz --fault NAME), each a monkeypatch of megatron-core's code, or of the
model as a user might write it, for the case:
  tied-grad-unreduced  seed 004 (BLOOM-176B: "tied weights weren't getting reduced"):
                       _allreduce_word_embedding_grads does nothing; each stage's copy of the
                       tied embedding steps on its own half of the gradient (4 ranks, tied=1)
  norm-no-dedup        param_is_not_tensor_parallel_duplicate always true: every TP rank counts
                       the replicated weights (Transformer Engine ROCm PR 715's effect)
  norm-not-allreduced  the optimizer's grad_stats_parallel_group is the rank's own: each rank
                       clips by its own norm
  norm-bf16            the total norm taken over bf16 copies of the gradients (torchtitan PR
                       4135: a norm computed in bf16 depends on the split)
  dp-grad-unreduced    DistributedDataParallel.finish_grad_sync does nothing: each replica steps
                       on its own micro-batches (dp=2)
  norm-shard-only      megatron-core-distopt-bf16: the norm reduced over the model-parallel group
                       only, so each replica clips its shard by that shard's norm (gradients
                       left out of the norm: Megatron-LM PR 5916's, DeepSpeed PR 5411's class);
                       the replicas stay bitwise equal, the norm is wrong (dp=2)
  expert-norm-dropped  experts=2: ChainedOptimizer.get_grad_norm returns the dense optimizer's
                       norm alone, the experts left out of the norm that clips them (Megatron-LM
                       PR 5916, DeepSpeed PR 8613)
  expert-norm-averaged experts=2, EP=2, megatron-core-bf16: the experts' norm averaged over the
                       expert-parallel group instead of summed (DeepSpeed PR 5259's bug)
  expert-norm-local    experts=2, EP=2: the expert optimizer's norm reduced over the model-parallel
                       group only: each replica clips by its own experts' norm
  embedding-unmarked   megatron-core-distopt-bf16: the first stage's word embedding not marked
                       shared_embedding, so the stages shard the tied weight differently and the
                       tied all-reduce adds a reduced shard to an unreduced one (4 ranks, tied=1,
                       tp=1, dp=2)
"""
# precfuzz-target: kernel=tp_diff start=ranks:4 needs=frameworks cases=4 variants=megatron-core-bf16,megatron-core-distopt-bf16,megatron-core-fp16,megatron-core-distopt-fp16

import contextlib
import logging
import os
import queue
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
    import megatron.core.distributed.param_and_grad_buffer as grad_buffer  # noqa: E402
    import megatron.core.distributed.distributed_data_parallel as ddp_module  # noqa: E402
    import megatron.core.optimizer.distrib_optimizer as distrib_optimizer  # noqa: E402
    import megatron.core.optimizer.grad_scaler as grad_scaler  # noqa: E402
    mcore_optimizer_init = sys.modules["megatron.core.optimizer"]
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig  # noqa: E402
    from megatron.core.optimizer import get_megatron_optimizer  # noqa: E402
    from megatron.core.optimizer.optimizer_config import OptimizerConfig  # noqa: E402
    from megatron.core.process_groups_config import ProcessGroupCollection  # noqa: E402
    from megatron.core.transformer import TransformerConfig  # noqa: E402
    from megatron.core.transformer.module import MegatronModule  # noqa: E402
    from megatron.core import dist_checkpointing  # noqa: E402
    import megatron.core.dist_checkpointing.strategies.filesystem_async as ckpt_writer  # noqa: E402
    import megatron.core.dist_checkpointing.strategies.state_dict_saver as ckpt_saver  # noqa: E402
    import megatron.core.dist_checkpointing.strategies.async_utils as ckpt_async  # noqa: E402
    from megatron.core.transformer.utils import make_sharded_tensors_for_checkpoint  # noqa: E402
    from megatron.core.utils import make_tp_sharded_tensor_for_checkpoint  # noqa: E402

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

    def empty(self, *a, **kw):
        return torch.empty(*a, **self._cpu(kw))

    class cuda:  # noqa: N801  (torch.cuda as those modules see it: the current device is the CPU)
        def __getattr__(self, name):
            return getattr(torch.cuda, name)

        @staticmethod
        def current_device():
            return "cpu"

        @staticmethod
        def synchronize(*a, **k):  # the checkpoint writer's wait for device copies: none on the CPU
            return None

    cuda = cuda()


for _module in (clip_grads, mcore_optimizer, mcore_utils, grad_buffer, ddp_module, distrib_optimizer, grad_scaler,
                ckpt_writer, ckpt_saver, ckpt_async):
    _module.torch = _TorchOnCpu()

# dist_checkpointing's writer hands its results to the saving process through a queue of a Manager
# it starts by "spawn", which imports this script again (as __mp_main__: it would join the rank
# group). The saves here are synchronous (dist_checkpointing.save: the writer runs in the saving
# process, its forked writers report through a queue of their own), so a thread queue serves: its
# put is done when it returns (a multiprocessing queue's is not, and the writer reads it at once)
_write_results = queue.Queue()


def _write_results_queue():
    return _write_results


ckpt_writer._get_write_results_queue = _write_results_queue
# dist_checkpointing's torch_dist loader calls torch.distributed.checkpoint.load_state_dict, which
# torch 2.15 marks deprecated: said once per load on every rank, it is megatron-core's to change
warnings.filterwarnings("ignore", message="`load_state_dict` is deprecated", category=FutureWarning)

_real_type = torch.Tensor.type


def _type_as_cuda(self, dtype=None, non_blocking=False, **kw):
    if dtype is None and not kw:
        name = _real_type(self)
        return name.replace("torch.", "torch.cuda.", 1) if not name.startswith("torch.cuda.") else name
    return _real_type(self, dtype, non_blocking, **kw)


torch.Tensor.type = _type_as_cuda
_real_cuda = torch.Tensor.cuda


def _cuda_on_cpu(self, device=None, *a, **kw):
    """Tensor.cuda(torch.cuda.current_device()), the current device being the CPU (the shim
    above): the tensor where it is (DynamicGradScaler.load_state_dict moves its scale so)."""
    if device == "cpu":
        return self
    return _real_cuda(self, device, *a, **kw)


torch.Tensor.cuda = _cuda_on_cpu

# every rank makes every group, in the same order (torch.distributed's rule): those of every
# layout below (rank = (dp PP + pp) TP + tp)
_LISTS = [[r] for r in range(WORLD)] + [[0, 1]] + ([[2, 3], [0, 2], [1, 3], [0, 1, 2, 3]] if WORLD == 4 else [])
GROUPS = {tuple(ranks): dist.new_group(ranks) for ranks in _LISTS}


class _Layout:
    """This rank's part in a run of TP x PP x DP: its coordinates and Megatron's process groups."""

    def __init__(self, tp, pp, dp, ep=1):
        self.tp, self.pp, self.dp, self.ep = tp, pp, dp, ep
        self.size = tp * pp * dp
        if self.size > WORLD:
            raise ValueError(f"TP={tp} x PP={pp} x DP={dp} needs {self.size} ranks, the group has {WORLD}")
        r = RANK
        self.d, self.stage, self.t = r // (tp * pp), r // tp % pp, r % tp

        def g(ranks):
            return GROUPS[tuple(sorted(ranks))]

        at = lambda d, p, t: (d * pp + p) * tp + t  # noqa: E731
        self.tp_group = g([at(self.d, self.stage, t) for t in range(tp)])
        self.pp_group = g([at(self.d, p, self.t) for p in range(pp)])
        self.dp_group = g([at(d, self.stage, self.t) for d in range(dp)])
        self.mp_group = g([at(self.d, p, t) for p in range(pp) for t in range(tp)])
        self.all_group = g(range(self.size))
        self.single = GROUPS[(RANK,)]
        # experts (EP = 1 or DP): the expert-parallel group spans the replicas, each expert's
        # data-parallel group is then the rank alone, and its norm group is TP x EP x PP
        self.ep_group = self.dp_group if ep > 1 else self.single
        self.expt_dp_group = self.single if ep > 1 else self.dp_group
        self.tp_ep_pp_group = g([at(d, p, t) for d in range(dp) for p in range(pp) for t in range(tp)]) if ep > 1 \
            else self.mp_group

    def holds(self):
        return RANK < self.size

    def collection(self):
        """Megatron's ProcessGroupCollection for this rank (what parallel_state would give)."""
        return ProcessGroupCollection(
            tp=self.tp_group, pp=self.pp_group, cp=self.single, dp=self.dp_group, dp_cp=self.dp_group,
            intra_dp_cp=self.dp_group, expt_dp=self.expt_dp_group, intra_expt_dp=self.expt_dp_group, ep=self.ep_group,
            tp_ep_pp=self.tp_ep_pp_group, mp=self.mp_group, tp_cp=self.tp_group, tp_dp_cp=self.all_group,
            intra_dist_opt=self.all_group, embd=self.pp_group if self.pp > 1 else None, pos_embd=None,
            expt_tp=self.tp_group)


class _Distributed:
    """torch.distributed as get_megatron_optimizer sees it while one run's ranks build their
    optimizer: its world is the run (it gathers the parameter-group keys over the world)."""

    group = None

    def __getattr__(self, name):
        return getattr(dist, name)

    def get_world_size(self, group=None):
        return dist.get_world_size(group or self.group)

    def all_gather_object(self, out, obj, group=None):
        return dist.all_gather_object(out, obj, group=group or self.group)


class _TorchForOptimizerBuild(_TorchOnCpu):
    distributed = _Distributed()


mcore_optimizer_init.torch = _TorchForOptimizerBuild()


class _Layer(MegatronModule):
    """The case's parameters (those of one pipeline stage) as a model chunk: what megatron's
    DistributedDataParallel wraps and finalize_model_grads asks of a chunk that shares its
    embedding and output weights."""

    def __init__(self, config, params, stage, at):
        super().__init__(config)
        self.names = list(params)
        self.tp_group, self.dp_group, self.expt_dp_group = at.tp_group, at.dp_group, at.expt_dp_group
        self.experts = set()  # the experts' registered names
        self.axes = {}  # registered name -> the axis TP splits it along (megatron's partition_dim)
        for name, p in params.items():  # names as megatron's: a bias ends in ".bias" (no weight decay)
            key = name.replace(".w", "_weight").replace(".b", ".bias").replace(".", "_")
            self.register_parameter(key, p)
            if name.startswith("exp"):
                self.experts.add(key)
            if getattr(p, "tensor_model_parallel", False):
                self.axes[key] = p.partition_dim
        self.pre_process = stage == 0
        self.post_process = True
        self.share_embeddings_and_output_weights = True
        # in a list, not an attribute: a Parameter attribute is registered a second time, under its
        # own key, which dist_checkpointing would save as a replicated tensor: one TP rank's shard
        self._shared = [params["embed.w"]]

    def shared_embedding_or_output_weight(self):
        return self._shared[0]

    def sharded_state_dict(self, prefix="", sharded_offsets=(), metadata=None):
        """The parameters as dist_checkpointing's ShardedTensors, the TP-split ones along their
        axis, as megatron's parallel layers give theirs (make_sharded_tensors_for_checkpoint with
        the axis map); this layout's groups, not parallel_state's."""
        sd = {}
        self._save_to_state_dict(sd, "", keep_vars=True)
        dense = {k: v for k, v in sd.items() if k not in self.experts}
        out = make_sharded_tensors_for_checkpoint(dense, prefix, self.axes, sharded_offsets, tp_group=self.tp_group,
                                                  dp_cp_group=self.dp_group)
        # an expert's copies are over its own data-parallel group (under EP=2 the rank alone: the
        # one replica that holds it saves it), as megatron's expert layers count their replicas
        out.update(make_sharded_tensors_for_checkpoint({k: v for k, v in sd.items() if k in self.experts}, prefix,
                                                       self.axes, sharded_offsets, tp_group=self.tp_group,
                                                       dp_cp_group=self.expt_dp_group))
        if not self.pre_process:  # the last stage's LM head: the tied embedding's copy, as
            # LanguageModule.tie_embeddings_and_output_weights_state_dict saves it: under the first
            # stage's key, replica 1 (not written; loaded from the first stage's)
            key = f"{prefix}embed_weight"
            out[key] = make_tp_sharded_tensor_for_checkpoint(
                self._shared[0], key, 0, replica_id=(1, 0, self.dp_group.rank()), allow_shape_mismatch=True,
                tp_group=self.tp_group, dp_cp_group=self.dp_group)
        return out


# --- fault switches --------------------------------------------------------------------------------

def _norm_in_bf16(grads_for_norm, norm_type=2, grad_stats_parallel_group=None):
    return _real_norm([g.to(torch.bfloat16) for g in grads_for_norm], norm_type, grad_stats_parallel_group)


_real_norm = clip_grads.get_grad_norm_fp32
_real_chained_norm = mcore_optimizer.ChainedOptimizer.get_grad_norm


def _expert_norm_averaged(self):
    """The experts' norm averaged over the expert-parallel group instead of summed (DeepSpeed PR
    5259's bug in Megatron's terms): its square divided by EP (2) before it joins the dense one."""
    if len(self.chained_optimizers) == 1 or self.grads_states_parallel_group_is_shared():
        return _real_chained_norm(self)
    dense, expert = (o.get_grad_norm() or 0.0 for o in self.chained_optimizers)
    return (dense * dense + expert * expert / 2) ** 0.5


_real_distopt_load = distrib_optimizer.DistributedOptimizer.load_state_dict


def _load_with_own_steps(self, state_dict):
    """DistributedOptimizer.load_state_dict, then each parameter's Adam step count a tensor of its
    own at the checkpoint's step. Without apex or Transformer Engine, 0.16.1's load_state_dict
    gives every parameter's state one step tensor (torch's AdamW then adds 1 to it once per
    parameter each step), and load_parameter_state_from_dp_reshardable copies into it the step
    of the placeholder state a fresh optimizer is given before the load."""
    _real_distopt_load(self, state_dict)
    step = state_dict["optimizer"]["param_groups"][0]["step"]
    for st in self.optimizer.state.values():
        st["step"] = torch.tensor(float(step), dtype=torch.float32)


FAULTS = {
    "norm-no-dedup": [(tensor_parallel, "param_is_not_tensor_parallel_duplicate", lambda p, tp_group=None: True)],
    "norm-not-allreduced": [],  # the group is set per optimizer (run below)
    "norm-bf16": [(mcore_optimizer, "get_grad_norm_fp32", _norm_in_bf16)],
    # seed 004: the tied embedding's two stages not summed (each stage steps on its own gradient)
    "tied-grad-unreduced": [(finalize_model_grads, "_allreduce_word_embedding_grads", lambda *a, **k: None)],
    # data parallelism: the replicas' gradients never reduced (each steps on its own micro-batches)
    "dp-grad-unreduced": [(DistributedDataParallel, "finish_grad_sync", lambda self, *a, **k: None)],
    # the distributed optimizer's norm reduced over the model-parallel group only: each replica
    # clips its shard by the norm of its shard (Megatron PR 5916's and DeepSpeed PR 5411's class:
    # gradients left out of the norm; every replica then holds the same, wrong parameters)
    "norm-shard-only": [],  # the group is set per optimizer (run below)
    # a model that does not mark its first stage's word embedding shared_embedding (megatron's
    # LanguageModule does): with the distributed optimizer the two stages shard the tied weight
    # differently, and the tied all-reduce adds a reduced shard to an unreduced one
    "embedding-unmarked": [],  # the optimizer is built without the mark (optimizer_for)
    # experts (experts=2; EP=2 with dp=2): left out of the total norm (Megatron-LM PR 5916,
    # DeepSpeed PR 8613: the norm that clips the experts misses them)
    "expert-norm-dropped": [(mcore_optimizer.ChainedOptimizer, "get_grad_norm",
                             lambda self: self.chained_optimizers[0].get_grad_norm())],
    "expert-norm-averaged": [(mcore_optimizer.ChainedOptimizer, "get_grad_norm", _expert_norm_averaged)],
    # the experts' norm reduced over the model-parallel group, not over the expert-parallel one:
    # each replica clips by its own experts' norm
    "expert-norm-local": [],  # the group is set per optimizer (run)
    # the round trip's (run): the main params rebuilt from the model's low-precision ones after
    # the load (reload_model_params, Megatron-LM's path when the optimizer state is not loaded);
    # fp16: the grad scaler set back to its start after the load
    "ckpt-master-from-param": [],
    "ckpt-scale-reset": [],
    "ckpt-last-stage-init": [],  # seed 004 (4 ranks, tied=1): the last stage's copy at its start
    # not a fault: megatron-core 0.16.1's DistributedOptimizer, with torch's AdamW (no Transformer
    # Engine, no apex), loads Adam's step count wrong (below); this patches it, so that the rest
    # of its round trip can be checked bit for bit
    "distopt-step-patched": [(distrib_optimizer.DistributedOptimizer, "load_state_dict", _load_with_own_steps)],
}


# --- the model and its optimizer -----------------------------------------------------------------

_built = {}


def _refuse_empty_bucket(inners, at):
    """Refuses, on every rank alike, a save that megatron-core's distributed
    optimizer cannot make: a bucket padded to a multiple of lcm(DP, 128) elements can leave a DP
    rank's shard of it with no parameter at all (a model this small only: the last stage's bucket
    of a tied embedding), and sharded_param_state_dp_reshardable then asserts 'empty bucket
    encountered' on that rank alone while the others wait in the save's collectives."""
    mine = []  # every rank of the world takes part (one that holds no part of the layout: none)
    for inner in inners or []:
        for g, maps in enumerate(inner.gbuf_ranges):
            for per_bucket in maps.values():
                for b, bucket in enumerate(per_bucket):
                    if not bucket["param_map"]:
                        buf = inner.buffers[g].buckets[b]
                        mine.append((buf.numel_unpadded, buf.grad_data.numel()))
    every = [None] * WORLD
    torch.distributed.all_gather_object(every, (at.d, at.stage, mine))
    for d, stage, empty in every:
        if empty:
            unpadded, padded = empty[0]
            raise ValueError(f"resume_at: stage {stage}'s bucket of {unpadded} elements, padded to {padded} for "
                             f"DP={at.dp}, gives DP rank {d} no parameter: megatron-core's distributed optimizer "
                             f"asserts 'empty bucket encountered' saving it, on that rank alone")


def _inners(opt):
    """The optimizers get_megatron_optimizer made: the dense one, then the experts' if any."""
    return list(getattr(opt, "chained_optimizers", [opt]))


def optimizer_for(layer, at, distopt, unmarked=False, fresh=False):
    """(model parameters by block, the DDP-wrapped chunk, the optimizer) of this rank in layout
    `at` (stage 1 holds the LM head: the tied embedding alone): built once per layout, reset per
    case (fresh: new ones, not kept). unmarked: the fault embedding-unmarked."""
    dynamic = layer.dynamic
    # the blocks too: the shape alone does not say how many layers (a model built for one layer
    # reused for a case of two named its parameters wrongly)
    key = (at.tp, at.pp, at.dp, at.ep, layer.experts, distopt, unmarked, dynamic, layer.case.dtype, layer.case.shape,
           tuple((b.name, b.rows, b.cols) for b in layer.blocks))
    fp16 = layer.case.dtype == "fp16"
    dtype = torch.float16 if fp16 else torch.bfloat16
    if key not in _built or fresh:
        params = {}
        for b in layer.blocks if at.stage == 0 else layer.blocks[-1:]:
            if b.expert is not None and at.ep > 1 and b.expert != at.d:  # EP: expert e on replica e
                continue
            shard = b.shard(np.zeros((b.rows, b.cols), np.float32), at.t, at.tp)
            p = torch.nn.Parameter(torch.zeros(shard.shape, dtype=dtype))
            split = b.kind != pr.REPLICATED and at.tp > 1
            tensor_parallel.set_tensor_model_parallel_attributes(p, split, (1 if b.kind == pr.ROW else 0) if split else -1, 1)
            if b.expert is not None:  # as megatron's expert layers mark their weights: no DP all-reduce
                p.allreduce = False
            if at.stage == 1:  # the output layer's weight on the last stage, as megatron marks it
                p.shared = True
                p.shared_embedding = True
            elif b.name == "embed.w" and at.pp > 1 and not unmarked:  # the first stage's word
                p.shared_embedding = True  # embedding, likewise (LanguageModule.setup_embeddings_and_output_layer)
            params[b.name] = p
        config = TransformerConfig(num_layers=1, hidden_size=layer.case.shape[1], num_attention_heads=1, bf16=not fp16,
                                   fp16=fp16, params_dtype=dtype, use_cpu_initialization=True,
                                   calculate_per_token_loss=True)  # the replicas' gradients SUM all-reduced
        ddp_config = DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=False,
                                                   use_distributed_optimizer=distopt)
        pgc = at.collection()
        chunk = DistributedDataParallel(config, ddp_config, _Layer(config, params, at.stage, at), pg_collection=pgc)
        # fp16: a ConstantGradScaler (config.loss_scale), or with scaler=1 a DynamicGradScaler
        # (no config.loss_scale), set to the case's scale and trackers per case
        oconfig = OptimizerConfig(optimizer="adam", bf16=not fp16, fp16=fp16,
                                  loss_scale=1.0 if fp16 and not dynamic else None,
                                  clip_grad=1.0, lr=1e-3, weight_decay=0.0,
                                  use_distributed_optimizer=distopt, log_num_zeros_in_grad=False)
        _Distributed.group = at.all_group
        try:
            opt = get_megatron_optimizer(oconfig, [chunk], use_gloo_process_groups=False, pg_collection=pgc)
        finally:
            _Distributed.group = None
        inners = _inners(opt)
        # each optimizer's norm group as built (the faults change it per case)
        built = (params, chunk, opt, inners, [i.grad_stats_parallel_group for i in inners])
        if fresh:
            return built
        _built[key] = built
    return _built[key]


def reset_scaler(scaler, layer):
    """The case's loss scale; a DynamicGradScaler's trackers and settings as new."""
    scaler._scale = torch.tensor([layer.loss_scale], dtype=torch.float)
    if layer.dynamic:
        scaler.growth_interval, scaler.hysteresis = layer.growth_interval, layer.hysteresis
        scaler.min_scale = torch.tensor([layer.min_loss_scale], dtype=torch.float)
        scaler._growth_tracker, scaler._hysteresis_tracker = 0, scaler.hysteresis


class _HoldingNothing(logging.Filter):
    """dist_checkpointing's save compares every rank's common state with rank 0's and warns of a
    difference: a rank that holds no part of the layout saving (resharding) has none, by design."""
    active = False

    def filter(self, record):
        return not (self.active and "common state dict differs" in record.getMessage())


_nothing_filter = _HoldingNothing()
logging.getLogger("megatron.core.dist_checkpointing.validation").addFilter(_nothing_filter)


@contextlib.contextmanager
def _holding_nothing():
    _nothing_filter.active = True
    try:
        yield
    finally:
        _nothing_filter.active = False


def _refuse_uneven(layer):
    """Said on every rank before any collective: dist_checkpointing shards a tensor in equal parts."""
    trip = "resume_at" if layer.resume else "reshard_at"
    for b in layer.blocks:
        sp = b.split(0, layer.tp)
        if layer.tp > 1 and sp is not None and (b.cols if sp[0] == 1 else b.rows) % layer.tp:
            raise ValueError(f"{trip}: megatron-core's dist_checkpointing shards a tensor in equal parts over TP "
                             f"(Megatron pads the vocabulary to a multiple of it): {b.name}'s "
                             f"{b.cols if sp[0] == 1 else b.rows} {'columns' if sp[0] == 1 else 'rows'} "
                             f"do not split in {layer.tp}")


def run(layer, case, init, grads, tp, pp, dp, distopt, ep=1, save_to=None, load_from=None):
    """This rank's part of one run of the case's steps as TP x PP x DP (x EP = DP with experts):
    None when it has none, else ((dp rank, pp rank, tp rank), ({block name: (steps, 4, *shard
    shape)} of master, parameter, m, v after each step, NaN where another replica holds the
    distributed optimizer's shard), [the gradient norm each step returned])). Resharding
    (reshard_at = k): save_to, steps 1..k and saved there by dist_checkpointing; load_from, loaded
    from there into fresh objects (its row of step k: as loaded), steps k+1..N (the rows and norms
    before: NaN). Every rank joins both (dist_checkpointing's collectives span the world), one
    that holds no part of the layout with nothing to save or load; likewise in a round trip
    (resume_at) of a layout that leaves ranks out (4 ranks, TP=2 untied)."""
    at = _Layout(tp, pp, dp, ep)
    if not at.holds():
        if save_to:
            with _holding_nothing():
                dist_checkpointing.save({}, save_to)
        if load_from:
            dist_checkpointing.load({}, load_from)
        if layer.resume and not save_to and not load_from:
            if distopt:
                _refuse_empty_bucket(None, at)
            with pr.checkpoint_dir(dist.group.WORLD) as path, _holding_nothing():
                dist_checkpointing.save({}, path)
                dist_checkpointing.load({}, path)
        return None
    params, chunk, opt, inners, groups = optimizer_for(layer, at, distopt, case.fault == "embedding-unmarked")
    index, source = {}, {}
    for name in params:
        b = layer.block(name)
        local = torch.from_numpy(b.shard(np.arange(b.size).reshape(b.rows, b.cols), at.t, tp).reshape(-1).astype(np.int64))
        index[name] = b.offset + local
        # stage 1's gradient is the LM head's contribution (after the n parameters in grads)
        source[name] = (layer.n + local) if at.stage == 1 else index[name]
    init_t = torch.from_numpy(np.asarray(init, dtype=np.float32))
    # the micro-batch gradients of the loss scaled by the scaler's S of the step (fp16; S a power
    # of two: exact in fp32), rounded to the parameters' dtype as the backward pass leaves them
    dtype = params["embed.w"].dtype
    true = torch.from_numpy(np.asarray(grads, dtype=np.float32).reshape(layer.steps, layer.mb, -1))

    def configure(inners, groups):
        """The case's scaler, norm groups (as get_megatron_optimizer set them; the faults' own)
        and hyperparameters; {block name: (start, stop, main)} of the distributed optimizer's
        shards and {block name: the optimizer stepping it}."""
        shards, owner = {}, {}
        for inner, group in zip(inners, groups):
            if inner.grad_scaler is not None:
                reset_scaler(inner.grad_scaler, layer)
            if case.fault == "norm-not-allreduced":
                inner.grad_stats_parallel_group = at.single
            elif case.fault == "norm-shard-only" and distopt:
                inner.grad_stats_parallel_group = at.mp_group
            elif case.fault == "expert-norm-local" and inner is not inners[0]:
                inner.grad_stats_parallel_group = at.mp_group  # the experts' norm left out of the EP all-reduce
            else:
                inner.grad_stats_parallel_group = group
            if distopt:
                for group_, mains in zip(inner.model_float16_groups, inner.shard_fp32_from_float16_groups):
                    for p, main in zip(group_, mains):
                        name = next(n for n, q in params.items() if q is p)
                        r = inner._get_model_param_range_map(p)["param"]
                        shards[name] = (r.start, r.end, main)
                        owner[name] = inner
            else:
                for group_ in inner.float16_groups:
                    for p in group_:
                        owner[next(n for n, q in params.items() if q is p)] = inner
            inner.optimizer.state.clear()
            for g in inner.optimizer.param_groups:
                g["lr"], g["betas"], g["eps"] = layer.lr, layer.betas, layer.eps
                g["weight_decay"] = layer.wd * g["wd_mult"]
            inner.config.clip_grad = layer.max_norm
        return shards, owner

    # the case's state: fp32 main params from init (as after loading a checkpoint), bf16 model
    # params rounded from them, no Adam state; its hyperparameters
    shards, owner = configure(inners, groups)
    for name, p in params.items():
        if distopt:
            if name in shards:
                a, z, main = shards[name]
                main.data.copy_(init_t[index[name]][a:z])
            p.data.copy_(init_t[index[name]].view(p.shape))
        else:
            p.main_param.data.copy_(init_t[index[name]].view(p.shape))
            p.data.copy_(p.main_param.data)
    hist = {name: np.full((layer.steps, 4) + tuple(p.shape), np.nan, np.float32) for name, p in params.items()}
    state = np.zeros((layer.steps, 5))
    norms = []
    mine = list(layer.micro_batches(at.d, dp))
    half = layer.mb // 2

    def record(s):
        for name, p in params.items():
            h = hist[name][s]
            h[1] = p.detach().float().numpy()
            if distopt:
                if name not in shards:  # wholly in another replica's shard
                    continue
                a, b, main = shards[name]
                st = owner[name].optimizer.state[main]
                for q, v in ((0, main), (2, st.get("exp_avg")), (3, st.get("exp_avg_sq"))):
                    h[q].reshape(-1)[a:b] = v.detach().numpy() if v is not None else 0
            else:
                st = owner[name].optimizer.state[p.main_param]
                h[0] = p.main_param.detach().numpy()
                # none before the first step that was not skipped: AdamW's zeros
                h[2] = st["exp_avg"].numpy() if st else 0
                h[3] = st["exp_avg_sq"].numpy() if st else 0
        steps = [float(st["step"]) for st in inners[0].optimizer.state.values() if "step" in st]
        scaler = inners[0].grad_scaler
        state[s] = (steps[0] if steps else 0, float(scaler.scale) if scaler is not None else 0,
                    getattr(scaler, "_growth_tracker", 0), getattr(scaler, "_hysteresis_tracker", 0), 0)

    def train(steps):
        for s in steps:
            scaler = inners[0].grad_scaler
            scaled = true[s] * (float(scaler.scale) if scaler is not None else 1.0)
            grads_t = scaled.to(dtype)
            chunk.zero_grad_buffer()
            opt.zero_grad()
            for i, k in enumerate(mine):
                for name, p in params.items():  # DDP's backward hook: main_grad += grad
                    if ep > 1 and layer.block(name).expert is not None:
                        # EP: slot i brings the expert both replicas' tokens, micro-batches i and
                        # i + mb/2; its backward GEMM leaves their sum rounded to the dtype once
                        g = (scaled[i, source[name]] + scaled[i + half, source[name]]).to(dtype)
                    else:
                        g = grads_t[k, source[name]]
                    p.main_grad.add_(g.view(p.shape))
            # finalize_model_grads: the data-parallel reduction, then the tied embedding's
            # gradients summed over its stages
            chunk.finish_grad_sync()
            if pp > 1:
                finalize_model_grads._allreduce_word_embedding_grads([chunk], SimpleNamespace(mtp_num_layers=None),
                                                                     at.pp_group, at.pp_group)
            ok, grad_norm, _ = opt.step()
            # binary64; the outputs round it to fp32. A skipped step (fp16: the scaled gradients
            # overflowed) returns no norm: -1, as the contract writes it
            norms.append(grad_norm if ok and grad_norm is not None else -1.0)
            record(s)

    def load(path):
        """Fresh objects of this layout loaded from the checkpoint in path (the faults: what broken
        load code does)."""
        nonlocal params, chunk, opt, inners, groups, shards, owner
        params, chunk, opt, inners, groups = optimizer_for(layer, at, distopt, case.fault == "embedding-unmarked",
                                                           fresh=True)
        shards, owner = configure(inners, groups)
        if distopt:  # a fresh DistributedOptimizer has no Adam state to load into: its own
            for inner in inners:  # placeholder step first, as Megatron-LM's loaders take
                if not inner.optimizer.state:
                    inner._init_optimizer_states_with_dummy_values()
        loaded = dist_checkpointing.load(sharded(chunk, opt, at, True), path)
        chunk.module.load_state_dict(loaded["model"])
        opt.load_state_dict(loaded["optimizer"])
        if case.fault == "ckpt-master-from-param":  # Megatron-LM's path without the optimizer's state
            opt.reload_model_params()
        if case.fault == "ckpt-last-stage-init" and at.stage == 1:  # seed 004: the last stage's
            # copy of the tied embedding (and its main param) back at its initial values
            with torch.no_grad():
                p = params["embed.w"]
                p.copy_(init_t[index["embed.w"]].view(p.shape))
                if distopt and "embed.w" in shards:
                    a, z, main = shards["embed.w"]
                    main.copy_(init_t[index["embed.w"]][a:z])
                elif not distopt:
                    p.main_param.copy_(init_t[index["embed.w"]].view(p.shape))
        if case.fault == "ckpt-scale-reset":  # the scaler made anew after the load
            for inner in inners:
                if inner.grad_scaler is not None:
                    reset_scaler(inner.grad_scaler, layer)

    with pr.switched(FAULTS, case.fault):
        if load_from:  # resharding: this layout from the other's checkpoint after step k
            norms.extend([np.nan] * layer.reshard)
            load(load_from)
            record(layer.reshard - 1)
            train(range(layer.reshard, layer.steps))
            return (at.d, at.stage, at.t), (hist, norms, state)
        train(range(layer.reshard if save_to else layer.resume or layer.steps))
        if save_to:
            dist_checkpointing.save(sharded(chunk, opt, at, False), save_to)
            pr.poison(state_tensors(params.values(), inners))
        elif layer.resume:  # dist_checkpointing, as Megatron-LM's save_checkpoint and load_checkpoint use it
            if distopt:
                _refuse_empty_bucket(inners, at)
            with pr.checkpoint_dir(dist.group.WORLD) as path:  # every rank: dist_checkpointing's collectives
                dist_checkpointing.save(sharded(chunk, opt, at, False), path)
                pr.poison(state_tensors(params.values(), inners))
                load(path)
            record(layer.resume - 1)
            train(range(layer.resume, layer.steps))
    return (at.d, at.stage, at.t), (hist, norms, state)


# --- the round trip (resume_at): megatron-core's dist_checkpointing --------------------------------

def sharded(chunk, opt, at, loading):
    """The sharded state dict Megatron-LM's generate_state_dict makes: the model chunk's, and the
    optimizer's over it (the distributed optimizer's default sharding, fully_sharded_model_space)."""
    # the metadata Megatron-LM's _build_sharded_state_dict_metadata gives: the distributed
    # optimizer's state dp_reshardable unless told to make it fully reshardable
    # (--dist-ckpt-optim-fully-reshardable, whose gathers need CUDA here)
    meta = {"dp_cp_group": at.dp_group, "distrib_optim_sharding_type": "dp_reshardable",
            "singleton_local_shards": False, "chained_optim_avoid_prefix": True}
    model = chunk.module.sharded_state_dict(metadata=meta)  # the model inside megatron's DDP
    return {"model": model, "optimizer": opt.sharded_state_dict(model, is_loading=loading, metadata=meta)}


def state_tensors(params, inners):
    """The model's parameters, their main params (the distributed optimizer's shards of them)
    and every tensor of the Adam states."""
    out = []
    for p in params:
        out += [p] + ([p.main_param] if getattr(p, "main_param", None) is not None else [])
    for inner in inners:
        out += [m for mains in getattr(inner, "shard_fp32_from_float16_groups", []) for m in mains]
        out += [v for st in inner.optimizer.state.values() for v in st.values()]
    return out


def _merge_shards(ranks):
    """The distributed optimizer holds each element's master, m and v on one replica: fill every
    replica's history with the other replicas' shards (its bf16 parameters stay its own)."""
    for (d, pp, tp), (hist, *_) in ranks.items():
        for e, (other, *_) in ranks.items():
            if e[1:] != (pp, tp) or e[0] == d:
                continue
            for name, h in hist.items():
                if name not in other:  # an expert under EP: this replica's alone, whole
                    continue
                gap = np.isnan(h[:, [0, 2, 3]])
                h[:, [0, 2, 3]] = np.where(gap, other[name][:, [0, 2, 3]], h[:, [0, 2, 3]])
    return ranks


def run_resharded(layer, case, init, grads, first, second):
    """A run that changes layout after step k (reshard_at): steps 1..k as `first` (TP, PP, DP, EP),
    saved by dist_checkpointing, loaded into fresh objects as `second`, steps k+1..N. This rank's
    parts: {"before": its part in `first`, "after": in `second`}, each None where it holds none.
    The Float16Optimizer's state is sharded in model space, as the parameters are: it reshards
    over TP (the distributed optimizer's dp_reshardable state does not: those variants do not
    take reshard_at)."""
    with pr.checkpoint_dir(dist.group.WORLD) as path:
        before = run(layer, case, init, grads, *first[:3], False, first[3], save_to=path)
        dist.barrier()  # the checkpoint is whole before anyone loads it
        after = run(layer, case, init, grads, *second[:3], False, second[3], load_from=path)
    return {"before": before, "after": after}


def _runs(case, init, grads, distopt):
    """This rank's part in the first run, the second, and (resume_at) the second straight; with
    reshard_at each run's parts before and after its change of layout."""
    layer = pr.TPLayer(case)
    if layer.resume or layer.reshard:
        _refuse_uneven(layer)
    plain = pr.TPLayer(case)
    plain.resume = 0
    pp = 2 if layer.tied else 1
    if layer.reshard:
        one, two = (1, pp, 1, 1), (layer.tp, pp, layer.dp, layer.ep)
        return {"one": run_resharded(layer, case, init, grads, two, one),
                "two": run_resharded(layer, case, init, grads, one, two)}
    out = [run(plain, case, init, grads, 1, pp, 1, distopt),
           run(layer, case, init, grads, layer.tp, pp, layer.dp, distopt, layer.ep)]
    if layer.resume:
        out.append(run(plain, case, init, grads, layer.tp, pp, layer.dp, distopt, layer.ep))
    return out


def _outputs(case, results, distopt):
    layer = pr.TPLayer(case)
    if layer.reshard:  # each run's parts before and after the reshard, spliced at step k
        spliced = []
        for which in ("one", "two"):
            before = dict(r[which]["before"] for r in results if r[which]["before"] is not None)
            after = dict(r[which]["after"] for r in results if r[which]["after"] is not None)
            spliced.append(layer.reshard_splice(before, after, to=sorted(after)))
        return layer.tp_outputs(spliced)
    runs = [dict(r[i] for r in results if r[i] is not None) for i in range(len(results[0]))]
    if distopt:
        runs = [_merge_shards(ranks) for ranks in runs]
    return pr.TPLayer(case).tp_outputs(runs[:2], runs[2] if len(runs) > 2 else None)


# the layouts this group can hold: 2 ranks, TP=2 or DP=2 (tied=0); 4 ranks, TP=2 x DP=2 or TP=2 x PP=2
# grad_reduce_in_fp32: the reduction runs in fp32 (comm=0)
# resume_at: the round trip through dist_checkpointing (every rank joins its save and load)
_PARAMS = {"tied": [0, 0], "comm": [0, 0]} if WORLD == 2 else {"comm": [0, 0]}
_PARAMS["resume_at"] = [0, 1e6]


def _register(dtype, distopt):
    """One variant: megatron-core[-distopt]-DTYPE."""
    name = f"megatron-core{'-distopt' if distopt else ''}-{dtype}"
    what = "DistributedOptimizer" if distopt else "Float16OptimizerWithFloat16Params"
    scaled = (", ConstantGradScaler or DynamicGradScaler (scaler=1)" if dtype == "fp16" else "")
    # the distributed optimizer reduces the dense and the expert norms over one group, so
    # ChainedOptimizer pools them: no separate expert norm to average
    faults = [f for f in FAULTS if (f not in ("norm-shard-only", "embedding-unmarked", "distopt-step-patched") or distopt) and
              not (f == "expert-norm-averaged" and distopt) and not (f == "ckpt-scale-reset" and dtype != "fp16")]

    # reshard_at: the Float16Optimizer's state only (the distributed optimizer's reshards over DP)
    params = dict(_PARAMS, **({} if distopt else {"reshard_at": [0, 1e6]}))

    @pr.kernel("tp_diff", variant=name, like="megatron-core", dtypes=[dtype], params=params, faults=faults,
               summary=f"megatron-core 0.16.1 {what}{scaled} (torch AdamW) through DDP on {WORLD} gloo ranks")
    def step(case, init, grads, gscale):
        return _runs(case, init, grads, distopt)

    @step.combine
    def outputs(case, results):
        return _outputs(case, results, distopt)


for _dtype in ("bf16", "fp16"):
    for _distopt in (False, True):
        _register(_dtype, _distopt)


if __name__ == "__main__":
    sys.exit(pr.serve())
