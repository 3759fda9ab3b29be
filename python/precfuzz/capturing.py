"""precfuzz.capture: the ops precfuzz knows, recorded with their tensors during a real PyTorch
step, to be judged exactly afterwards.

    with precfuzz.capture("captures/step-1200") as cap:
        loss = model(batch)             # softmax, F.cross_entropy, F.scaled_dot_product_attention
        loss.backward()
        opt.step()                      # torch.optim.Adam / AdamW
    for j in cap.judge():               # or later: precfuzz.judge_capture("captures/step-1200")
        print(j.op, j.verdict, j.max_ulps, j.hazards)

What is recorded, and by which contract it is judged (the variant whose contract PyTorch's
kernel claims in precfuzz, docs/own-kernels.md):

| PyTorch call | how it is seen | case | judged by |
|---|---|---|---|
| softmax over the last dimension (torch.softmax, F.softmax, Tensor.softmax, nn.Softmax) | aten._softmax (a TorchDispatchMode) | softmax, rows x cols | softmax/safe |
| F.cross_entropy, nn.CrossEntropyLoss: 2-D logits, class indices, no weight | the function, wrapped | cross_entropy: the reduced loss (mean, sum) or the per-row losses (none) | cross_entropy/logsoftmax-cpu (CPU), logsoftmax (CUDA) |
| F.scaled_dot_product_attention: 4-D, no mask tensor (is_causal or none), no dropout, the default scale, as many key as query heads | the function, wrapped | attention: its output | attention/flash |
| torch.optim.Adam (no weight decay) and AdamW: the step of every parameter with a gradient | the optimizer step hooks | adam: m, v, param | adam/torch, torch-foreach or torch-fused(-cuda), as torch chose |
| F.layer_norm, nn.LayerNorm on the CPU, with weight and bias (in the input's dtype or fp32) | aten.native_layer_norm (the TorchDispatchMode) | layernorm: mean, rstd, y | layernorm/torch |
| F.rms_norm, nn.RMSNorm on the CPU (a weight in the input's dtype or fp32, or none) | the function, wrapped | rmsnorm: y | rmsnorm/torch |
| LayerNorm's backward on the CPU (of a forward recorded above: its eps) | aten.native_layer_norm_backward (the TorchDispatchMode) | layernorm_bwd: dx, dgamma, dbeta | layernorm_bwd/torch |

Anything else of these calls (a softmax over another dimension, a class-probability target, a
mask tensor, amsgrad, ...) is not recorded, and `skipped` says what and why: nothing is judged
by a contract it does not have. `limit` records per op (default 32) and `max_elements` per
tensor (default 2^22) keep a step's capture to what judging can afford; the rest is counted in
`skipped` too.
"""

import json
import math
import os
import shlex

import numpy as np

from ._files import write_atomic, write_json
from .judging import Judgement, judge_files, safetensors_bytes
from .protocol import from_torch, npy_bytes

_FLOAT_NAMES = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}


def _dtype(t):
    return _FLOAT_NAMES.get(str(t.dtype))




class capture:
    """A context manager recording the known ops of the PyTorch code it runs around (see the
    module's table) into `path` (made if missing; must be empty): a directory per record with
    its input tensors (.npy), its outputs (.npy, or .safetensors by stage) and record.json, and
    capture.json listing them and what was skipped."""

    def __init__(self, path, ops=("softmax", "cross_entropy", "attention", "adam", "layernorm", "layernorm_bwd", "rmsnorm"),
                 limit=32,
                 max_elements=1 << 22):
        import torch  # noqa: F401  (capture is for PyTorch code)

        known = {"softmax", "cross_entropy", "attention", "adam", "layernorm", "layernorm_bwd", "rmsnorm"}
        bad = set(ops) - known
        if bad:
            raise ValueError(f"capture: no op {sorted(bad)[0]!r} (it records {', '.join(sorted(known))})")
        for name, v in (("limit", limit), ("max_elements", max_elements)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"capture: {name}={v!r}: an integer >= 1")
        self.path = os.path.abspath(path)
        if os.path.exists(self.path) and (not os.path.isdir(self.path) or os.listdir(self.path)):
            raise ValueError(f"capture: {self.path} exists and is not an empty directory")
        self.ops, self.limit, self.max_elements = set(ops), limit, max_elements
        self.records = []  # dicts as in record.json
        self.skipped = []  # (op, why)
        self._count = {}
        self._inside = 0  # in a wrapped call: its own inner softmax is not a separate record
        self._ln_eps = {}  # a LayerNorm forward's saved rstd (its storage) -> its eps, for the backward
        self._undo = []

    # ---- recording -----------------------------------------------------------------------

    def _skip(self, op, why):
        self.skipped.append((op, why))

    def _room(self, op, tensors):
        if self._count.get(op, 0) >= self.limit:
            self._skip(op, f"more than limit={self.limit} records")
            return False
        big = max(t.numel() for t in tensors)
        if big > self.max_elements:
            self._skip(op, f"a tensor of {big} elements (max_elements={self.max_elements})")
            return False
        self._count[op] = self._count.get(op, 0) + 1  # taken now: an optimizer's are recorded after its step
        return True

    def _record(self, op, like, dtype, inputs, outputs, params, call, shape=None):
        """inputs {name: tensor}, outputs {stage: tensor} (one "output" for one stage)."""
        k = len(self.records)
        d = os.path.join(self.path, f"{k:04d}-{op}")
        os.makedirs(d)
        rec = {"op": op, "like": like, "dtype": dtype, "params": params, "call": call, "inputs": {}}
        if shape is not None:
            rec["shape"] = list(shape)
        for n, t in inputs.items():
            a = from_torch(t)
            if a.dtype.kind in "iu":
                a = a.astype(np.float32)  # class indices, exact below 2^24 (checked by the caller)
            rec["inputs"][n] = os.path.join(d, f"{n}.npy")
            write_atomic(rec["inputs"][n], npy_bytes(np.ascontiguousarray(a)))
        outs = {n: np.ascontiguousarray(from_torch(t)) for n, t in outputs.items()}
        if list(outs) == ["output"]:
            rec["outputs"] = os.path.join(d, "outputs.npy")
            write_atomic(rec["outputs"], npy_bytes(outs["output"]))
        else:
            rec["outputs"] = os.path.join(d, "outputs.safetensors")
            write_atomic(rec["outputs"], safetensors_bytes(outs))
        rec["case"] = os.path.join(d, "case.json")  # written when judged
        write_json(os.path.join(d, "record.json"), rec)
        self.records.append(rec)

    def _softmax(self, x, dim, half_to_float, y):
        if self._inside or "softmax" not in self.ops:
            return
        dt = _dtype(x)
        if dim % max(x.dim(), 1) != x.dim() - 1 or half_to_float or dt is None or x.dim() == 0:
            self._skip("softmax", f"softmax over dimension {dim} of a {x.dim()}-d {x.dtype} tensor"
                       f"{' to fp32' if half_to_float else ''}: precfuzz's is over the last, in the input's dtype")
            return
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        if not rows or not cols:
            self._skip("softmax", "an empty tensor")
            return
        if not bool(x.isfinite().all()):
            self._skip("softmax", "infinite or NaN logits (a mask written into them): precfuzz's softmax masks by parameter")
            return
        if not self._room("softmax", [x]):
            return
        self._record("softmax", "safe", dt, {"x": x.reshape(rows, cols)}, {"output": y.reshape(rows, cols)},
                     {"mask": "none"}, f"softmax over the last dimension of {tuple(x.shape)}", shape=(rows, cols))

    def _cross_entropy(self, orig, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                       reduction="mean", label_smoothing=0.0):
        import torch

        out = orig(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        if "cross_entropy" not in self.ops:
            return out
        dt = _dtype(input)
        why = None
        if size_average is not None or reduce is not None:
            why = "the deprecated size_average/reduce arguments"
        elif weight is not None:
            why = "a class weight (precfuzz's cross-entropy has none)"
        elif input.dim() != 2 or target.dim() != 1 or target.dtype not in (torch.int64, torch.int32):
            why = f"logits of {input.dim()} dimensions or a target of probabilities (2-d logits and class indices only)"
        elif dt is None:
            why = f"logits of {input.dtype}"
        elif input.shape[0] >= 1 << 24 or (target.numel() and int(target.abs().max()) >= 1 << 24):
            why = "class indices beyond fp32's exact range"
        elif not bool(input.isfinite().all()):
            why = "infinite or NaN logits"
        if why:
            self._skip("cross_entropy", why)
            return out
        if not self._room("cross_entropy", [input]):
            return out
        like = "logsoftmax" if input.device.type == "cuda" else "logsoftmax-cpu"
        stage = "loss" if reduction == "none" else "reduced"
        y = out.detach().reshape(-1)
        self._record("cross_entropy", like, dt, {"logits": input.detach(), "target": target},
                     {stage: y}, {"reduction": reduction, "ignore_index": int(ignore_index),
                                  "label_smoothing": float(label_smoothing)},
                     f"F.cross_entropy(reduction={reduction!r}) on {tuple(input.shape)} logits")
        return out

    def _sdpa(self, orig, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, **kw):
        out = orig(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                   enable_gqa=enable_gqa, **kw)
        if "attention" not in self.ops:
            return out
        why = None
        if attn_mask is not None:
            why = "a mask tensor (precfuzz's attention masks by parameter: is_causal or none)"
        elif dropout_p:
            why = "dropout"
        elif q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or k.shape[1] != q.shape[1] or v.shape != k.shape:
            why = "not 4-d (batch, heads, length, head_dim) with as many key and value heads as query heads"
        elif v.shape[-1] != q.shape[-1] or k.shape[-1] != q.shape[-1]:
            why = "a value head dimension other than the query's"
        elif scale is not None and scale != 1 / math.sqrt(q.shape[-1]):
            why = f"scale {scale} (precfuzz's attention scales by 1/sqrt(head_dim))"
        elif _dtype(q) is None or not (q.dtype == k.dtype == v.dtype):
            why = f"{q.dtype}, {k.dtype}, {v.dtype} inputs"
        elif not all(bool(t.isfinite().all()) for t in (q, k, v)):
            why = "infinite or NaN inputs"
        if why:
            self._skip("attention", why)
            return out
        if not self._room("attention", [q, k, v]):
            return out
        b, h, lq, d = q.shape
        lk = k.shape[2]
        self._record("attention", "flash", _dtype(q), {"q": q.detach(), "k": k.detach(), "v": v.detach()},
                     {"output": out.detach()}, {"mask": "causal-top-left" if is_causal else "none"},
                     f"F.scaled_dot_product_attention(is_causal={is_causal}) on {tuple(q.shape)}",
                     shape=(b, h, lq, lk, d))
        return out

    def _norm_checks(self, op, x, normalized_shape, weights):
        """(rows, cols, the weights' parameter) or None with the reason skipped."""
        dt = _dtype(x)
        shape = tuple(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else (int(normalized_shape),)
        ws = [w for w in weights if w is not None]
        why = None
        if x.device.type != "cpu":
            why = f"on {x.device.type}: precfuzz emulates PyTorch's CPU kernel only"
        elif dt is None:
            why = f"an input of {x.dtype}"
        elif len(shape) < 1 or tuple(x.shape[x.dim() - len(shape):]) != shape or x.numel() == 0:
            why = f"normalized_shape {shape} of a {tuple(x.shape)} input"
        elif len({w.dtype for w in ws}) > 1 or any(_dtype(w) not in (dt, "fp32") for w in ws):
            why = "weights of another dtype than the input's or fp32 (or two different ones)"
        elif not bool(x.isfinite().all()) or not all(bool(w.isfinite().all()) for w in ws):
            why = "infinite or NaN inputs"
        if why:
            self._skip(op, why)
            return None
        cols = math.prod(shape)
        return x.numel() // cols, cols, "fp32" if ws and _dtype(ws[0]) == "fp32" and dt != "fp32" else "storage"

    def _layer_norm(self, x, normalized_shape, weight, bias, eps, out):
        import torch

        if out[2].numel():  # the backward gets rstd, not eps: remembered by the tensor it saves
            self._ln_eps.pop(out[2].data_ptr(), None)
            self._ln_eps[out[2].data_ptr()] = eps
            while len(self._ln_eps) > 4096:  # the oldest forwards' (their backward long run, or never)
                del self._ln_eps[next(iter(self._ln_eps))]
        if "layernorm" not in self.ops:
            return
        if weight is None or bias is None:
            self._skip("layernorm", "no weight or no bias (elementwise_affine=False): PyTorch runs another loop there, "
                       "which layernorm/torch does not emulate")
            return
        got = self._norm_checks("layernorm", x, normalized_shape, [weight, bias])
        if got is None or not self._room("layernorm", [x]):
            return
        rows, cols, weights = got
        y, mean, rstd = out
        with torch.no_grad():
            self._record("layernorm", "torch", _dtype(x),
                         {"x": x.detach().reshape(rows, cols), "gamma": weight.detach().reshape(cols),
                          "beta": bias.detach().reshape(cols)},
                         {"mean": mean.detach().reshape(-1), "rstd": rstd.detach().reshape(-1),
                          "y": y.detach().reshape(rows, cols)},
                         {"eps": float(np.float32(eps)), "weights": weights},  # the kernel holds eps in fp32
                         f"F.layer_norm over the last {cols} of {tuple(x.shape)}", shape=(rows, cols))

    def _layer_norm_bwd(self, dy, x, normalized_shape, mean, rstd, weight, bias, mask, out):
        import torch

        if "layernorm_bwd" not in self.ops:
            return
        why = None
        if weight is None or bias is None:
            why = "no weight or no bias (elementwise_affine=False)"
        elif not all(mask):
            why = "not every gradient asked for (dx, dgamma and dbeta)"
        elif rstd.numel() == 0 or rstd.data_ptr() not in self._ln_eps:
            why = "its forward was not seen under the capture (eps unknown)"
        elif dy.dtype != x.dtype or not bool(dy.isfinite().all()):
            why = "an upstream gradient of another dtype than the input's, or not finite"
        if why:
            self._skip("layernorm_bwd", why)
            return
        got = self._norm_checks("layernorm_bwd", x, normalized_shape, [weight, bias])
        if got is None or not self._room("layernorm_bwd", [x, dy]):
            return
        rows, cols, weights = got
        dx, dgamma, dbeta = out
        eps = self._ln_eps[rstd.data_ptr()]
        with torch.no_grad():
            self._record("layernorm_bwd", "torch", _dtype(x),
                         {"x": x.detach().reshape(rows, cols), "dy": dy.detach().reshape(rows, cols),
                          "gamma": weight.detach().reshape(cols)},
                         {"dx": dx.detach().reshape(rows, cols), "dgamma": dgamma.detach().reshape(cols),
                          "dbeta": dbeta.detach().reshape(cols)},
                         # each thread sums its rows' dgamma and dbeta in its own buffer
                         {"eps": float(np.float32(eps)), "weights": weights, "blocks": torch.get_num_threads()},
                         f"LayerNorm's backward over the last {cols} of {tuple(x.shape)}", shape=(rows, cols))

    def _rms_norm(self, orig, input, normalized_shape, weight=None, eps=None):
        import torch

        out = orig(input, normalized_shape, weight, eps)
        if "rmsnorm" not in self.ops:
            return out
        got = self._norm_checks("rmsnorm", input, normalized_shape, [weight])
        if got is None or not self._room("rmsnorm", [input]):
            return out
        rows, cols, weights = got
        # eps=None is the fp32 epsilon (the composite computes in fp32); the kernel holds eps in fp32
        e = float(np.float32(torch.finfo(torch.float32).eps if eps is None else eps))
        with torch.no_grad():
            g = weight.detach().reshape(cols) if weight is not None else torch.ones(cols, dtype=input.dtype)
            self._record("rmsnorm", "torch", _dtype(input), {"x": input.detach().reshape(rows, cols), "gamma": g},
                         {"y": out.detach().reshape(rows, cols)}, {"eps": e, "weights": weights},
                         f"F.rms_norm over the last {cols} of {tuple(input.shape)}", shape=(rows, cols))
        return out

    def _adam_pre(self, opt, args, kwargs):
        import torch
        from torch.optim.optimizer import _default_to_fused_or_foreach

        self._adam_before = []
        if "adam" not in self.ops or not isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
            return
        if getattr(opt, "grad_scale", None) is not None or getattr(opt, "found_inf", None) is not None:
            self._skip("adam", "a step under GradScaler's grad_scale/found_inf")
            return
        for g in opt.param_groups:
            name = type(opt).__name__
            if g.get("amsgrad") or g.get("maximize") or g.get("capturable") or g.get("differentiable"):
                self._skip("adam", f"{name} with amsgrad, maximize, capturable or differentiable")
                continue
            if isinstance(opt, torch.optim.Adam) and not isinstance(opt, torch.optim.AdamW) and g["weight_decay"] \
                    and not g.get("decoupled_weight_decay"):
                self._skip("adam", "Adam with weight decay (L2: added to the gradient), which precfuzz's torch variants do not take")
                continue
            ps = [p for p in g["params"] if p.grad is not None]
            if not ps:
                continue
            fused, foreach = g.get("fused"), g.get("foreach")
            if fused is None and foreach is None:
                fused, foreach = _default_to_fused_or_foreach(ps, False, False)
            for p in ps:
                dt = _dtype(p)
                if dt is None or p.grad.dtype != p.dtype or p.grad.is_sparse:
                    self._skip("adam", f"a {p.dtype} parameter with a {p.grad.dtype} gradient")
                    continue
                if not self._room("adam", [p]):
                    continue
                st = opt.state.get(p, {})
                step = float(st["step"]) if "step" in st else 0.0
                if "exp_avg" in st:
                    m, v = st["exp_avg"].detach().clone(), st["exp_avg_sq"].detach().clone()
                else:
                    m, v = torch.zeros_like(p), torch.zeros_like(p)
                if fused:
                    like = "torch-fused-cuda" if p.device.type == "cuda" else "torch-fused"
                else:
                    like = "torch-foreach" if foreach else "torch"
                lr = float(g["lr"])
                b1, b2 = (float(b) for b in g["betas"])
                params = {"lr": lr, "beta1": b1, "beta2": b2, "eps": float(g["eps"]),
                          "wd": float(g["weight_decay"]), "step": int(step) + 1}
                self._adam_before.append((p, like, dt, p.detach().clone(), p.grad.detach().clone(), m, v, params,
                                          f"{name}.step (foreach={bool(foreach)}, fused={bool(fused)}) on a "
                                          f"{tuple(p.shape)} parameter"))

    def _adam_post(self, opt, args, kwargs):
        for p, like, dt, p0, g, m, v, params, call in getattr(self, "_adam_before", []):
            st = opt.state[p]
            self._record("adam", like, dt, {"p": p0.reshape(-1), "g": g.reshape(-1), "m": m.reshape(-1),
                                            "v": v.reshape(-1)},
                         {"m": st["exp_avg"].detach().reshape(-1), "v": st["exp_avg_sq"].detach().reshape(-1),
                          "param": p.detach().reshape(-1)}, params, call)
        self._adam_before = []

    # ---- the context -----------------------------------------------------------------------

    def __enter__(self):
        import torch
        import torch.nn.functional as F
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        from torch.utils._python_dispatch import TorchDispatchMode

        os.makedirs(self.path, exist_ok=True)
        cap = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if func is torch.ops.aten._softmax.default:
                    cap._softmax(args[0], args[1], args[2], out)
                elif func is torch.ops.aten.native_layer_norm.default and not cap._inside:
                    cap._layer_norm(args[0], args[1], args[2], args[3], args[4], out)
                elif func is torch.ops.aten.native_layer_norm_backward.default and not cap._inside:
                    cap._layer_norm_bwd(*args[:8], out)
                return out

        def wrap(mod, name, handler):
            orig = getattr(mod, name)

            def wrapped(*a, **kw):
                self._inside += 1
                try:
                    return handler(orig, *a, **kw)
                finally:
                    self._inside -= 1

            setattr(mod, name, wrapped)
            self._undo.append(lambda: setattr(mod, name, orig))

        wrap(F, "cross_entropy", self._cross_entropy)
        wrap(F, "scaled_dot_product_attention", self._sdpa)
        wrap(F, "rms_norm", self._rms_norm)
        h1 = register_optimizer_step_pre_hook(self._adam_pre)
        h2 = register_optimizer_step_post_hook(self._adam_post)
        self._undo += [h1.remove, h2.remove]
        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        for undo in reversed(self._undo):
            undo()
        self._undo = []
        man = {"format": "precfuzz-capture/1", "records": self.records,
               "skipped": [{"op": op, "why": why} for op, why in self.skipped]}
        write_json(os.path.join(self.path, "capture.json"), man)
        return False

    def judge(self, ulps=None):
        """Every record judged (judge_capture on this capture)."""
        return judge_capture(self.path, ulps=ulps)


def judge_capture(path, ulps=None):
    """The records of a capture directory, each judged by its contract (or, with ulps, against
    the correctly rounded result within ulps); a list of Judgement, in the order recorded,
    each with `call` (what PyTorch call it was) and the replay line of its case."""
    try:
        with open(os.path.join(path, "capture.json")) as f:
            man = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}/capture.json: {e}") from None
    if not isinstance(man, dict) or man.get("format") != "precfuzz-capture/1":
        fmt = man.get("format") if isinstance(man, dict) else None
        raise ValueError(f"{path}: not a precfuzz capture (format {fmt!r})")
    records = man.get("records")
    if not isinstance(records, list):
        raise ValueError(f"{path}/capture.json: records: not a list")
    fields = {"op": str, "like": str, "dtype": str, "params": dict, "inputs": dict, "outputs": str, "case": str,
              "call": str}
    for k, rec in enumerate(records):
        for name, kind in fields.items():
            if not isinstance(rec, dict) or not isinstance(rec.get(name), kind):
                raise ValueError(f"{path}/capture.json: records[{k}].{name}: missing or not a {kind.__name__}")
    out = []
    for rec in records:
        like = None if ulps is not None else rec["like"]
        res, cmd = judge_files(rec["op"], rec["dtype"], rec["inputs"], rec["outputs"], rec["case"], like=like, ulps=ulps,
                               params=rec["params"], shape=rec.get("shape"))
        j = Judgement(rec["op"], res, rec["case"], rec["outputs"], " ".join(shlex.quote(c) for c in cmd))
        j.call = rec["call"]
        out.append(j)
    return out
