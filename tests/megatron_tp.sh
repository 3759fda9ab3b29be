#!/bin/bash
# megatron-core's own Float16OptimizerWithFloat16Params and DistributedOptimizer (0.16.1, without
# apex or TE, through its DistributedDataParallel) on 2 and 4 gloo ranks under the
# tensor-parallel differential (examples/megatron_tp.py, contract tp_diff/megatron-core): clean
# cases give no finding, with TP=2, DP=2, TP=2 x DP=2 and TP=2 x PP=2 with the tied embedding; each fault switch is found within 20 cases where it shows, with a replay line that
# reproduces it, seed 004's on the tied copy; the emulation agrees with megatron-core on most
# outputs; round trips through dist_checkpointing are bitwise (the distributed optimizer's with
# its step-count defect patched, which is found without the patch), and each broken load is
# found as loaded. Skipped without megatron-core (scripts/python-env.sh --frameworks).
# usage: tests/megatron_tp.sh PRECFUZZ PYTHON
P=$(realpath "$1")
PY=$2
. "$(dirname "$0")/check.sh"
need_python "megatron.core.optimizer, numpy" "scripts/python-env.sh --frameworks installs it"
K="ranks:2:$PY examples/megatron_tp.py"
export PRECFUZZ_KERNEL_TIMEOUT=120

n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --cases 100)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-bf16 bf16/fp32: 100 cases (seeds 1..100): ok 100 *$" || fail "clean: $out"

# three layers through the distributed optimizer at DP=2: its shards cut across parameters and layers
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tied=0 --param tp=1 --param dp=2 --param microbatches=4 --param layers=3 --cases 15)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-distopt-bf16 bf16/fp32: 15 cases (seeds 1..15): ok 15 *$" || fail "3 layers clean: $out"

# norm-bf16 (torchtitan PR 4135): every rank agrees on a norm that is wrong: the reported norm
# is the finding, and its replay line reproduces it
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --fault norm-bf16 --cases 1)
line=$(echo "$out" | grep -m1 "reproduce with: " | sed 's/^ *reproduce with: //')
echo "$out" | grep -q "^FINDING .*seed 1: divergent, born in norms .*the gradient norm megatron-core-bf16's step reported (TP=2, pipeline stage 0, TP rank 0) at step 1" &&
  echo "$line" | grep -q -- "--kernels 'ranks:2:.*megatron_tp.py' run -k tp_diff -v megatron-core-bf16 .* --fault norm-bf16" ||
  fail "norm-bf16: $out"
out2=$(eval "$line" 2>&1 | grep -v '^\[rank\|hostname of the client socket cannot be retrieved')
echo "$out2" | grep -q "^FINDING .*seed 1: divergent, born in norms" || fail "norm-bf16: the replay line does not reproduce it: $out2"
for f in "norm-no-dedup:the gradient norm megatron-core-bf16's step reported" "norm-not-allreduced:the gradient norm megatron-core-bf16"; do
  n=$((n + 1))
  out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --fault "${f%%:*}" --cases 20 --max-print 1)
  [ $? -eq 1 ] && echo "$out" | grep -q "^FINDING .*${f#*:}" || fail "fault ${f%%:*}: $out"
done

# data parallelism through megatron's own DistributedDataParallel (finish_grad_sync) and, in the
# variant megatron-core-distopt-bf16, its DistributedOptimizer (gradients reduce-scattered,
# masters and Adam state sharded over the replicas, parameters all-gathered): TP=1 x DP=2
# against TP=1, the 4 micro-batches split between the replicas, gradients over 24 binades so
# that the two summation orders differ
for v in megatron-core-bf16 megatron-core-distopt-bf16; do
  n=$((n + 1))
  out=$(rk diff-tp -v $v --param tied=0 --param tp=1 --param dp=2 --param microbatches=4 --dist loguniform \
    --exp-range -24:0 --cases 30)
  [ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/$v bf16/fp32: 30 cases (seeds 1..30): ok 30 *$" || fail "$v DP=2 clean: $out"
done
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tied=0 --cases 30)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-distopt-bf16 bf16/fp32: 30 cases (seeds 1..30): ok 30 *$" ||
  fail "distopt TP=2 clean: $out"
# the replicas' gradients never reduced: replica 1's copy differs from replica 0's
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --param tp=1 --param dp=2 --fault dp-grad-unreduced --cases 20 --max-print 1)
[ $? -eq 1 ] && echo "$out" | grep -q "^FINDING .*seed 1: divergent, born in copies .* on DP replica 1 (TP rank 0) after step 1: its master differs from replica 0's" ||
  fail "dp-grad-unreduced: $out"
# the distributed optimizer's norm over each replica's shard only: the replicas agree bit for
# bit (each element is stepped by one of them, then all-gathered) and the norm is wrong
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tied=0 --param tp=1 --param dp=2 --fault norm-shard-only --cases 20 --max-print 1)
[ $? -eq 1 ] && echo "$out" | grep -q "^FINDING .*seed 1: divergent, born in norms .*reported (TP=1 x DP=2, pipeline stage 0, TP rank 0, DP replica 0) at step 1" ||
  fail "norm-shard-only: $out"
rk_agrees megatron-core-distopt-bf16 75 --param tied=0 --param tp=1 --param dp=2 --param microbatches=4

# experts: two in a ChainedOptimizer of their own; TP=2 (the experts TP-split, one norm pooled)
# and TP=1 x DP=2 x EP=2 (expert e on replica e, its norm combined with the dense one in
# binary64; the distributed optimizer pools them); each expert switch found
EP=(--param tied=0 --param tp=1 --param dp=2 --param microbatches=4 --param experts=2)
for v in megatron-core-bf16 megatron-core-distopt-bf16; do
  n=$((n + 1))
  out=$(rk diff-tp -v $v "${EP[@]}" --cases 20)
  [ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/$v bf16/fp32: 20 cases (seeds 1..20): ok 20 *$" || fail "$v EP=2 clean: $out"
done
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --param experts=2 --cases 20)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-bf16 bf16/fp32: 20 cases (seeds 1..20): ok 20 *$" || fail "experts TP=2 clean: $out"
for f in "megatron-core-bf16:expert-norm-dropped:born in norms" "megatron-core-bf16:expert-norm-averaged:born in norms" \
  "megatron-core-bf16:expert-norm-local:born in copies .* on DP replica 1" "megatron-core-distopt-bf16:expert-norm-dropped:born in norms" \
  "megatron-core-distopt-bf16:expert-norm-local:born in norms"; do
  n=$((n + 1))
  IFS=: read -r v fault want <<<"$f"
  out=$(rk diff-tp -v "$v" "${EP[@]}" --fault "$fault" --cases 20 --max-print 1)
  [ $? -eq 1 ] && echo "$out" | grep -q "^FINDING .*seed 1: divergent, $want" || fail "$v $fault: $out"
done
rk_agrees megatron-core-bf16 75 "${EP[@]}"

# fp16 with the case's static loss scale (megatron's ConstantGradScaler: the fp32 main grads
# unscaled by fl32(1/S) after the reductions), as TP=2 and as TP=1 x DP=2 with the distributed
# optimizer
n=$((n + 1))
out=$(rk diff-tp -t fp16 -v megatron-core-fp16 --param tied=0 --cases 30)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-fp16 fp16/fp32: 30 cases (seeds 1..30): ok 30 *$" || fail "fp16 clean: $out"
n=$((n + 1))
out=$(rk diff-tp -t fp16 -v megatron-core-distopt-fp16 --param tied=0 --param tp=1 --param dp=2 --param microbatches=4 \
  --param loss_scale=1024 --cases 20)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-distopt-fp16 fp16/fp32: 20 cases (seeds 1..20): ok 20 *$" ||
  fail "fp16 distopt DP=2 clean: $out"
rk_agrees megatron-core-fp16 80 -t fp16 --param tied=0
# fp16 under megatron's DynamicGradScaler (scaler=1), its scale hovering where some gradients
# overflow (growth every step, halving on every overflow): 8 cases of 6 steps each at TP=2, and
# through the distributed optimizer at TP=1 x DP=2, every case ok, skipped steps (norm -1) on
# every rank of both runs in each case
D=(-t fp16 --param tied=0 --param scaler=1 --param loss_scale=0x1p19 --param growth_interval=1 --param hysteresis=1
  --param spread=0 --shape 6x8x16x11x4 --cases 8 --json)
for v in "megatron-core-fp16" "megatron-core-distopt-fp16 --param tp=1 --param dp=2 --param microbatches=4"; do
  n=$((n + 1))
  set -- $v
  rk run -k tp_diff -v "$@" "${D[@]}" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert len(d["cases"]) == 8 and all(c["verdict"] == "ok" for c in d["cases"]), [c["verdict"] for c in d["cases"]]
for c in d["cases"]:
    y = [float.fromhex(e["y"]) for e in c["elements"][-2 * 6 * 8:]]  # the norms: 2 runs x 6 steps x 8 slots
    skipped = [sum(v == -1 for v in y[k * 8:(k + 1) * 8]) for k in range(12)]
    assert all(k in (0, 8) for k in skipped) and 0 < skipped.count(8) < 12, skipped
' 2>&1 || fail "dynamic loss scale $1"
done

# 4 ranks, a tied embedding: TP=1 x PP=2 against TP=2 x PP=2, megatron's own tied all-reduce;
# seed 004 (the tied gradients not reduced): the stage-1 copy differs from stage 0's
K="ranks:4:$PY examples/megatron_tp.py"
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --cases 30)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-bf16 bf16/fp32: 30 cases (seeds 1..30): ok 30 *$" || fail "PP=2 clean: $out"
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --fault tied-grad-unreduced --cases 20 --max-print 1)
[ $? -eq 1 ] && echo "$out" | grep -q "^FINDING .*seed 1: .*embed.w\[0,0\]: the tied copy on pipeline stage 1 (TP rank 0) after step 1: its .* differs from stage 0's" ||
  fail "seed 004: $out"

# TP=1 x PP=2 x DP=2 with the distributed optimizer: the tied embedding in its own bucket on
# both stages; a first stage that does not mark it shared_embedding shards it unlike the last
# stage, and the tied all-reduce adds a reduced shard to an unreduced one
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tp=1 --param dp=2 --cases 10)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-distopt-bf16 bf16/fp32: 10 cases (seeds 1..10): ok 10 *$" ||
  fail "TP=1 x PP=2 x DP=2 clean: $out"
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tp=1 --param dp=2 --fault embedding-unmarked --cases 20 --max-print 1)
[ $? -eq 1 ] && echo "$out" | grep -q "^FINDING .*seed 1: .*embed.w\[.*\]: the tied copy on pipeline stage 1 (TP rank 0 of DP replica [01]) after step 1" ||
  fail "embedding-unmarked: $out"
# TP=2 x DP=2 with the distributed optimizer
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tied=0 --param dp=2 --param microbatches=4 --cases 15)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-distopt-bf16 bf16/fp32: 15 cases (seeds 1..15): ok 15 *$" ||
  fail "TP=2 x DP=2 clean: $out"

K="ranks:2:$PY examples/megatron_tp.py"
rk_agrees megatron-core-bf16 70 --param tied=0

# one process, a case of one layer then one of two: the model is cached by its blocks (keyed by
# the shape, the second reused the one-layer model and failed: StopIteration)
n=$((n + 1))
out=$("$P" --kernels "ranks:2:$PY examples/megatron_tp.py" replay tests/data/tp/megatron-core-bf16-1-layer.json \
  tests/data/tp/megatron-core-bf16-2-layers.json 2>&1)
[ $? -eq 0 ] && [ "$(echo "$out" | grep -c 'tp_diff/megatron-core-bf16 bf16/fp32: ok$')" -eq 2 ] || fail "1 layer, then 2: $out"

# the round trip (resume_at) through megatron-core's dist_checkpointing, as Megatron-LM's
# save_checkpoint and load_checkpoint use it (the model's and the optimizer's sharded state
# dicts, dp_reshardable): saved after step k, loaded into a fresh DDP and optimizer
S=(--shape 4x8x16x12x4)
for v in "megatron-core-bf16" "megatron-core-bf16 --param tp=1 --param dp=2" \
  "megatron-core-fp16 -t fp16 --param scaler=1 --param growth_interval=1" \
  "megatron-core-distopt-bf16 --fault distopt-step-patched" \
  "megatron-core-distopt-bf16 --param tp=1 --param dp=2 --fault distopt-step-patched"; do
  for k in 1 3; do
    n=$((n + 1))
    out=$(rk diff-tp -v $v --param tied=0 "${S[@]}" --param resume_at=$k --cases 6)
    [ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-[a-z0-9-]* [a-z0-9]*/fp32: 6 cases (seeds 1..6): ok 6 *$" || fail "round trip $v k=$k: $out"
  done
done
# megatron-core 0.16.1's DistributedOptimizer with torch's AdamW loads Adam's step count as the
# placeholder state's (1), whatever was saved, and one step tensor for every parameter: found as
# loaded, with a replay line that gives it again
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tied=0 "${S[@]}" --param resume_at=2 --cases 1)
first=$(echo "$out" | grep -m1 "^FINDING")
line=$(echo "$out" | grep -m1 "reproduce with: " | sed 's/^ *reproduce with: //')
echo "$first" | grep -q "divergent, born in resume .*the run saved after step 2, loaded into a fresh group: the step count of DP replica 0, pipeline stage 0, TP rank 0 was 2 when saved, 1 as loaded" &&
  [ "$(eval "$line" 2>&1 | grep -m1 "^FINDING")" = "$first" ] || fail "distributed optimizer's step count: $out"
# ... and its effect a step later, loaded at the right count (k = 1): the shared step tensor
# advanced once per parameter (7 on each replica at DP=2)
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tied=0 --param tp=1 --param dp=2 "${S[@]}" --param resume_at=1 --cases 1)
echo "$out" | grep -q "(equal as loaded): after step 2 the step count of DP replica 0, pipeline stage 0, TP rank 0 is 8, 2 in the run straight" ||
  fail "distributed optimizer's shared step tensor: $out"
# the faults: the main params rebuilt from the bf16 weights (reload_model_params), the fp16
# scaler made anew after the load
for f in "megatron-core-bf16:ckpt-master-from-param:ln1.w\[0\]'s master was [-0-9.e]* when saved, [-0-9.e]* as loaded" \
  "megatron-core-distopt-bf16 --param tp=1 --param dp=2:ckpt-master-from-param:ln1.w\[0\]'s master was [-0-9.e]* when saved, [-0-9.e]* as loaded" \
  "megatron-core-fp16 -t fp16 --param scaler=1 --param growth_interval=1:ckpt-scale-reset:the loss scale of DP replica 0, pipeline stage 0, TP rank 0 was 8192 when saved, 4096 as loaded"; do
  n=$((n + 1))
  v=${f%%:*} rest=${f#*:}
  out=$(rk diff-tp -v $v --param tied=0 "${S[@]}" --param resume_at=1 --fault "${rest%%:*}" --cases 1)
  echo "$out" | grep -q "^FINDING .*seed 1: divergent, born in resume .*the run saved after step 1, loaded into a fresh group: ${rest#*:}" ||
    fail "round trip ${rest%%:*} on $v: $out"
done
# dist_checkpointing shards in equal parts (Megatron pads the vocabulary): an odd one is refused
# by the adapter before any collective, on every rank, with one line
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --shape 3x8x16x11x4 --param resume_at=1 --cases 1)
echo "$out" | grep -q "^FINDING .*seed 1: failed: .*resume_at: megatron-core's dist_checkpointing shards a tensor in equal parts over TP .*embed.w's 11 rows do not split in 2" ||
  fail "odd vocabulary: $out"
# 4 ranks, the tied embedding over two pipeline stages (the last stage's copy saved as the
# first's replica, as LanguageModule saves it): clean; seed 004 (the last stage's copy back at
# its initial values after the load) found as loaded
K4="ranks:4:$PY examples/megatron_tp.py"
n=$((n + 1))
out=$("$P" --kernels "$K4" diff-tp -v megatron-core-bf16 "${S[@]}" --param resume_at=2 --cases 4 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-bf16 bf16/fp32: 4 cases (seeds 1..4): ok 4 *$" || fail "round trip, 4 ranks, tied: $out"
n=$((n + 1))
out=$("$P" --kernels "$K4" diff-tp -v megatron-core-bf16 "${S[@]}" --param resume_at=1 --fault ckpt-last-stage-init --cases 1 2>&1)
echo "$out" | grep -q "^FINDING .*seed 1: divergent, born in resume .*loaded into a fresh group: embed.w\[0,0\]'s master was [-0-9.e]* when saved, [-0-9.e]* as loaded" ||
  fail "round trip, seed 004: $out"
# 4 ranks, an untied TP=2 layout on 2 of them: every rank joins dist_checkpointing's save and
# load (ranks 2 and 3 with nothing; fuzz-torch found them skipping it, the holders waiting)
n=$((n + 1))
out=$("$P" --kernels "$K4" diff-tp -v megatron-core-bf16 --param tied=0 --param tp=2 --param microbatches=3 --shape 4x8x4x20x2 --param resume_at=1 --cases 2 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "ok 2 *$" || fail "round trip, 4 ranks, a layout on 2: $out"
# a bucket so small that padding it for DP=2 leaves one DP rank no parameter: megatron-core's
# save would assert on that rank alone and the others wait for ever; refused on every rank
n=$((n + 1))
out=$("$P" --kernels "$K4" diff-tp -v megatron-core-distopt-fp16 -t fp16 --shape 4x8x24x4x6 --param tp=1 --param dp=2 --param resume_at=1 --cases 1 2>&1)
echo "$out" | grep -q "^FINDING .*seed 1: failed: .*resume_at: stage 0's bucket of 32 elements, padded to 128 for DP=2, gives DP rank 1 no parameter: megatron-core's distributed optimizer asserts 'empty bucket encountered'" ||
  fail "an empty bucket: $out"

# resharding through dist_checkpointing (reshard_at): each run saved at its layout after step k
# and loaded at the other, the Float16Optimizer's model-space state resharded over TP by
# dist_checkpointing; clean on TP=2, DP=2, fp16 with the scale doubling every step, and 4 ranks
# with the tied embedding over 2 stages; the masters rebuilt from the bf16 weights and seed 004
# found; the distributed optimizer (dp_reshardable: over DP only) does not take it
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --shape 4x8x16x12x4 --param reshard_at=2 --cases 8)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron-core-bf16 bf16/fp32: 8 cases (seeds 1..8): ok 8 *$" || fail "reshard TP=2: $out"
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --param tp=1 --param dp=2 --param microbatches=4 --shape 4x8x16x12x4 --param reshard_at=1 --cases 4)
[ $? -eq 0 ] && echo "$out" | grep -q "ok 4 *$" || fail "reshard DP=2: $out"
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-fp16 -t fp16 --param tied=0 --param scaler=1 --param growth_interval=1 --shape 4x8x16x12x4 --param reshard_at=2 --cases 4)
[ $? -eq 0 ] && echo "$out" | grep -q "ok 4 *$" || fail "reshard fp16 dynamic: $out"
# the experts under EP=2 (each saved by the one replica that holds it: its replicas counted over
# its own data-parallel group), round-tripped and resharded
for trip in resume_at reshard_at; do
  n=$((n + 1))
  out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --param tp=1 --param dp=2 --param experts=2 --param microbatches=4 --shape 4x8x16x12x4 --param $trip=1 --cases 2)
  [ $? -eq 0 ] && echo "$out" | grep -q "ok 2 *$" || fail "$trip, experts under EP=2: $out"
done
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-bf16 --param tied=0 --shape 4x8x16x12x4 --param reshard_at=2 --fault ckpt-master-from-param --cases 1)
echo "$out" | grep -q "^FINDING .*seed 1: divergent, .*master .* outside .*each run resharded after step 2" || fail "reshard, masters from the weights: $out"
n=$((n + 1))
out=$(rk diff-tp -v megatron-core-distopt-bf16 --param tied=0 --param reshard_at=1 --cases 1)
[ $? -eq 2 ] && echo "$out" | grep -q "^precfuzz: reshard_at: tp_diff/megatron-core-distopt-bf16 does not take it" || fail "distopt refuses reshard_at: $out"
n=$((n + 1))
out=$("$P" --kernels "$K4" diff-tp -v megatron-core-bf16 --shape 4x8x16x12x4 --param reshard_at=2 --cases 2 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "ok 2 *$" || fail "reshard, 4 ranks, tied: $out"
n=$((n + 1))
out=$("$P" --kernels "$K4" diff-tp -v megatron-core-bf16 --shape 4x8x16x12x4 --param reshard_at=1 --fault ckpt-last-stage-init --cases 1 2>&1)
echo "$out" | grep -q "^FINDING .*seed 1: divergent, .*embed.w\[0,0\]: the tied copy on pipeline stage 1 .*each run resharded after step 1" || fail "reshard, seed 004: $out"

echo "megatron_tp: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
