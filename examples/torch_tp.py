"""Plain PyTorch's own distributed training step under precfuzz's differential, on 2 real ranks:
DTensor tensor parallelism or DistributedDataParallel, torch.nn.utils.clip_grad_norm_ and
torch.optim.AdamW, in fp32.

    K='ranks:2:.venv/bin/python examples/torch_tp.py'
    precfuzz --kernels "$K" diff-tp -v torch-dtensor --param tied=0 -t fp32        # TP=1 against TP=2
    precfuzz --kernels "$K" diff-tp -v torch-ddp --param tied=0 --param tp=1 --param dp=2 -t fp32
    ... --fault norm-local        # clip_grad_norm_ given the local shards: each rank its own norm

Every case runs the case's transformer layer twice: as TP=1 on rank 0 alone, and as the
variant's second layout on both ranks:
  torch-dtensor  TP=2: every parameter a DTensor on a 2-rank CPU device mesh, Megatron's splits
                 as placements (column- and vocab-parallel Shard(0), row-parallel Shard(1),
                 the rest Replicate(); an odd vocabulary splits as torch.chunk does, rank 0
                 taking the larger half, as Megatron does)
  torch-ddp      DP=2: the parameters in a module wrapped in DistributedDataParallel (its C++
                 reducer: each gradient multiplied by 1/2 into its bucket, the buckets SUM
                 all-reduced), each replica taking half the micro-batches, no_sync() for all
                 but its last
Each micro-batch's gradient reaches the parameters through autograd (the loss sum(p * c) has
gradient c exactly; torch's AccumulateGrad adds them in fp32); then clip_grad_norm_(params,
max_norm) (per-tensor norms, a sharded DTensor's combined over its ranks, the norm of the
norms, the clamped coefficient) and torch.optim.AdamW (its defaults on the CPU: the
single-tensor loop). Parameters are fp32 and their own masters. With DDP each replica's loss is
multiplied by the DP size (2, exact): DDP averages, and the case's gradient is the micro-batches'
sum. Every rank's parameter, m and v after every step come back; precfuzz checks them against the
contract tp_diff/torch. No shim: PyTorch runs on the CPU as it is.

Fault switches (precfuzz --fault NAME), each a monkeypatch of PyTorch's clip_grad module or of
the training loop as a user might write it, for the case:
  tp-replicated-unclipped  torch-dtensor: _clip_grads_with_norm_ skips the replicated tensors on
                           TP ranks > 0 (seed 002's effect: a filter for "the tensors this rank
                           owns" one level too far out)
  norm-no-dedup            torch-dtensor: _get_total_norm as a hand-written norm: every rank's
                           local squares summed and all-reduced, so the replicated tensors count
                           twice (Transformer Engine ROCm PR 715's effect)
  norm-local               torch-dtensor: clip_grad_norm_ given the local shards (to_local()):
                           each rank clips by its own norm (the FSDP and DTensor pitfall)
  norm-bf16                _get_total_norm over bf16 copies of the gradients (torchtitan PR
                           4135: a total norm computed in bf16)
  dp-grad-unreduced        torch-ddp: every micro-batch's backward under no_sync(), the last too:
                           each replica steps on its own micro-batches

With --param resume_at=K the second layout also runs with a round trip through
torch.distributed.checkpoint (docs/checkpoint.md): K steps, get_state_dict and dcp.save, every
tensor of that module and optimizer set to NaN, a fresh module and AdamW, dcp.load into their
state dicts and set_state_dict, the other steps; precfuzz compares it with the same run
straight, bit for bit. Its switches, as a user's checkpoint code might be written:
  dcp-keys-unqualified     torch-dtensor: each rank's local shards (to_local()) saved and loaded
                           as plain tensors under the same keys: DCP keeps one rank's copy
  ckpt-adam-state-dropped  the first tensor's Adam state left out, loaded with strict=False
  ckpt-step-reset          the loaded step counts set to 0
With --param reshard_at=K each run changes layout at its checkpoint: the first (TP=1 on rank 0)
is the variant's layout for steps 1..K, saved by DCP and loaded at TP=1 on rank 0, the second
TP=1 saved by rank 0 alone and loaded at the variant's layout on both ranks; precfuzz judges
both by the differential's set.
"""
# precfuzz-target: kernel=tp_diff start=ranks:2 needs=torch cases=4 variants=torch-dtensor,torch-ddp

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import precfuzz_ranks as pr  # noqa: E402  (first: rank 0's standard output is the protocol's)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.utils.clip_grad as clip_grad  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict  # noqa: E402

RANK, WORLD = pr.init()
if WORLD != 2:
    raise SystemExit(f"torch_tp.py runs on 2 ranks (--kernels ranks:2:...), not {WORLD}")
assert torch.__version__.split("+")[0] == "2.15.0", f"written against PyTorch 2.15.0, not {torch.__version__}"

# every rank makes every group, in the same order (torch.distributed's rule)
MESH = init_device_mesh("cpu", (2,))
SINGLE = [dist.new_group([0]), dist.new_group([1])]
PAIR = dist.new_group([0, 1])


# --- fault switches -----------------------------------------------------------------------------

_real_total_norm = clip_grad._get_total_norm
_real_clip_with_norm = clip_grad._clip_grads_with_norm_


def _local(t):
    return t.to_local() if isinstance(t, DTensor) else t


def _total_norm_no_dedup(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """A hand-written global norm: each rank's local squares, summed over the ranks."""
    tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    sq = torch.stack([_local(t).float().pow(2).sum() for t in tensors]).sum()
    if any(isinstance(t, DTensor) for t in tensors):
        dist.all_reduce(sq, group=MESH.get_group())
    return sq.sqrt()


def _total_norm_local(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    return _real_total_norm([_local(t) for t in tensors], norm_type, error_if_nonfinite, foreach)


def _total_norm_bf16(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    total = _real_total_norm([t.to(torch.bfloat16) for t in tensors], norm_type, error_if_nonfinite, foreach)
    return total.float()


def _clip_owned_only(parameters, max_norm, total_norm, foreach=None):
    """seed 002's filter in DTensor terms: on TP ranks > 0 only the sharded tensors are clipped."""
    parameters = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    if MESH.get_local_rank() != 0:
        parameters = [p for p in parameters
                      if not (isinstance(p, DTensor) and all(isinstance(q, Replicate) for q in p.placements))]
    return _real_clip_with_norm(parameters, max_norm, total_norm, foreach)


FAULTS = {
    "tp-replicated-unclipped": [(clip_grad, "_clip_grads_with_norm_", _clip_owned_only)],
    "norm-no-dedup": [(clip_grad, "_get_total_norm", _total_norm_no_dedup)],
    "norm-local": [(clip_grad, "_get_total_norm", _total_norm_local)],
    "norm-bf16": [(clip_grad, "_get_total_norm", _total_norm_bf16)],
    "dp-grad-unreduced": [],  # the training loop's (step below): no_sync() for every micro-batch
    # the round trip's (save and load below), as a user's checkpoint code might be written
    "dcp-keys-unqualified": [],
    "ckpt-adam-state-dropped": [],
    "ckpt-step-reset": [],
}


# --- the model ----------------------------------------------------------------------------------

def placement(block):
    """The DTensor placement of Megatron's split of a block (TP=2)."""
    return Replicate() if block.kind == pr.REPLICATED else Shard(1 if block.kind == pr.ROW else 0)


class Layer(torch.nn.Module):
    """The case's parameters; forward(consts) is the loss sum(p * c) over them, whose gradient is
    c exactly (one constant per parameter, in the parameter's own layout)."""

    def __init__(self, tensors):
        super().__init__()
        self.names = list(tensors)
        for name, t in tensors.items():
            self.register_parameter(name.replace(".", "_"), torch.nn.Parameter(t))

    def params(self):
        return {name: getattr(self, name.replace(".", "_")) for name in self.names}

    def forward(self, consts):
        ps = self.params()
        loss = None
        for name, c in consts.items():
            p = ps[name]
            term = ((p.to_local() if isinstance(p, DTensor) else p) * c).sum()
            loss = term if loss is None else loss + term
        return loss


_built = {}  # (layout, shapes) -> module (and its DDP wrapper): built once, its values reset per case


def build(layer, how):
    """A module of the case's parameters at NaN (and its DDP wrapper): how is "one" (TP=1, rank
    0), "dtensor" (TP=2) or "ddp" (DP=2)."""
    tensors = {}
    for b in layer.blocks:
        full = torch.full(b.shape, float("nan"), dtype=torch.float32)
        tensors[b.name] = distribute_tensor(full, MESH, [placement(b)], src_data_rank=None) if how == "dtensor" else full
    module = Layer(tensors)
    return module, DistributedDataParallel(module, process_group=PAIR) if how == "ddp" else None


def model_for(layer, how):
    key = (how, tuple((b.name, b.rows, b.cols) for b in layer.blocks))
    if key not in _built:
        _built[key] = build(layer, how)
    return _built[key]


def adamw(layer, module):
    params = module.params()
    decay = [params[b.name] for b in layer.blocks if b.decay]
    no_decay = [params[b.name] for b in layer.blocks if not b.decay]
    return torch.optim.AdamW([{"params": decay, "weight_decay": layer.wd}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=layer.lr, betas=layer.betas, eps=layer.eps)


# --- the round trip (resume_at): torch.distributed.checkpoint ---------------------------------

def save(module, opt, path, case, group=None):
    """DCP's save as its docs give it: get_state_dict (DTensor shards, DDP's prefix dropped),
    dcp.save on every rank. dcp-keys-unqualified: each rank's local shards saved as plain tensors
    under the same keys; DCP takes equal keys on several ranks for one replicated tensor and
    writes one rank's. group: the ranks that save (None: all; TP=1 saves on rank 0 alone)."""
    model_sd, optim_sd = get_state_dict(module, opt)
    if case.fault == "dcp-keys-unqualified":
        model_sd = {k: _local(v) for k, v in model_sd.items()}
        optim_sd = {"state": {k: {n: _local(x) for n, x in st.items()} for k, st in optim_sd["state"].items()},
                    "param_groups": optim_sd["param_groups"]}
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path, process_group=group)


def load(module, opt, path, case, group=None):
    """DCP's load into fresh objects: the state dicts the new module and optimizer have (as
    get_state_dict makes them) filled in place by dcp.load, then set_state_dict."""
    model_sd, optim_sd = get_state_dict(module, opt)
    if case.fault == "dcp-keys-unqualified":
        model_sd = {k: _local(v) for k, v in model_sd.items()}
        optim_sd = {"state": {k: {n: _local(x) for n, x in st.items()} for k, st in optim_sd["state"].items()},
                    "param_groups": optim_sd["param_groups"]}
    box = {"model": model_sd, "optim": optim_sd}
    dcp.load(box, checkpoint_id=path, process_group=group)
    if case.fault == "dcp-keys-unqualified":  # the local tensors loaded in place: into the DTensors
        for k, v in get_state_dict(module, opt)[0].items():
            _local(v).copy_(box["model"][k])
        return
    options = None
    if case.fault == "ckpt-adam-state-dropped":
        # the first tensor's Adam state left out, loaded with strict=False (set_state_dict refuses
        # a missing state otherwise) as a user does whose checkpoint's keys changed
        del box["optim"]["state"][next(iter(box["optim"]["state"]))]
        options = StateDictOptions(strict=False)
    if case.fault == "ckpt-step-reset":  # the step counts back at 0: bias correction starts over
        for st in box["optim"]["state"].values():
            st["step"] = torch.zeros_like(st["step"]) if torch.is_tensor(st["step"]) else 0.0
    set_state_dict(module, opt, model_state_dict=box["model"], optim_state_dict=box["optim"], options=options)


def state_tensors(module, opt):
    """The module's parameters and every tensor of the optimizer's state."""
    return list(module.params().values()) + [v for st in opt.state.values() for v in st.values()]


class Run:
    """One run of the case on this rank in one layout: its module and AdamW, this rank's share of
    every gradient, and the history it records: {block name: (steps, 4, *local shape)} of master
    (= the parameter), parameter, m, v after each step, the norm each step reported, and
    (steps, 5) of the step count (the rest of tp_diff_spec.h's state: no scaler). how: "one" (TP=1, rank 0),
    "dtensor" (TP=2) or "ddp" (DP=2); fresh: new objects, their values to be loaded, else the
    layout's cached ones set to the case's initial values."""

    def __init__(self, layer, case, init, grads, how, fresh=False):
        self.layer, self.case, self.how = layer, case, how
        self.module, self.ddp = build(layer, how) if fresh else model_for(layer, how)
        params = self.module.params()
        tp, tp_rank = (2, RANK) if how == "dtensor" else (1, 0)
        dp, self.replica = (2, RANK) if how == "ddp" else (1, 0)
        init_a = np.asarray(init, dtype=np.float32)
        g_all = np.asarray(grads, dtype=np.float32).reshape(layer.steps, layer.mb, -1)
        self.consts = {}  # block name -> (steps, micro-batches, *local shape): this rank's share of each gradient
        with torch.no_grad():
            for b in layer.blocks:
                p = params[b.name]
                if not fresh:
                    _local(p).copy_(torch.from_numpy(b.shard(layer.init(init_a, b), tp_rank, tp)))
                p.grad = None
                sl = g_all[:, :, b.offset:b.offset + b.size].reshape(layer.steps, layer.mb, b.rows, b.cols)
                local = np.stack([np.stack([b.shard(sl[s, k], tp_rank, tp) for k in range(layer.mb)])
                                  for s in range(layer.steps)])
                self.consts[b.name] = torch.from_numpy(local * np.float32(dp))  # DDP averages over dp: exact
        self.opt = adamw(layer, self.module)
        self.hist = {b.name: np.zeros((layer.steps, 4) + tuple(_local(params[b.name]).shape), np.float32)
                     for b in layer.blocks}
        self.state = np.zeros((layer.steps, 5))
        self.norms = [0.0] * layer.steps
        self.mine = list(layer.micro_batches(self.replica, dp))

    def renew(self):
        """Fresh module and optimizer in the same layout (a round trip's), the old ones' tensors
        set to NaN."""
        pr.poison(state_tensors(self.module, self.opt))
        self.module, self.ddp = build(self.layer, self.how)
        self.opt = adamw(self.layer, self.module)

    def record(self, s):
        for name, p in self.module.params().items():
            st = self.opt.state.get(p, {})
            h = self.hist[name][s]
            h[0] = h[1] = _local(p).detach().numpy()
            h[2] = _local(st["exp_avg"]).numpy() if "exp_avg" in st else 0  # none yet: Adam's zeros
            h[3] = _local(st["exp_avg_sq"]).numpy() if "exp_avg_sq" in st else 0
            self.state[s, 0] = float(st.get("step", 0))

    def train(self, steps):
        params = self.module.params()
        forward = self.ddp if self.ddp is not None else self.module
        for s in steps:
            self.opt.zero_grad(set_to_none=True)
            for k in self.mine:
                sync = k == self.mine[-1] and self.case.fault != "dp-grad-unreduced"
                c = {name: self.consts[name][s, k] for name in params}
                if self.ddp is not None and not sync:
                    with self.ddp.no_sync():
                        forward(c).backward()
                else:
                    forward(c).backward()
            norm = torch.nn.utils.clip_grad_norm_(list(params.values()), self.layer.max_norm)
            self.norms[s] = float(norm.full_tensor() if isinstance(norm, DTensor) else norm)
            self.opt.step()
            self.record(s)

    def result(self):
        return self.hist, self.norms, self.state


def run(layer, case, init, grads, how, resume=0):
    """One run of the case's steps on this rank (Run's history). With resume = k: steps 1..k,
    saved by DCP, the objects that saved set to NaN, fresh ones loaded by DCP (their row of step
    k: as loaded), steps k+1..N."""
    r = Run(layer, case, init, grads, how)
    with pr.switched(FAULTS, case.fault):
        r.train(range(resume or layer.steps))
        if resume:
            with pr.checkpoint_dir(PAIR) as path:
                save(r.module, r.opt, path, case)
                r.renew()
                load(r.module, r.opt, path, case)
            r.record(resume - 1)
            r.train(range(resume, layer.steps))
    return r.result()


def run_resharded(layer, case, init, grads, first, second):
    """A run that changes layout after step k (reshard_at): steps 1..k in layout `first`, saved by
    DCP (TP=1 on rank 0 alone), loaded by DCP into fresh objects of layout `second` (their row of
    step k: as loaded), steps k+1..N. This rank's parts: {"before": Run's history in `first`,
    "after": in `second`}, each None where the rank holds no part of that layout."""
    k, out = layer.reshard, {"before": None, "after": None}
    with pr.switched(FAULTS, case.fault), pr.checkpoint_dir(PAIR) as path:
        if first != "one" or RANK == 0:
            a = Run(layer, case, init, grads, first)
            a.train(range(k))
            save(a.module, a.opt, path, case, SINGLE[0] if first == "one" else None)
            pr.poison(state_tensors(a.module, a.opt))
            out["before"] = a.result()
        dist.barrier(group=PAIR)  # the checkpoint is whole before anyone loads it
        if second != "one" or RANK == 0:
            b = Run(layer, case, init, grads, second, fresh=True)
            load(b.module, b.opt, path, case, SINGLE[0] if second == "one" else None)
            b.record(k - 1)
            b.train(range(k, layer.steps))
            out["after"] = b.result()
    return out


@pr.kernel("tp_diff", variant="torch-dtensor", like="torch", dtypes=["fp32"],
           params={"tied": [0, 0], "tp": [2, 2], "dp": [1, 1], "experts": [0, 0], "comm": [0, 0], "resume_at": [0, 1e6],
                   "reshard_at": [0, 1e6]},
           faults=["tp-replicated-unclipped", "norm-no-dedup", "norm-local", "norm-bf16", "dcp-keys-unqualified",
                   "ckpt-adam-state-dropped", "ckpt-step-reset"],
           summary="PyTorch 2.15 DTensor TP=2 (2 gloo ranks), clip_grad_norm_, AdamW, fp32, DCP round trip; TP=1 on rank 0")
def torch_dtensor(case, init, grads, gscale):
    return runs(case, init, grads, "dtensor")


def runs(case, init, grads, how):
    """This rank's runs of the case: the second layout (with resume_at: round-tripped, and
    straight beside it), and on rank 0 TP=1; with reshard_at each of them changing layout."""
    layer = pr.TPLayer(case)
    if layer.reshard:
        return {"one": run_resharded(layer, case, init, grads, how, "one"),
                "two": run_resharded(layer, case, init, grads, "one", how)}
    out = {"two": run(layer, case, init, grads, how, layer.resume)}
    if layer.resume:
        out["straight"] = run(layer, case, init, grads, how)
    if RANK == 0:
        out["one"] = run(layer, case, init, grads, "one")
    return out


def outputs(case, results, key):
    layer = pr.TPLayer(case)
    if layer.reshard:  # each run's parts before and after the reshard, spliced at step k
        two = [{key(r): res["two"]["before"] for r, res in enumerate(results) if res["two"]["before"]},
               {key(r): res["two"]["after"] for r, res in enumerate(results) if res["two"]["after"]}]
        one = [{key(r): res["one"]["before"] for r, res in enumerate(results) if res["one"]["before"]},
               {key(r): res["one"]["after"] for r, res in enumerate(results) if res["one"]["after"]}]
        return layer.tp_outputs([layer.reshard_splice(*one, to=[(0, 0, 0)]), layer.reshard_splice(*two, to=list(two[1]))])
    straight = {key(r): res["straight"] for r, res in enumerate(results)} if layer.resume else None
    return layer.tp_outputs([{(0, 0, 0): results[0]["one"]}, {key(r): res["two"] for r, res in enumerate(results)}],
                            straight)


@torch_dtensor.combine
def dtensor_outputs(case, results):
    return outputs(case, results, lambda r: (0, 0, r))


@pr.kernel("tp_diff", variant="torch-ddp", like="torch", dtypes=["fp32"],
           params={"tied": [0, 0], "tp": [1, 1], "dp": [2, 2], "experts": [0, 0], "comm": [0, 0], "resume_at": [0, 1e6],
                   "reshard_at": [0, 1e6]},
           faults=["norm-bf16", "dp-grad-unreduced", "ckpt-adam-state-dropped", "ckpt-step-reset"],
           summary="PyTorch 2.15 DistributedDataParallel DP=2 (2 gloo ranks), clip_grad_norm_, AdamW, fp32, DCP round "
                   "trip; TP=1 on rank 0")
def torch_ddp(case, init, grads, gscale):
    return runs(case, init, grads, "ddp")


@torch_ddp.combine
def ddp_outputs(case, results):
    return outputs(case, results, lambda r: (r, 0, 0))


if __name__ == "__main__":
    sys.exit(pr.serve())
