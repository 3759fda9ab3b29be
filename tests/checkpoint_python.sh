#!/bin/bash
# The Python side of precfuzz's checkpoint format (python/precfuzz_checkpoint.py): a checkpoint
# read and written back unchanged goes on bit for bit (resume_at); a TP=2 to TP=1 converter
# written from docs/checkpoint.md's order of a rank's elements (not from precfuzz's code) gives a
# checkpoint the resharded run goes on from inside the differential's set, and the same converter
# splitting the row-parallel weights along the wrong axis is found; bad writes are refused.
# usage: tests/checkpoint_python.sh PRECFUZZ PYTHON
P=$(realpath "$1")
PY=$2
. "$(dirname "$0")/check.sh"
need_python "numpy" "scripts/python-env.sh installs it"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
S=(diff-tp -v megatron --param tied=0 --shape 5x8x16x12x4 --cases 1)
"$P" "${S[@]}" --param resume_at=2 --save-checkpoint "$T/a" >/dev/null 2>&1 || fail "--save-checkpoint resume_at"
"$P" "${S[@]}" --param reshard_at=2 --save-checkpoint "$T/b" >/dev/null 2>&1 || fail "--save-checkpoint reshard_at"
n=$((n + 1))
PYTHONPATH=python "$PY" - "$T" <<'PY' || fail "the Python writer and converter"
import sys
import numpy as np
import precfuzz_checkpoint as pc
t = sys.argv[1]
ck = pc.read(f"{t}/a/tp2-dp1")
assert ck["step"] == 2 and len(ck["ranks"]) == 2, (ck["step"], len(ck["ranks"]))
assert ck["ranks"][0]["tensors"]["param"][0] == "bf16"
pc.write(f"{t}/same", ck["step"], "precfuzz_checkpoint round trip", ck["ranks"])
# TP=2 to TP=1 from the documented order: hidden 8, ffn 16, vocab 12, seq 4, one layer
h, f, V, seq = 8, 16, 12, 4
blocks = [("ln1.w", h, 1, "rep"), ("ln1.b", h, 1, "rep"), ("qkv.w", 3 * h, h, "col"), ("qkv.b", 3 * h, 1, "col"),
          ("proj.w", h, h, "row"), ("proj.b", h, 1, "rep"), ("ln2.w", h, 1, "rep"), ("ln2.b", h, 1, "rep"),
          ("fc1.w", f, h, "col"), ("fc1.b", f, 1, "col"), ("fc2.w", h, f, "row"), ("fc2.b", h, 1, "rep"),
          ("pos.w", seq, h, "rep"), ("embed.w", V, h, "col")]
def convert(src, wrong_axis=False):
    ranks = src["ranks"]
    out = {}
    for name in ("master", "param", "exp_avg", "exp_avg_sq"):
        dtype = ranks[0]["tensors"][name][0]
        vals = [r["tensors"][name][1] for r in ranks]
        at, merged = [0, 0], []
        for _, rows, cols, kind in blocks:
            size = rows * cols // (1 if kind == "rep" else 2)
            parts = [vals[q][at[q]:at[q] + size] for q in (0, 1)]
            at = [a + size for a in at]
            if kind == "rep":
                merged.append(parts[0])
            elif kind == "col" or wrong_axis:  # rows split: rank 0's rows, then rank 1's
                merged += parts
            else:  # columns split: each row is rank 0's half, then rank 1's
                merged.append(np.concatenate([parts[0].reshape(rows, cols // 2), parts[1].reshape(rows, cols // 2)], 1).reshape(-1))
        assert at == [len(vals[0]), len(vals[1])], (at, len(vals[0]))
        out[name] = (dtype, np.concatenate(merged))
    return [{"numbers": dict(ranks[0]["numbers"]), "tensors": out}]
two = pc.read(f"{t}/b/tp2-dp1")
pc.write(f"{t}/conv", two["step"], "a converter from the docs", convert(two))
pc.write(f"{t}/wrong", two["step"], "a converter from the docs, wrong axis", convert(two, wrong_axis=True))
# refused: a value the dtype does not hold, a directory that exists
bad = [{"numbers": {}, "tensors": {"param": ("bf16", np.array([1.0 + 2.0 ** -20]))}}]
for args, says in (((f"{t}/bad", 1, "w", bad), "is not a bf16 value"), ((f"{t}/conv", 1, "w", []), "already exists")):
    try:
        pc.write(*args)
        raise SystemExit(f"written: {args[0]}")
    except ValueError as e:
        assert says in str(e), e
import os
assert not os.path.exists(f"{t}/bad") and not os.path.exists(f"{t}/bad.partial")
PY
n=$((n + 1))
out=$("$P" "${S[@]}" --param resume_at=2 --checkpoint "$T/same" 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "ok 1" || fail "read and written back: $out"
n=$((n + 1))
out=$("$P" "${S[@]}" --param reshard_at=2 --checkpoint "$T/conv" 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "ok 1" || fail "converted from the docs: $out"
n=$((n + 1))
out=$("$P" "${S[@]}" --param reshard_at=2 --checkpoint "$T/wrong" 2>&1)
[ $? -eq 1 ] && echo "$out" | grep -q "^FINDING .*proj.w\[.*(TP=1) after step 2: .*outside .*a run went on from the checkpoint given" ||
  fail "the wrong axis: $out"

echo "checkpoint_python: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
