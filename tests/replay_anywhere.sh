#!/bin/bash
# Replay lines pasted into a shell in another directory: every kind of finding is made in a
# working directory with relative paths (a generated case, a tensor file input, judge, a saved
# finding, a plugin library named ./lib.so, a kernel process started by a relative command, a
# fuzz driver's finding with -artifact_prefix, minimize's line), and its printed line, run from
# elsewhere, finds the same again (a run: exit 1; a saved case replayed: exit 0, "it reproduces").
# usage: tests/replay_anywhere.sh PRECFUZZ FUZZ_BIN_DIR LIB_DIR PYTHON
P=$(realpath "$1")
F=$(realpath "$2")
L=$(realpath "$3")
PY=$4
S=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/check.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/work" "$T/elsewhere"
W=$T/work
D=$S/tests/data/tensors
# replayed WHAT LINE: the line run from another directory finds the same again: a run exits 1;
# the replay of a saved case (it expects its verdict) exits 0 saying it reproduces
replayed() {
  n=$((n + 1))
  [ -n "$2" ] || { fail "$1: no replay line"; return; }
  local out rc
  out=$(cd "$T/elsewhere" && bash -c "$2" 2>&1)
  rc=$?
  case "$2" in
    *" replay "*) [ $rc -eq 0 ] && echo "$out" | grep -q "it reproduces" ;;
    *) [ $rc -eq 1 ] ;;
  esac || fail "$1: the line exits $rc from another directory: $2 :: $(echo "$out" | tail -3)"
}
line_of() { sed -n 's/^ *reproduce with: //p' | head -1; }

# a generated case
out=$(cd "$W" && "$P" run -k softmax -v safe -t fp16 --fault softmax-no-max --scale 1e4 --cases 2 2>&1)
replayed "generated case" "$(echo "$out" | line_of)"
# a tensor file named relative to the working directory
cp "$D/logits_fp16.npy" "$W/x.npy"
out=$(cd "$W" && "$P" run -k softmax -v safe --fault softmax-round-toward-zero --input x:file=x.npy 2>&1)
line=$(echo "$out" | line_of)
replayed "--input x:file=x.npy" "$line"
n=$((n + 1))
case "$line" in *"x:file=$W/x.npy"*) ;; *) fail "--input: the line does not name the file by its absolute path: $line" ;; esac
# judge, the case and outputs named relatively
cp "$D/logits_fp16.values.json" "$D/softmax_3ulps.npy" "$W/"
out=$(cd "$W" && "$P" judge logits_fp16.values.json --outputs softmax_3ulps.npy 2>&1)
replayed "judge" "$(echo "$out" | line_of)"
# a saved finding, in a directory named relatively
out=$(cd "$W" && "$P" run -k softmax -v safe -t fp16 --fault softmax-no-max --scale 1e4 --cases 1 --save-findings saved 2>&1)
replayed "--save-findings saved" "$(echo "$out" | line_of)"
# a plugin library named ./fe.so
cp "$L/softmax_fast_exp.so" "$W/fe.so"
out=$(cd "$W" && "$P" --kernels ./fe.so run -k softmax -v fast-exp -t fp32 --cases 2 2>&1)
replayed "--kernels ./fe.so" "$(echo "$out" | line_of)"
# a kernel process started by a relative command (from the repository's root)
if "$PY" -c "import numpy" >/dev/null 2>&1; then
  out=$(cd "$S" && "$P" --kernels "exec:$PY tests/kernels/softmax_kernel.py off-by-3" run -k softmax -v np-softmax --cases 1 2>&1)
  replayed "--kernels exec:python tests/kernels/softmax_kernel.py" "$(echo "$out" | line_of)"
else
  echo "(no numpy at $PY: the kernel process's line not checked)"
fi
# a fuzz driver's finding: the case file beside -artifact_prefix, named absolutely
mkdir -p "$W/art"
out=$(cd "$W" && PF_FUZZ_FAULT=softmax-no-max "$F/softmax_fuzzer" -artifact_prefix=art/ -runs=20000 -seed=5 \
  "$S/corpora/softmax_fuzzer" 2>&1)
line=$(echo "$out" | sed -n 's/^reproduce with: //p' | head -1)
replayed "fuzz driver with -artifact_prefix=art/" "$line"
n=$((n + 1))
ls "$W"/art/finding-softmax_fuzzer-*.json >/dev/null 2>&1 || fail "the driver's case file is not beside -artifact_prefix: $(ls -R "$W" | head)"
# minimize's line
f=$(ls "$W"/saved/*.json | head -1)
out=$(cd "$W" && "$P" minimize "saved/$(basename "$f")" -o small.json 2>&1)
replayed "minimize -o small.json" "$(echo "$out" | tail -1)"
echo "replay_anywhere: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
