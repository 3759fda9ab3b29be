#!/bin/bash
# diff-tp --param resume_at=K (docs/checkpoint.md): clean round trips exit 0; a broken load is a
# finding named as loaded (the value saved and the value loaded), whose replay line gives it
# again; bad values of resume_at are refused with one line, and so is a kernel process whose
# hello does not take it.
# usage: tests/cli_checkpoint.sh PRECFUZZ
P=$1
. "$(dirname "$0")/check.sh"

n=$((n + 1))
out=$("$P" diff-tp -v megatron --param resume_at=2 --cases 20 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron bf16/fp32: 20 cases (seeds 1..20): ok 20" || fail "clean round trips: $out"
for f in ckpt-master-from-param ckpt-last-stage-init ckpt-adam-state-dropped ckpt-step-reset; do
  n=$((n + 1))
  out=$("$P" diff-tp -v megatron --param resume_at=1 --fault $f --cases 5 --max-print 1 2>&1); rc=$?
  first=$(echo "$out" | grep -m1 "^FINDING")
  rep=$(echo "$out" | grep -A1 -m1 "^FINDING" | sed -n 's/.*reproduce with: //p')
  [ $rc -eq 1 ] && echo "$first" | grep -q "seed 1: divergent, born in resume .*the run saved after step 1, loaded into a fresh group: .* was .* when saved, .* as loaded" &&
    echo "$rep" | grep -q -- "--param resume_at=1 .*--fault $f" && [ "$(eval "$rep" 2>&1 | grep -m1 "^FINDING")" = "$first" ] ||
    fail "$f: $out"
done
n=$((n + 1))
out=$("$P" diff-tp -v megatron -t fp16 --param scaler=1 --param growth_interval=1 --param resume_at=1 --fault ckpt-scale-reset --cases 1 2>&1)
# the scaler doubled after step 1 (growth_interval 1): 2^13 saved, its start 2^12 loaded
echo "$out" | grep -q "loaded into a fresh group: the loss scale of DP replica 0, pipeline stage 0, TP rank 0 was 8192 when saved, 4096 as loaded" || fail "ckpt-scale-reset: $out"
expect2 "resume_at (3) must be a step before the last (steps: 3)" "$P" diff-tp -v megatron --param resume_at=3 --cases 1
expect2 "resume_at" "$P" diff-tp -v megatron --param resume_at=-1 --cases 1

echo "cli_checkpoint: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
