"""precfuzz's checkpoint format (docs/checkpoint.md) for Python code: read a checkpoint that
precfuzz kept (diff-tp --save-checkpoint), write one for diff-tp --checkpoint.

A checkpoint is a directory holding checkpoint.json and rank-R.safetensors per rank. Read
strictly, as precfuzz reads it: anything else is a ValueError naming the file, rank and tensor.
Written whole or not at all: into DIR.partial, renamed to DIR, which must not exist. numpy only
(safetensors' own package is not needed: the format is an 8-byte header length, a JSON header
and the raw little-endian data).

    import precfuzz_checkpoint as pc
    ck = pc.read("ck/tp2-dp1")          # {"writer", "step", "ranks": [{"numbers", "tensors"}]}
    master = ck["ranks"][0]["tensors"]["master"]          # float32 values
    pc.write("mine", ck["step"], "my-converter", ranks)    # ranks as read gives them

A tensor is (dtype, values): dtype "fp32", "fp16" or "bf16", values a 1-D array whose every
value the dtype holds (a bf16 tensor's values as float32). read gives them so; write takes them
so, or a float32 array for fp32.
"""
import json
import os
import shutil
import struct

import numpy as np

FORMAT = "precfuzz-checkpoint/1"
_ST = {"fp32": "F32", "fp16": "F16", "bf16": "BF16"}
_PF = {v: k for k, v in _ST.items()}
_WIDTH = {"fp32": 4, "fp16": 2, "bf16": 2}


def _decode(dtype, raw):
    if dtype == "fp32":
        return np.frombuffer(raw, "<f4").astype(np.float32)
    if dtype == "fp16":
        return np.frombuffer(raw, "<f2").astype(np.float32)
    bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
    return bits.view(np.float32)


def _encode(dtype, values, what):
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if dtype == "fp32":
        out = v.astype("<f4")
        back = out.astype(np.float64)
    elif dtype == "fp16":
        out = v.astype("<f2")
        back = out.astype(np.float64)
    else:
        f = v.astype(np.float32)
        out = (f.view(np.uint32) >> 16).astype("<u2")
        back = (out.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    same = (back == v) | (np.isnan(back) & np.isnan(v))
    if not same.all():
        i = int(np.argmin(same))
        raise ValueError(f"{what}: element {i} ({v[i]!r}) is not a {dtype} value")
    return out.tobytes()


def read(path):
    """The checkpoint in directory path: {"writer", "step", "ranks": [{"numbers": {name: float},
    "tensors": {name: (dtype, float32 array)}}]}."""
    meta = os.path.join(path, "checkpoint.json")
    try:
        with open(meta) as f:
            root = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{meta}: {e}") from None
    if not isinstance(root, dict) or set(root) != {"format", "writer", "step", "ranks"}:
        raise ValueError(f"{meta}: it holds exactly format, writer, step and ranks")
    if root["format"] != FORMAT:
        raise ValueError(f"{meta}: format {root['format']!r} is not {FORMAT}")
    step = root["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"{meta}: step {step!r} is not a count of steps")
    if not isinstance(root["writer"], str) or not isinstance(root["ranks"], list) or not root["ranks"]:
        raise ValueError(f"{meta}: writer must be a string, ranks a list of one rank or more")
    ranks = []
    for r, jr in enumerate(root["ranks"]):
        if not isinstance(jr, dict) or set(jr) != {"file", "numbers", "tensors"}:
            raise ValueError(f"{meta}: rank {r} holds exactly file, numbers and tensors")
        if jr["file"] != f"rank-{r}.safetensors":
            raise ValueError(f"{meta}: rank {r}'s file is {jr['file']!r}, not rank-{r}.safetensors")
        numbers = {}
        for name, hexv in jr["numbers"].items():
            try:
                numbers[name] = float.fromhex(hexv)
            except (TypeError, ValueError):
                raise ValueError(f"{meta}: rank {r}: number {name} is {hexv!r}, not a hex float") from None
        file = os.path.join(path, jr["file"])
        try:
            with open(file, "rb") as f:
                blob = f.read()
        except OSError as e:
            raise ValueError(f"{file}: {e}") from None
        if len(blob) < 8 or struct.unpack("<Q", blob[:8])[0] > len(blob) - 8:
            raise ValueError(f"{file}: truncated")
        n = struct.unpack("<Q", blob[:8])[0]
        try:
            header = json.loads(blob[8:8 + n])
        except ValueError as e:
            raise ValueError(f"{file}: header: {e}") from None
        data = blob[8 + n:]
        tensors = {}
        for name, decl in jr["tensors"].items():
            if not isinstance(decl, dict) or set(decl) != {"dtype", "n"} or decl["dtype"] not in _ST:
                raise ValueError(f"{meta}: rank {r}: tensor {name} must be {{dtype: fp32|fp16|bf16, n}}")
            t = header.get(name)
            if t is None:
                raise ValueError(f"{file}: tensor {name} missing")
            if _PF.get(t.get("dtype")) != decl["dtype"] or t.get("shape") != [decl["n"]]:
                raise ValueError(f"{file}: tensor {name} is {t.get('dtype')} {t.get('shape')}, declared "
                                 f"{decl['dtype']} [{decl['n']}]")
            a, z = t["data_offsets"]
            if not 0 <= a <= z <= len(data) or z - a != decl["n"] * _WIDTH[decl["dtype"]]:
                raise ValueError(f"{file}: tensor {name}: its data is truncated or of another length")
            tensors[name] = (decl["dtype"], _decode(decl["dtype"], data[a:z]))
        ranks.append({"numbers": numbers, "tensors": tensors})
    return {"writer": root["writer"], "step": step, "ranks": ranks}


def write(path, step, writer, ranks):
    """A checkpoint in directory path (which must not exist): step, writer, and per rank
    {"numbers": {name: float}, "tensors": {name: (dtype, values) or float32 array}}."""
    if os.path.lexists(path):
        raise ValueError(f"{path}: already exists (a checkpoint is never written over)")
    tmp = path + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        meta = {"format": FORMAT, "writer": str(writer), "step": int(step), "ranks": []}
        for r, rank in enumerate(ranks):
            header, blobs, off, decls = {}, [], 0, {}
            for name, t in rank["tensors"].items():
                dtype, values = t if isinstance(t, tuple) else ("fp32", t)
                if dtype not in _ST:
                    raise ValueError(f"rank {r}: tensor {name}: dtype {dtype!r} is not fp32, fp16 or bf16")
                raw = _encode(dtype, values, f"rank {r}: tensor {name}")
                count = len(raw) // _WIDTH[dtype]
                header[name] = {"dtype": _ST[dtype], "shape": [count], "data_offsets": [off, off + len(raw)]}
                decls[name] = {"dtype": dtype, "n": count}
                blobs.append(raw)
                off += len(raw)
            text = json.dumps(header, separators=(",", ":")).encode()
            text += b" " * (-len(text) % 8)  # the data 8-byte aligned, as safetensors writes it
            with open(os.path.join(tmp, f"rank-{r}.safetensors"), "wb") as f:
                f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
            meta["ranks"].append({"file": f"rank-{r}.safetensors",
                                  "numbers": {k: float(v).hex() for k, v in rank["numbers"].items()},
                                  "tensors": decls})
        with open(os.path.join(tmp, "checkpoint.json"), "w") as f:
            json.dump(meta, f, indent=1)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
