"""Kernels that run on several torch.distributed ranks: a framework's own distributed optimizer
step under precfuzz's exact differential.

    import precfuzz_ranks as pr          # first: rank 0's standard output is the protocol's

    @pr.kernel("tp_diff", variant="my-tp", like="deepspeed", dtypes=["bf16"], faults=["my-bug"])
    def step(case, group, init, grads, gscale):   # on every rank, with the case's inputs
        layer = pr.TPLayer(case)
        ...                                        # run the framework's step on this rank's shard
        return {...}                               # anything picklable: this rank's result

    @step.combine
    def outputs(case, results):                    # rank 0: results[r] is rank r's return value
        return {"copies": ..., "tp1": ..., "tp2": ...}

    if __name__ == "__main__":
        pr.serve()

and then:  precfuzz --kernels ranks:2:"python3 my_tp.py" diff-tp -v my-tp --param tied=0

precfuzz starts N copies of the script in one process group, each with RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free MASTER_PORT and GLOO_SOCKET_IFNAME=lo, and keeps them
for case after case. serve() joins the ranks in a gloo process group (NCCL is the framework's
business: the cases travel over gloo), says hello from rank 0, and for every case: rank 0 reads
it, broadcasts it, every rank runs the kernel function, rank 0 gathers the results, combines
them into the outputs and answers. An exception on any rank is reported as the verdict
"failed" with that rank's message; the group serves on. A rank that dies or hangs is precfuzz's
to see: it kills the whole group and starts it again.

For the tensor-parallel differential (the operation tp_diff), TPLayer says what the case's
parameters are (names, shapes, how TP splits them, which get weight decay), cuts a rank's shard
and puts the ranks' histories back into precfuzz's outputs (tp_outputs).
"""

import contextlib
import datetime
import os
import sys
import traceback

import precfuzz_kernel as _pk  # takes the standard output before anything can print to it

import numpy as np

_kernels = {}  # variant -> (hello entry, function, combine)


class _Kernel:
    def __init__(self, fn):
        self.fn = fn
        self.combiner = None

    def combine(self, fn):
        """Registers rank 0's function (case, results) -> outputs, results[r] being what the
        kernel function returned on rank r."""
        self.combiner = fn
        return fn

    def __call__(self, *a, **k):
        return self.fn(*a, **k)


def kernel(op, variant, like, summary=None, dtypes=None, accums=None, params=None, faults=None):
    """As precfuzz_kernel.kernel (the hello's fields), for a function that runs on every rank;
    its .combine decorator gives rank 0's function that makes the outputs."""

    def register(fn):
        if variant in _kernels:
            raise ValueError(f"variant {variant!r} registered twice")
        entry = {"op": op, "variant": variant, "like": like}
        for key, v in (("summary", summary), ("dtypes", dtypes), ("accums", accums), ("faults", faults)):
            if v is not None:
                entry[key] = v if key == "summary" else list(v)
        if params is not None:
            entry["params"] = {k: list(v) for k, v in params.items()}
        k = _Kernel(fn)
        _kernels[variant] = (entry, k)
        return k

    return register


def _die_with_precfuzz():
    """A rank ends itself within a second of precfuzz's end ($PRECFUZZ_PID), even if precfuzz
    was killed before it could end the group (it ends it whenever it can)."""
    import threading
    import time

    pid = int(os.environ.get("PRECFUZZ_PID", "0"))
    if pid <= 0:
        return

    def watch():
        while True:
            time.sleep(1)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(3)
            except PermissionError:  # alive, someone else's: not ours to judge
                pass

    threading.Thread(target=watch, name="precfuzz-watch", daemon=True).start()


_group = None


def loopback_only(env):
    """None when env's MASTER_ADDR is 127.0.0.1 and its GLOO_SOCKET_IFNAME is lo, as precfuzz
    sets them; else the line that says what is wrong. A rank group talks over 127.0.0.1 on the
    loopback interface only: an address the rank's own code set (os.environ, a wrapper script)
    is refused before any socket is opened, another loopback address and a name alike (precfuzz
    refuses a command line that sets one before it starts the ranks)."""
    addr = env.get("MASTER_ADDR", "")
    if addr != "127.0.0.1":
        return f"MASTER_ADDR={addr!r}: a rank group talks over 127.0.0.1 on the loopback interface only"
    if env.get("GLOO_SOCKET_IFNAME") != "lo":
        return f"GLOO_SOCKET_IFNAME={env.get('GLOO_SOCKET_IFNAME', '')!r}: a rank group talks over the loopback interface (lo) only"
    return None


def init():
    """Joins this process to the rank group precfuzz started (gloo, env://). Returns
    (rank, world size). Idempotent."""
    global _group
    import torch.distributed as dist

    if _group is None:
        for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            if v not in os.environ:
                raise RuntimeError(f"${v} is not set: start this with precfuzz --kernels ranks:N:CMD")
        wrong = loopback_only(os.environ)
        if wrong:  # before any socket: not a byte to another address
            print(f"precfuzz_ranks: {wrong}", file=sys.stderr)
            sys.exit(2)
        _die_with_precfuzz()
        # a case may take precfuzz long to judge: the ranks wait for the next one for a day
        dist.init_process_group("gloo", timeout=datetime.timedelta(days=1))
        _group = True
    return dist.get_rank(), dist.get_world_size()


def serve():
    """Serves cases until precfuzz closes rank 0's input, then ends the process (status 0)."""
    import torch.distributed as dist

    if not _kernels:
        raise RuntimeError("no kernel registered (@kernel(...) before serve())")
    rank, world = init()
    # PRECFUZZ_PROFILE=FILE: rank 0's cases under cProfile, its statistics written to FILE at the
    # end (python -m pstats FILE): where an adapter's time goes, ranks' start excluded
    prof = None
    if rank == 0 and os.environ.get("PRECFUZZ_PROFILE"):
        import cProfile

        try:  # a path it cannot write is said now, in one line, not after every case has run
            open(os.environ["PRECFUZZ_PROFILE"], "wb").close()
        except OSError as e:
            print(f"PRECFUZZ_PROFILE: cannot write {os.environ['PRECFUZZ_PROFILE']}: {e.strerror}", file=sys.stderr)
            sys.exit(2)
        prof = cProfile.Profile()
        prof.enable()
    ch = None
    if rank == 0:
        ch = _pk._Channel()
        ch.write({"type": "hello", "protocol": _pk.PROTOCOL, "kernels": [e for e, _ in _kernels.values()]})
    while True:
        box = [ch.read() if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        if box[0] is None:
            break
        header, inputs = box[0]
        try:
            case = _pk.Case(header)
            if case.variant not in _kernels:
                raise KeyError(f"no kernel for variant {case.variant!r}")
            mine = ("ok", _kernels[case.variant][1](case, **inputs))
        # the kernel's failure is precfuzz's finding, not the end; BaseException: torch's DCP raises
        # CheckpointException, which is not an Exception
        except BaseException as e:
            if isinstance(e, (SystemExit, KeyboardInterrupt)):
                raise
            traceback.print_exc(file=sys.stderr)
            mine = ("error", f"rank {rank}: {type(e).__name__}: {e}")
        results = [None] * world if rank == 0 else None
        dist.gather_object(mine, results, dst=0)
        if rank != 0:
            continue
        errors = [r[1] for r in results if r[0] == "error"]
        if not errors:
            try:
                k = _kernels[case.variant][1]
                if k.combiner is None:
                    raise RuntimeError(f"{case.variant}: no @{k.fn.__name__}.combine function")
                out = k.combiner(case, [r[1] for r in results])
                ch.write({"type": "result", "id": header["id"]}, {n: _pk._to_numpy(a) for n, a in out.items()})
                continue
            except Exception as e:
                traceback.print_exc(file=sys.stderr)
                errors = [f"rank 0 combining: {type(e).__name__}: {e}"]
        ch.write({"type": "error", "id": header["id"], "message": errors[0]})
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.environ["PRECFUZZ_PROFILE"])
    # every rank has the end: leave at once (a process group torn down while the peer is already
    # gone can abort in gloo, which would print a misleading "Aborted" after precfuzz's result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@contextlib.contextmanager
def checkpoint_dir(group, prefix="precfuzz-ckpt-"):
    """with checkpoint_dir(group) as path: a fresh directory for a round trip's checkpoint,
    made by rank 0 (a member of group) and its name given to every rank of the group; rank 0
    removes it when the block ends, once every rank of the group has left the block."""
    import shutil
    import tempfile

    import torch.distributed as dist

    rank = dist.get_rank()
    box = [tempfile.mkdtemp(prefix=prefix) if rank == 0 else None]
    dist.broadcast_object_list(box, src=0, group=group)
    try:
        yield box[0]
        dist.barrier(group=group)  # every rank has read it before rank 0 removes it
    finally:
        if rank == 0:
            shutil.rmtree(box[0], ignore_errors=True)


def poison(tensors):
    """Every floating-point tensor among these set to NaN (anything else left): the objects that
    saved a checkpoint, so that a run can go on only from the files."""
    import torch

    with torch.no_grad():
        for t in tensors:
            if torch.is_tensor(t) and t.is_floating_point():
                (t.to_local() if hasattr(t, "to_local") else t).fill_(float("nan"))


class switched:
    """with switched(FAULTS, case.fault): the monkeypatches FAULTS[name] ((object, attribute,
    replacement) each) in place for the block, the originals back after; no name: none. A name
    not in FAULTS raises ValueError (precfuzz refuses it first: the hello lists FAULTS)."""

    def __init__(self, faults, name):
        if name and name not in faults:
            raise ValueError(f"no fault {name!r} here ({', '.join(faults)})")
        self.patches = faults.get(name, []) if name else []

    def __enter__(self):
        self.saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in self.patches]
        for obj, attr, new in self.patches:
            setattr(obj, attr, new)

    def __exit__(self, *exc):
        for obj, attr, old in self.saved:
            setattr(obj, attr, old)


# --- the tensor-parallel differential's parameter set (kernels/tp_diff/tp_diff_spec.h) -----------------

REPLICATED, COLUMN, ROW, VOCAB = "replicated", "column-parallel", "row-parallel", "vocab-parallel"


class Block:
    """One parameter: name, shape (rows, cols; a vector has cols 1 and is held 1-D), how TP
    splits it (kind), whether weight decay applies, offset of its first element in the case's
    global order, and the expert it belongs to (None: a dense parameter)."""

    def __init__(self, name, rows, cols, kind, decay, offset, expert=None):
        self.name, self.rows, self.cols, self.kind, self.decay, self.offset = name, rows, cols, kind, decay, offset
        self.expert = expert

    @property
    def size(self):
        return self.rows * self.cols

    @property
    def shape(self):
        return (self.rows,) if self.cols == 1 else (self.rows, self.cols)

    def split(self, tp_rank, tp):
        """(axis, start, stop) of TP rank tp_rank's shard of tp, or None when every rank holds
        all of it. Megatron's splits: column-parallel rows (output features), row-parallel
        columns (input features), vocab-parallel rows, the first ranks taking one more."""
        if tp == 1 or self.kind == REPLICATED:
            return None
        axis, length = (1, self.cols) if self.kind == ROW else (0, self.rows)
        base, extra = divmod(length, tp)
        start = tp_rank * base + min(tp_rank, extra)
        return axis, start, start + base + (1 if tp_rank < extra else 0)

    def shard(self, full, tp_rank, tp):
        """This rank's shard of a full (rows, cols) array, contiguous, in the block's shape."""
        full = np.asarray(full).reshape(self.rows, self.cols)
        sp = self.split(tp_rank, tp)
        if sp is not None:
            axis, a, b = sp
            full = full[a:b] if axis == 0 else full[:, a:b]
        return np.ascontiguousarray(full if self.cols > 1 else full[:, 0])


class TPLayer:
    """The case's parameter set: its transformer layers and embeddings (tp_diff_spec.h's table), its
    dimensions and hyperparameters, the micro-batch gradients of each step."""

    def __init__(self, case):
        self.case = case
        self.steps, h, f, V, seq = (int(x) for x in case.shape)
        p = case.params
        self.mb = int(p["microbatches"])
        self.tied = int(p["tied"]) != 0
        # the second run's layout: TP=tp x DP=dp (x PP=2 when tied); the first is TP=1 x DP=1
        self.tp, self.dp = int(p.get("tp", 2)), int(p.get("dp", 1))
        # 1: the data-parallel reduction in the storage dtype (DeepSpeed's engine's default)
        self.comm = int(p.get("comm", 0))
        # fp16: the loss scale S the micro-batch gradients are scaled by (0: 2^12; dynamic: the first step's)
        self.loss_scale = (p.get("loss_scale") or 2.0 ** 12) if case.dtype == "fp16" else 1.0
        # fp16 with scaler=1: the framework's dynamic scaler from loss_scale, with these settings
        self.dynamic = case.dtype == "fp16" and int(p.get("scaler", 0)) != 0
        self.growth_interval, self.hysteresis = int(p.get("growth_interval", 1000)), int(p.get("hysteresis", 2))
        self.min_loss_scale = float(p.get("min_loss_scale", 1))
        self.max_norm, self.lr, self.wd = p["max_norm"], p["lr"], p["wd"]
        self.betas, self.eps = (p["beta1"], p["beta2"]), p["eps"]
        # with experts=2 an MoE layer's two experts (expert e: exp{e}.fc1.w, exp{e}.fc2.w, split
        # over TP as the dense MLP is); with dp=2 they are expert-parallel: expert e on replica e
        self.experts = int(p.get("experts", 0))
        self.ep = 2 if self.experts == 2 and self.dp == 2 else 1
        # `layers` transformer layers of the same 12 parameters (with more than one, named l0.ln1.w, ...)
        self.layers = int(p.get("layers", 1))
        # resume_at = k > 0: the second run also saved after step k with the adapter's own save
        # code and loaded into fresh objects with its own load code (a kernel that takes resume_at)
        self.resume = int(p.get("resume_at", 0))
        # reshard_at = k > 0: each run saved at its layout after step k and loaded at the other
        self.reshard = int(p.get("reshard_at", 0))
        dense = [("ln1.w", h, 1, REPLICATED, 0), ("ln1.b", h, 1, REPLICATED, 0), ("qkv.w", 3 * h, h, COLUMN, 1),
                 ("qkv.b", 3 * h, 1, COLUMN, 0), ("proj.w", h, h, ROW, 1), ("proj.b", h, 1, REPLICATED, 0),
                 ("ln2.w", h, 1, REPLICATED, 0), ("ln2.b", h, 1, REPLICATED, 0), ("fc1.w", f, h, COLUMN, 1),
                 ("fc1.b", f, 1, COLUMN, 0), ("fc2.w", h, f, ROW, 1), ("fc2.b", h, 1, REPLICATED, 0)]
        table = [((f"l{i}." if self.layers > 1 else "") + name, *rest) for i in range(self.layers) for name, *rest in dense]
        for e in range(self.experts):
            table += [(f"exp{e}.fc1.w", f, h, COLUMN, 1, e), (f"exp{e}.fc2.w", h, f, ROW, 1, e)]
        table += [("pos.w", seq, h, REPLICATED, 1), ("embed.w", V, h, VOCAB, 1)]
        self.blocks, off = [], 0
        for name, rows, cols, kind, decay, *expert in table:
            self.blocks.append(Block(name, rows, cols, kind, decay, off, expert[0] if expert else None))
            off += rows * cols
        self.n = off
        self.head = V * h if self.tied else 0

    def block(self, name):
        """The block of that name."""
        return next(b for b in self.blocks if b.name == name)

    def init(self, init, block):
        """The block's initial fp32 masters, full, as a (rows, cols) array."""
        return np.asarray(init, dtype=np.float32)[block.offset:block.offset + block.size].reshape(block.rows, block.cols)

    def micro_batches(self, replica, dp):
        """The micro-batches data-parallel replica `replica` of `dp` takes: an even share, in order."""
        per = self.mb // dp
        return range(replica * per, (replica + 1) * per)

    def grad(self, grads, step, micro, block):
        """The block's true gradient of micro-batch `micro` in step `step`, full, fp32 (rows, cols)."""
        g = np.asarray(grads, dtype=np.float32).reshape(self.steps, self.mb, self.n + self.head)
        return g[step, micro, block.offset:block.offset + block.size].reshape(block.rows, block.cols)

    def assemble(self, block, shards, tp):
        """The full (steps, 4, rows, cols) history of a block from its TP ranks' shards (a list by
        TP rank, each (steps, 4, *shard shape)); a replicated block is TP rank 0's."""
        S = self.steps
        full = np.zeros((S, 4, block.rows, block.cols), dtype=np.float32)
        for r in range(tp):
            part = np.asarray(shards[r], dtype=np.float32).reshape(S, 4, -1)
            sp = block.split(r, tp)
            if sp is None:
                if r == 0:
                    full[:] = part.reshape(full.shape)
                continue
            axis, a, c = sp
            if axis == 0:
                full[:, :, a:c, :] = part.reshape(S, 4, c - a, block.cols)
            else:
                full[:, :, :, a:c] = part.reshape(S, 4, block.rows, c - a)
        return full

    @staticmethod
    def _copy_check(ref, cpy):
        """(code, difference) per step and element: 0 where master, parameter, m and v of the copy
        are bitwise equal to the reference's, else 1 + the first that differs and cpy - ref in it
        (fp32). ref, cpy: (steps, 4, elements)."""
        differ = ref.view(np.uint32) != cpy.view(np.uint32)
        any_ = differ.any(axis=1)
        q = differ.argmax(axis=1)
        d = (np.take_along_axis(cpy, q[:, None, :], 1) - np.take_along_axis(ref, q[:, None, :], 1))[:, 0, :]
        return np.stack([np.where(any_, 1 + q, 0).astype(np.float32), np.where(any_, d, 0).astype(np.float32)], -1)

    def tp_outputs(self, runs, straight=None):
        """precfuzz's outputs (tp_diff_spec.h's layout) from every rank's history. runs[0] is the first
        run (TP=1), runs[1] the second (TP=tp x DP=dp), each {(dp, pp, tp): (hist, norms)} (or
        {(pp, tp): ...} with one replica) for every rank it had: hist {block name: (steps, 4,
        *shard shape)} of master, parameter, m, v after every step for the blocks the rank holds
        (a second pipeline stage holds the tied embedding alone), norms the gradient norm each
        step reported. With resume_at, runs[1] is the run with the round trip (its row of step k
        the state as loaded), straight the same layout run straight, and each rank's entry
        (hist, norms, state) with state (steps, 5) of its step count, loss scale, growth tracker,
        hysteresis tracker and scaler iteration (0 where it has none): the stage "resume". The copy checks compare, in each replica, every replicated element on TP
        rank 1 with rank 0's copy and the tied embedding on stage 1 with stage 0's, then every
        element of replica 1 with replica 0's, bitwise (but an expert's under EP=2: expert e is
        on replica e alone, and its history comes from there)."""
        S, n = self.steps, self.n
        runs = [{(k if len(k) == 3 else (0,) + tuple(k)): v for k, v in ranks.items()} for ranks in runs]
        norms = np.zeros((2, S, 8), dtype=np.float32)
        out = np.zeros((2, S, 4, n), dtype=np.float32)
        for i, ranks in enumerate(runs):
            DP = 1 + max(d for d, _, _ in ranks)
            PP = 1 + max(pp for _, pp, _ in ranks)
            TP = 1 + max(tp for _, _, tp in ranks)
            for slot in range(8):  # 4 dp + 2 pp + tp; a coordinate the run lacks is taken as 0
                d, pp, tp = slot // 4, slot // 2 % 2, slot % 2
                key = (d if d < DP else 0, pp if pp < PP else 0, tp if tp < TP else 0)
                norms[i, :, slot] = np.asarray(ranks[key][1], dtype=np.float32)
            for b in self.blocks:
                d = b.expert if i == 1 and self.ep == 2 and b.expert is not None else 0  # EP: the expert's replica
                full = self.assemble(b, [ranks[(d, 0, t)][0][b.name] for t in range(TP)], TP)
                out[i, :, :, b.offset:b.offset + b.size] = full.reshape(S, 4, b.size)
        two = runs[1]
        TP = 1 + max(tp for _, _, tp in two)
        checks = []
        for d in range(self.dp):
            if TP == 2:
                for b in self.blocks:  # replicated elements on TP rank 1 against rank 0
                    if b.kind == REPLICATED:
                        ref = np.asarray(two[(d, 0, 0)][0][b.name], dtype=np.float32).reshape(S, 4, b.size)
                        cpy = np.asarray(two[(d, 0, 1)][0][b.name], dtype=np.float32).reshape(S, 4, b.size)
                        checks.append(self._copy_check(ref, cpy))
            if self.tied:  # the tied embedding on stage 1 against stage 0
                e = self.blocks[-1]
                ref = self.assemble(e, [two[(d, 0, t)][0][e.name] for t in range(TP)], TP).reshape(S, 4, e.size)
                cpy = self.assemble(e, [two[(d, 1, t)][0][e.name] for t in range(TP)], TP).reshape(S, 4, e.size)
                checks.append(self._copy_check(ref, cpy))
        for d in range(1, self.dp):  # every element of replica d against replica 0, gathered over TP
            for b in self.blocks:
                if self.ep == 2 and b.expert is not None:  # one replica's expert
                    continue
                ref = self.assemble(b, [two[(0, 0, t)][0][b.name] for t in range(TP)], TP).reshape(S, 4, b.size)
                cpy = self.assemble(b, [two[(d, 0, t)][0][b.name] for t in range(TP)], TP).reshape(S, 4, b.size)
                checks.append(self._copy_check(ref, cpy))
        copies = np.concatenate(checks, axis=1) if checks else np.zeros((S, 0, 2), np.float32)
        outputs = {"copies": copies.reshape(-1), "tp1": out[0].reshape(-1), "tp2": out[1].reshape(-1),
                   "norms": norms.reshape(-1)}
        if self.resume:
            if straight is None:
                raise ValueError("resume_at: tp_outputs needs the run straight beside the resumed one")
            outputs["resume"] = self._resume_check(
                {(k if len(k) == 3 else (0,) + tuple(k)): v for k, v in straight.items()}, runs[1])
        return outputs

    def reshard_splice(self, before, after, to):
        """One run that changed layout after step k (reshard_at), as tp_outputs takes it:
        {rank key in `to`: (hist, norms, state)} in the layout after, its rows before step k
        gathered from the layout before (every block assembled over its TP ranks, replica 0's or,
        for an expert under EP, its own replica's, and cut to each rank's shard after) and from
        step k on its own (the row of step k: as loaded; step k's norm: the one reported before
        the save). before, after: {(dp, pp, tp): (hist, norms, state)} of the ranks that held the
        layout."""
        k = self.reshard
        b_keys, a_keys = sorted(before), sorted(after)
        tp_b, tp_a = 1 + max(t for _, _, t in b_keys), 1 + max(t for _, _, t in a_keys)
        ref = before[b_keys[0]]
        out = {}
        for key in to:
            hist_a, norms_a, state_a = after[key]
            hist = {}
            for name, h in hist_a.items():
                blk = self.block(name)
                # replica 0's, or for an expert under EP the replica that holds it
                d = next(d for d, p, _ in b_keys if p == key[1] and name in before[(d, p, 0)][0])
                full = self.assemble(blk, [before[(d, key[1], t)][0][name] for t in range(tp_b)], tp_b)
                mine = np.array(h, dtype=np.float32, copy=True).reshape(self.steps, 4, -1)
                for s in range(k - 1):
                    for q in range(4):
                        mine[s, q] = blk.shard(full[s, q], key[2], tp_a).reshape(-1)
                hist[name] = mine.reshape(np.shape(h))
            norms = list(ref[1][:k]) + list(norms_a[k:])
            state = np.concatenate([np.asarray(ref[2])[:k - 1], np.asarray(state_a)[k - 1:]])
            out[key] = (hist, norms, state)
        return out

    def global_index(self, block, tp_rank, tp):
        """The case's element numbers of a rank's shard of a block, flat, in the shard's order."""
        full = np.arange(block.offset, block.offset + block.size, dtype=np.int64).reshape(block.rows, block.cols)
        return block.shard(full, tp_rank, tp).reshape(-1)

    def _resume_check(self, straight, resumed):
        """tp_diff_spec.h's stage "resume": per step and element, over every copy in rank order, (code, value
        straight, value resumed) of the first of master, parameter, m, v that differs bitwise
        (code 0: none); then per step and slot (4 dp + 2 pp + tp) the same of the rank's state."""
        S, n = self.steps, self.n
        elem = np.zeros((S, n, 3), dtype=np.float32)
        state = np.zeros((S, 8, 3), dtype=np.float32)
        if set(straight) != set(resumed):
            raise ValueError(f"resume_at: the resumed run has ranks {sorted(resumed)}, the straight one {sorted(straight)}")
        TP = 1 + max(t for _, _, t in straight)
        for key in sorted(straight):  # rank order: (dp PP + pp) TP + tp
            d, pp, t = key
            a, b = straight[key], resumed[key]
            for name, ha in a[0].items():
                blk = self.block(name)
                ref = np.asarray(ha, dtype=np.float32).reshape(S, 4, -1)
                cpy = np.asarray(b[0][name], dtype=np.float32).reshape(S, 4, -1)
                differ = ref.view(np.uint32) != cpy.view(np.uint32)
                q = differ.argmax(axis=1)
                code = np.where(differ.any(axis=1), 1 + q, 0)
                was = np.take_along_axis(ref, q[:, None, :], 1)[:, 0, :]
                now = np.take_along_axis(cpy, q[:, None, :], 1)[:, 0, :]
                idx = self.global_index(blk, t, TP)
                free = elem[:, idx, 0] == 0  # an earlier copy's difference stands
                take = free & (code != 0)
                for j, v in enumerate((code, was, now)):
                    sub = elem[:, idx, j]
                    sub[take] = v[take]
                    elem[:, idx, j] = sub
            sa = np.asarray(a[2] if len(a) > 2 else np.zeros((S, 5)), dtype=np.float64).reshape(S, 5)
            sb = np.asarray(b[2] if len(b) > 2 else np.zeros((S, 5)), dtype=np.float64).reshape(S, 5)
            slot = 4 * d + 2 * pp + t
            for s in range(S):
                diff = np.nonzero(sa[s] != sb[s])[0]
                if diff.size:
                    k = diff[0]
                    state[s, slot] = (1 + k, sa[s, k], sb[s, k])
        return np.concatenate([elem.reshape(-1), state.reshape(-1)])
