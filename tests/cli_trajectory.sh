#!/bin/bash
# run --steps N: a one-step kernel as a trajectory against the exact one (core/trajectory.h).
# By hand: from p = 1, m = v = 0 with g = 1/2 every step, lr 1e-3, eps 1e-8, each exact step moves
# p by lr (1/2) / (1/2 + 1e-8), so after 100 steps p = 0.900000002: 12.8 bf16 ulps from the start
# (2^-7 at 1) and 25.6 from the end (2^-8 at 0.9). PyTorch's bf16 AdamW keeps p in bf16, where
# 1 - 1e-3 rounds back to 1: it never moves (stagnant, 25.6 ulps off, biased); FusedAdam's fp32
# master moves with it (no hazard). With the fault adam-step-bf16 the first step that breaks the
# contract is step 257, the first the stuck count gets wrong (fp32, so the step shows).
# usage: tests/cli_trajectory.sh PRECFUZZ
P=$1
. "$(dirname "$0")/check.sh"
HAND=(--shape 8 --steps 100 --input p:value=1 --input m:value=0 --input v:value=0 --input g:value=0.5 --at-defaults --cases 1)

n=$((n + 1))
out=$("$P" run -k adam -v torch -t bf16 "${HAND[@]}" 2>&1)
echo "$out" | grep -q "stagnant: 8 of the 8 elements the exact trajectory moved an ulp or more never moved (p\[0\] stayed 1, exact 0.900000002)" &&
  echo "$out" | grep -q "p after 100 steps against the exact trajectory: median 25.6 ulps, max 25.6 (p\[0\]); the exact moved a median 12.8 ulps" &&
  echo "$out" | grep -q ": 1 trajectories of 100 steps (seeds 1..1): 0 with a step that breaks the contract; stagnant 1, biased 1;" ||
  fail "bf16 AdamW by hand: $out"
n=$((n + 1))
out=$("$P" run -k adam -v fused -t bf16 "${HAND[@]}" 2>&1)
echo "$out" | grep -q ": 1 trajectories of 100 steps (seeds 1..1): 0 with a step that breaks the contract; stagnant 0, biased 0;" ||
  fail "FusedAdam's fp32 master by hand: $out"

# the fault, from step 1: found at step 257 exactly; the replay line gives the same finding
n=$((n + 1))
out=$("$P" run -k adam -v fused -t fp32 --shape 64 --steps 300 --at-defaults --fault adam-step-bf16 --cases 1 2>&1)
first=$(echo "$out" | grep -m1 "^FINDING")
rep=$(echo "$out" | grep -A1 -m1 "^FINDING" | sed -n 's/.*reproduce with: //p')
echo "$first" | grep -q "^FINDING adam/fused fp32/fp32 seed 1 step 257 of 300 (44 steps with a finding): inaccurate" &&
  [ "$(eval "$rep" 2>&1 | grep -m1 "^FINDING")" = "$first" ] || fail "adam-step-bf16 along 300 steps: $out"
n=$((n + 1))
out=$("$P" run -k adam -v fused -t fp32 --shape 64 --steps 300 --at-defaults --cases 1 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q ": 0 with a step that breaks the contract; stagnant 0, biased 0;" || fail "the clean run: $out"

expect2 "--steps: softmax carries no state" "$P" run -k softmax --steps 10 --cases 1
expect2 "--steps: '0' is not a number of steps" "$P" run -k adam --steps 0
expect2 "--steps: a trajectory prints its findings and hazards as lines" "$P" run -k adam --steps 10 --json
expect2 "--steps" "$P" run -k adam --steps 10 --steps 20

echo "cli_trajectory: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
