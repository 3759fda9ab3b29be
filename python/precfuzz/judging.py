"""precfuzz.judge: tensors a training run produced (torch, numpy, JAX), judged element by element
against the exact result of the operation on the same inputs (precfuzz judge -k)."""

import hashlib
import json
import os
import shlex
import struct

import numpy as np

from . import _binary
from ._files import write_atomic
from .checking import Hazard, findings_dir
from .protocol import npy_bytes, to_numpy

_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_ST_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}


def dtype_name(a):
    """fp32, fp16 or bf16 for an array's dtype; a TypeError for any other."""
    n = a.dtype.name
    if n not in _DTYPES:
        raise TypeError(f"a {a.dtype} tensor: precfuzz judges float32, float16 and bfloat16 tensors")
    return _DTYPES[n]


def _as_input(name, x):
    a = np.ascontiguousarray(to_numpy(x))
    if a.dtype.kind in "iub":  # class indices (cross-entropy's target): exact in fp32 below 2^24
        f = a.astype(np.float32)
        if not np.array_equal(f.astype(a.dtype), a):
            raise ValueError(f"input {name}: integers beyond fp32's exact range")
        a = f
    dtype_name(a)
    return a


def safetensors_bytes(tensors):
    """The safetensors format (a JSON header, then the tensors' bytes), for several stages."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": _ST_DTYPES[a.dtype.name], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)




def judge_files(op, dtype, inputs_at, out_path, case_path, like=None, ulps=None, accum=None, params=None,
                shape=None):
    """precfuzz judge -k on tensor files ({input name: path}, the outputs' file); writes the case
    file and returns (precfuzz's JSON, the replay command as a list)."""
    args = ["judge", "-k", op, "-t", dtype, "--json"]
    if like:  # the case's variant, and its contract as the bound
        args += ["-v", like, "--like", like]
    if ulps is not None:
        args += ["--ulps", str(ulps)]
    if accum:
        args += ["-a", accum]
    if shape is not None:
        args += ["--shape", "x".join(str(d) for d in shape)]
    for name, v in (params or {}).items():
        args += ["--param", f"{name}={float(v).hex() if isinstance(v, float) else v}"]
    for n, path in inputs_at.items():
        args += ["--input", f"{n}:file={path}"]
    args += ["--outputs", out_path, "--save-case", case_path]
    p = _binary.run(args)
    cmd = [_binary.binary(), "judge", case_path, "--outputs", out_path]
    if like:
        cmd += ["--like", like]
    elif ulps is not None:
        cmd += ["--ulps", str(ulps)]
    return json.loads(p.stdout), cmd


class Judgement:
    """precfuzz's verdict on given outputs: verdict (ok, inaccurate, overflow, ...), finding
    (the contract, or the ulps bound, broken), judged (elements), counts per verdict, max_ulps, max_rel, detail
    (the first bad element), hazards, the case file and outputs kept, and the replay line."""

    def __init__(self, op, out, case_file, outputs_file, replay):
        self.op = op
        self.verdict = out["verdict"]
        self.finding = bool(out.get("finding"))
        self.counts = out.get("counts", {})  # of the elements judged (stages not given are not)
        self.judged = out.get("judged_elements")
        self.max_ulps = out.get("max_ulps")
        self.max_rel = out.get("max_rel")
        self.detail = out.get("detail", "")
        self.in_domain = out.get("in_domain", True)
        case = out["case"]
        self.variant = case["variant"]
        self.hazards = [Hazard(op, case["variant"], case, h, case_file, replay) for h in out.get("hazards", [])]
        self.case_file, self.outputs_file, self.replay = case_file, outputs_file, replay
        self.elements = out.get("elements", [])
        self.raw = out

    @property
    def ok(self):
        return not self.finding

    def __str__(self):
        s = f"{self.op} {self.verdict}: {self.detail}" if self.detail else f"{self.op} {self.verdict}"
        s += f"\n  max ulps {self.max_ulps}, max rel error {self.max_rel:.3g}" if self.max_rel is not None else ""
        for h in self.hazards:
            s += f"\n  HAZARD {h.kind}: {h.note}"
        if self.replay:
            s += f"\n  reproduce with: {self.replay}"
        return s

    __repr__ = __str__


def judge(op, inputs, outputs, *, dtype=None, like=None, ulps=None, accum=None, params=None, shape=None,
          keep="findings", findings=None):
    """Judges `outputs` (an array, or {stage: array} for operations of several outputs) as
    operation `op` on `inputs` ({name: array}, named as `precfuzz list` names them), against the
    correctly rounded result within `ulps` (default 1), or against the contract of the built-in
    variant `like` when one is named. Arrays: torch tensors (bf16 included), numpy (bf16 as
    ml_dtypes.bfloat16) or JAX. dtype defaults to the first input's. params: {name: value} as
    run's --param. The inputs, outputs and case file are kept under `findings`
    (.precfuzz/findings) when something was found (keep="findings"), always (keep="always") or
    never (keep="never"); the replay line names them."""
    if not inputs:
        raise ValueError("inputs: {name: tensor}, at least one")
    ins = {n: _as_input(n, x) for n, x in inputs.items()}
    if isinstance(outputs, dict):
        outs = {n: np.ascontiguousarray(to_numpy(y)) for n, y in outputs.items()}
    else:
        outs = {"output": np.ascontiguousarray(to_numpy(outputs))}
    for n, y in outs.items():
        dtype_name(y)
    dtype = dtype or dtype_name(next(iter(ins.values())))
    if keep not in ("findings", "always", "never"):
        raise ValueError(f"keep={keep!r}: 'findings', 'always' or 'never'")

    h = hashlib.sha256()
    for d in (ins, outs):
        for n, a in sorted(d.items()):
            h.update(n.encode() + a.dtype.name.encode() + repr(a.shape).encode() + a.tobytes())
    h.update(json.dumps([op, dtype, like, ulps, accum, params, shape], default=str).encode())
    where = os.path.join(findings_dir(findings), f"judge-{op}-{h.hexdigest()[:12]}")
    os.makedirs(where, exist_ok=True)
    inputs_at = {}
    for n, a in ins.items():
        inputs_at[n] = os.path.join(where, f"{n}.npy")
        write_atomic(inputs_at[n], npy_bytes(a))
    if len(outs) == 1 and "output" in outs:
        out_path = os.path.join(where, "outputs.npy")
        write_atomic(out_path, npy_bytes(outs["output"]))
    else:
        out_path = os.path.join(where, "outputs.safetensors")
        write_atomic(out_path, safetensors_bytes(outs))
    case_path = os.path.join(where, "case.json")
    try:
        out, cmd = judge_files(op, dtype, inputs_at, out_path, case_path, like=like, ulps=ulps, accum=accum,
                               params=params, shape=shape)
    except Exception:
        if keep != "always":
            _remove_dir(where)
        raise
    found = bool(out.get("finding")) or bool(out.get("hazards"))
    kept = keep == "always" or (keep == "findings" and found)
    replay = " ".join(shlex.quote(c) for c in cmd) if kept else None
    j = Judgement(op, out, case_path if kept else None, out_path if kept else None, replay)
    if not kept:
        _remove_dir(where)
    return j


def _remove_dir(where):
    for f in os.listdir(where):
        os.unlink(os.path.join(where, f))
    os.rmdir(where)
