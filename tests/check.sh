# What the command-line test scripts share (sourced): counting checks and failures, and the
# check that a command is refused with exit 2 and one line.
n=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

expect2() { # what-the-line-says, then the command's arguments
  local want=$1
  shift
  n=$((n + 1))
  local out rc
  out=$("$@" 2>&1); rc=$?
  [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -qF -- "$want" || fail "$* -> exit $rc: $out"
}

# For the kernel-process scripts ($P precfuzz, $PY the python with the frameworks):
# need_python MODULES HOW: ctest's "skipped" (77) with one line unless $PY imports MODULES (HOW
# says what installs them); then the script works from the repository's root
need_python() {
  if ! "$PY" -c "import $1" >/dev/null 2>&1; then
    echo "skipped: no python with $1 at $PY ($2)"
    exit 77
  fi
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
}
# ex NAME: the --kernels spec of examples/NAME.py
ex() { echo "exec:$PY examples/$1.py"; }
# agree VARIANT EXAMPLE KERNEL DTYPE PERCENT [diff-variant options]: the share of the variant's
# outputs bitwise equal to its emulation's on 20 cases (precfuzz diff-variant)
agree() {
  n=$((n + 1))
  local out v=$1 e=$2 k=$3 t=$4 pct=$5
  shift 5
  out=$("$P" --kernels "$(ex $e)" diff-variant -k $k -v $v -t $t --cases 20 "$@" 2>&1)
  echo "$out" | grep -q "^$k *$v .* $t/fp32 .* $pct% " || fail "diff-variant $v $t $* (expected $pct% bitwise): $out"
}
# all_ok VARIANT EXAMPLE KERNEL DTYPE: 20 generated cases of the example's variant, every one ok
all_ok() {
  n=$((n + 1))
  local out
  out=$("$P" --kernels "$(ex $2)" run -k $3 -v $1 -t $4 --cases 20 2>&1)
  [ $? -eq 0 ] && echo "$out" | grep -q "^$3/$1 $4/fp32: 20 cases (seeds 1..20): ok 20 *$" || fail "run $1 $4: $out"
}
# scaler_agrees VARIANT EXAMPLE DTYPE HYSTERESIS: a framework's loss scaler bit for bit with its
# emulation (loss_scale) on the defaults, a short window, a spike, and gradients that turn
# infinite above a minimum scale of 2^10 (with that hysteresis)
scaler_agrees() {
  local v=$1 e=$2 t=$3
  all_ok $v $e loss_scale $t
  agree $v $e loss_scale $t 100.00
  agree $v $e loss_scale $t 100.00 --param window=3 --shape 40x4
  agree $v $e loss_scale $t 100.00 --param window=2 --param hysteresis=1 --shape 40x4 --param spike_step=10 \
    --param spike_mag=0x1p20
  agree $v $e loss_scale $t 100.00 --param window=5 --param min_scale=0x1p10 --param hysteresis=$4 --shape 60x4 \
    --param nonfinite_from=20
}
# For the rank-group scripts ($P precfuzz, $K the --kernels ranks:N:... spec):
# rk ARGS...: precfuzz with the rank group, its ranks' own log lines dropped (and c10d's warning that it
# cannot name a peer: the group's own network has no name service), its status kept
rk() { "$P" --kernels "$K" "$@" 2>&1 | grep -v '^\[rank\|warnings.warn\|UserWarning\|hostname of the client socket cannot be retrieved'; return "${PIPESTATUS[0]}"; }
# rk_agrees VARIANT PERCENT [diff-variant options]: the rank group's tp_diff VARIANT against its
# emulation on 20 cases: no finding on either, at least PERCENT% of the outputs bitwise equal
rk_agrees() {
  n=$((n + 1))
  local v=$1 pct=$2 out got
  shift 2
  out=$(rk diff-variant -k tp_diff -v "$v" --cases 20 "$@")
  got=$(echo "$out" | awk -v v="$v" '$1 == "tp_diff" && $2 == v {sub("%", "", $7); print $7}')
  echo "$out" | awk -v v="$v" '$1 == "tp_diff" && $2 == v {exit !($9 == 0 && $10 == 0)}' &&
    python3 -c "import sys; sys.exit(not float('${got:-0}') >= $pct)" || fail "diff-variant $v ($got%, expected >= $pct%): $out"
}
# rk_unclipped_at_first_clip VARIANT DTYPE: seed 002's switch (tp-replicated-unclipped) on a
# tied=0 TP=2 variant whose coefficient is reciprocal(norm + 1e-6) * max_norm (DeepSpeed's,
# PyTorch's): in each of 5 cases the first finding is ln1.w[0] on TP rank 1 after the first step
# whose coefficient, computed here from the norm the rank group reported, clips. Counts a check.
rk_unclipped_at_first_clip() {
  n=$((n + 1))
  "$P" --kernels "$K" run -k tp_diff -v "$1" -t "$2" --param tied=0 --fault tp-replicated-unclipped --cases 5 \
    --json 2>/dev/null | python3 -c '
import json, struct, sys
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
d = json.load(sys.stdin)
for c in d["cases"]:
    steps, h, ffn, V, seq = c["case"]["shape"]
    max_norm = float.fromhex(c["case"]["params"]["max_norm"])
    e = c["elements"]
    n = 6 * h + 4 * h * h + 3 * h + 2 * ffn * h + ffn + seq * h + V * h  # tp.h: parameters per run
    nsync = (6 + seq) * h
    base = 2 * steps * nsync + 8 * steps * n
    norms = [float.fromhex(e[base + (steps + s) * 8]["y"]) for s in range(steps)]  # TP=2, rank 0 (8 slots a step)
    coef = [f32(f32(1 / f32(f32(x) + f32(1e-6))) * f32(max_norm)) for x in norms]
    first = next(s for s in range(steps) if coef[s] < 1)
    want = "ln1.w[0] on TP rank 1 after step %d: its " % (first + 1)
    assert c["verdict"] == "divergent" and c["born_in"] == "copies" and c["why"].startswith(want), (c["seed"], norms, coef, c["why"])
print("ok")' | grep -qx ok
}
