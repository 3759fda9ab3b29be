#!/bin/bash
# Plain PyTorch's distributed step (examples/torch_tp.py: DTensor TP=2 or DDP DP=2,
# clip_grad_norm_, AdamW, fp32) on 2 gloo ranks under the differential (contract tp_diff/torch):
# clean cases give no finding on either layout, nor round trips through torch.distributed.checkpoint
# (resume_at), whose broken save and load are each found in the first case, nor reshards through
# DCP (reshard_at); with the seed-002-like switch the replicated
# LayerNorm weight differs between TP rank 0 and rank 1 after the first step that clips (read
# from the norms PyTorch reported), with a replay line that reproduces it; each other switch is
# found within 20 cases; the emulation agrees with PyTorch on most outputs; a layout the
# variant does not hold is refused. Skipped without PyTorch (scripts/python-env.sh --torch).
# usage: tests/torch_tp.sh PRECFUZZ PYTHON
P=$(realpath "$1")
PY=$2
. "$(dirname "$0")/check.sh"
need_python "torch.distributed.tensor, numpy" "scripts/python-env.sh --torch installs it"
K="ranks:2:$PY examples/torch_tp.py"
export PRECFUZZ_KERNEL_TIMEOUT=120
DT=(diff-tp -v torch-dtensor -t fp32 --param tied=0)
DD=(diff-tp -v torch-ddp -t fp32 --param tied=0 --param tp=1 --param dp=2)

# clean: 60 cases of each layout, no finding
for v in DT DD; do
  n=$((n + 1))
  eval 'args=("${'$v'[@]}")'
  out=$(rk "${args[@]}" --cases 60)
  [ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/${args[2]} fp32/fp32: 60 cases (seeds 1..60): ok 60 *$" || fail "clean ${args[2]}: $out"
done
# two layers under DDP: clean
n=$((n + 1))
out=$(rk "${DD[@]}" --param layers=2 --cases 15)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/torch-ddp fp32/fp32: 15 cases (seeds 1..15): ok 15 *$" || fail "2 layers clean: $out"

# seed 002's effect: the first finding of each case is ln1.w on TP rank 1 after the first step
# whose coefficient (clip_grad_norm_'s, from the norm it reported) clips
rk_unclipped_at_first_clip torch-dtensor fp32 || fail "tp-replicated-unclipped: the finding is not ln1.w on TP rank 1 after the first clipping step"
# its replay line reproduces it
n=$((n + 1))
out=$(rk "${DT[@]}" --fault tp-replicated-unclipped --cases 1)
line=$(echo "$out" | grep -m1 "reproduce with: " | sed 's/^ *reproduce with: //')
echo "$line" | grep -q -- "--kernels 'ranks:2:.*torch_tp.py' run -k tp_diff -v torch-dtensor .* --fault tp-replicated-unclipped" ||
  fail "tp-replicated-unclipped: the replay line: $out"
out2=$(eval "$line" 2>&1 | grep -v '^\[rank\|hostname of the client socket cannot be retrieved')
echo "$out2" | grep -q "^FINDING .*ln1.w\[0\] on TP rank 1 after step 2: its master differs from rank 0's copy" ||
  fail "tp-replicated-unclipped: the replay line does not reproduce it: $line: $out2"

# the other switches, each found within 20 cases
for f in "DT:norm-no-dedup:the gradient norm torch-dtensor's step reported" \
  "DT:norm-local:the gradient norm torch-dtensor's step reported" \
  "DT:norm-bf16:the gradient norm torch-dtensor's step reported" \
  "DD:norm-bf16:the gradient norm torch-ddp's step reported (TP=1 x DP=2" \
  "DD:dp-grad-unreduced:on DP replica 1 (TP rank 0) after step 1: its master differs from replica 0's"; do
  n=$((n + 1))
  v=${f%%:*} rest=${f#*:}
  eval 'args=("${'$v'[@]}")'
  out=$(rk "${args[@]}" --fault "${rest%%:*}" --cases 20 --max-print 1)
  [ $? -eq 1 ] && echo "$out" | grep -qF "${rest#*:}" || fail "fault ${rest%%:*} on ${args[2]}: $out"
done

# the emulation (tp_diff/torch) against PyTorch: most outputs bitwise equal (they differ where
# ATen's norms sum in another order or its roots round the other way), no finding on either
rk_agrees torch-dtensor 80 -t fp32 --param tied=0
rk_agrees torch-ddp 80 -t fp32 --param tied=0 --param tp=1 --param dp=2

# the round trip (resume_at) through torch.distributed.checkpoint, and resharding (reshard_at:
# each run saved at its layout, TP=1 by rank 0 alone, and loaded at the other; an odd vocabulary
# too, DTensor's uneven shards): clean on both layouts
for trip in resume_at:4x8x16x12x4:20 reshard_at:4x8x16x11x4:12; do
  IFS=: read -r param shape cases <<<"$trip"
  for v in DT DD; do
    n=$((n + 1))
    eval 'args=("${'$v'[@]}")'
    out=$(rk "${args[@]}" --shape "$shape" --param "$param=2" --cases "$cases")
    [ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/${args[2]} fp32/fp32: $cases cases (seeds 1..$cases): ok $cases *$" ||
      fail "$param ${args[2]}: $out"
  done
done
# each broken save or load found in the first case, named as loaded; its replay line gives it again
# DCP keeps one rank's copy of a key several ranks write: TP shards under unqualified keys come
# back as the other rank's shard, silently when the shards have one shape (an even vocabulary)...
for f in "DT:dcp-keys-unqualified:'s m was .* when saved, .* as loaded" \
  "DT:ckpt-adam-state-dropped:qkv.w\[0,0\]'s m was .* when saved, 0 as loaded" \
  "DT:ckpt-step-reset:the step count of DP replica 0, pipeline stage 0, TP rank 0 was 2 when saved, 0 as loaded" \
  "DD:ckpt-step-reset:the step count of DP replica 0, pipeline stage 0, TP rank 0 was 2 when saved, 0 as loaded"; do
  n=$((n + 1))
  v=${f%%:*} rest=${f#*:}
  eval 'args=("${'$v'[@]}")'
  out=$(rk "${args[@]}" --shape 4x8x16x12x4 --param resume_at=2 --fault "${rest%%:*}" --cases 5 --max-print 1)
  rc=$?
  first=$(echo "$out" | grep -m1 "^FINDING")
  line=$(echo "$out" | grep -m1 "reproduce with: " | sed 's/^ *reproduce with: //')
  [ $rc -eq 1 ] && echo "$first" | grep -q "seed 1: divergent, born in resume .*the run saved after step 2, loaded into a fresh group: .*${rest#*:}" &&
    [ "$(eval "$line" 2>&1 | grep -m1 "^FINDING")" = "$first" ] || fail "round trip, ${rest%%:*} on ${args[2]}: $out"
done
# ... and refused by DCP's own check when they do not (an odd vocabulary: 6 rows against 5)
n=$((n + 1))
out=$(rk "${DT[@]}" --shape 4x8x16x11x4 --param resume_at=2 --fault dcp-keys-unqualified --cases 1)
echo "$out" | grep -q "^FINDING .*seed 1: failed: the kernel raised an error on the case: rank .: CheckpointException" ||
  fail "dcp-keys-unqualified, odd vocabulary: $out"

# resharding: a broken load found as loaded at step k, and one a step later (the step count,
# through Adam's bias correction)
for f in "ckpt-adam-state-dropped:qkv.w\[0,0\] (TP=2, rank 0) after step 2: m 0 outside" \
  "ckpt-step-reset:ln1.w\[0\] (TP=2, every rank) after step 3: master"; do
  n=$((n + 1))
  out=$(rk "${DT[@]}" --shape 4x8x16x12x4 --param reshard_at=2 --fault "${f%%:*}" --cases 1)
  echo "$out" | grep -q "^FINDING .*seed 1: divergent, .*${f#*:}.*; each run resharded after step 2 (TP=2 x DP=1 to TP=1 and back)" ||
    fail "reshard ${f%%:*}: $out"
done

# a layout the variant does not hold is refused, exit 2; left unsaid, the variant's own is taken
n=$((n + 1))
out=$("$P" --kernels "$K" diff-tp -v torch-dtensor -t fp32 --param tied=1 --cases 1 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -qx "precfuzz: tp_diff/torch-dtensor takes tied in \[0, 0\] only, not 1" || fail "tied: $out"
n=$((n + 1))
out=$("$P" --kernels "$K" diff-tp -v torch-ddp -t fp32 --param tp=2 --cases 1 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -qx "precfuzz: tp_diff/torch-ddp takes tp in \[1, 1\] only, not 2" || fail "ddp tp: $out"
n=$((n + 1))
out=$("$P" --kernels "$K" diff-tp -v torch-ddp -t fp32 --cases 1 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/torch-ddp fp32/fp32: 1 cases (seeds 1..1): ok 1" || fail "ddp at its defaults (tied 0, tp 1): $out"

# a command that sets another MASTER_ADDR is refused before any rank starts: exit 2 (another
# loopback address too: the group talks over 127.0.0.1 only)
for addr in 10.9.9.9 127.0.0.2; do
  n=$((n + 1))
  out=$("$P" --kernels "ranks:2:MASTER_ADDR=$addr $PY examples/torch_tp.py" diff-tp -v torch-dtensor -t fp32 --param tied=0 --cases 1 2>&1)
  [ $? -eq 2 ] && echo "$out" | grep -q "the command sets MASTER_ADDR=$addr: a rank group talks over 127.0.0.1 only" ||
    fail "MASTER_ADDR=$addr: $out"
done
# set from inside the rank's own code, the rank refuses it before its first socket: exit 2
n=$((n + 1))
out=$("$P" --kernels "ranks:2:$PY -c 'import os, runpy, sys; os.environ[\"MASTER_ADDR\"] = \"127.0.0.2\"; sys.argv = [\"examples/torch_tp.py\"]; runpy.run_path(\"examples/torch_tp.py\", run_name=\"__main__\")'" \
  diff-tp -v torch-dtensor -t fp32 --param tied=0 --cases 1 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "MASTER_ADDR='127.0.0.2': a rank group talks over 127.0.0.1" &&
  echo "$out" | grep -q "^precfuzz: --kernels: .*exited with status 2 before its hello" || fail "MASTER_ADDR set by the rank: $out"

echo "torch_tp: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
