#!/bin/bash
# Clean round trips (resume_at; reshard_at on the built-in variants, DCP and dist_checkpointing; docs/checkpoint.md
# quotes the figures): for each adapter's
# layouts, cases of 5 steps saved after step k = 1, 2, 3, 4 and loaded into fresh objects by the
# framework's own checkpoint code, each k a quarter of the cases; per line the summary and the
# number of findings that are the round trip's (the stage "resume") beside the others (fp16
# ZeRO against its emulation agrees on 99.8% of the outputs, not all). Prints figures; asserts
# nothing. About an hour on 2 cores at the default scale.
# usage: bench/round-trips.sh [SCALE]   (cases per k = SCALE x the numbers below; default 1)
#   env: PRECFUZZ (default build/bin/precfuzz), PY (default .venv/bin/python),
#        ONLY (a substring of the labels to run, default all)
set -uo pipefail
cd "$(dirname "$0")/.."
SCALE=${1:-1}
P=${PRECFUZZ:-build/bin/precfuzz}
PY=${PY:-.venv/bin/python}
ONLY=${ONLY:-}
export PRECFUZZ_KERNEL_TIMEOUT=${PRECFUZZ_KERNEL_TIMEOUT:-200}
SH=(--shape 5x8x16x12x4)
TRIP=resume_at
run() { # label kernels cases-per-k diff-tp arguments...
  local label=$1 spec=$2 n=$(($3 * SCALE)) k out
  shift 3
  [[ -z $ONLY || $label == *"$ONLY"* ]] || return 0
  for k in 1 2 3 4; do
    if [ -n "$spec" ]; then out=$("$P" --kernels "$spec" diff-tp "$@" --param "$TRIP=$k" --cases "$n" --max-print 1000000 2>&1)
    else out=$("$P" diff-tp "$@" --param "$TRIP=$k" --cases "$n" --max-print 1000000 2>&1); fi
    summary=$(echo "$out" | grep -E "cases \(seeds" | sed 's/ *$//')
    [ -n "$summary" ] || summary="no run: $(echo "$out" | tail -1)"
    printf '%s k=%d: %s | round-trip findings %d, other findings %d\n' "$label" "$k" "$summary" \
      "$(echo "$out" | grep -c '^FINDING .*born in resume')" \
      "$(echo "$out" | grep '^FINDING' | grep -vc 'born in resume')"
  done
}
TT="ranks:2:$PY examples/torch_tp.py"
DS="ranks:2:$PY examples/deepspeed_tp.py"
MT="ranks:2:$PY examples/megatron_tp.py"
MT4="ranks:4:$PY examples/megatron_tp.py"
DP=(--param tied=0 --param tp=1 --param dp=2 --param microbatches=4)
run "built-in megatron bf16" "" 500 -v megatron "${SH[@]}"
run "built-in megatron-core bf16" "" 500 -v megatron-core "${SH[@]}"
run "built-in deepspeed bf16" "" 500 -v deepspeed "${SH[@]}"
run "built-in megatron fp16 dynamic" "" 500 -v megatron -t fp16 --param scaler=1 --param growth_interval=1 "${SH[@]}"
run "torch-dtensor TP=2" "$TT" 250 -v torch-dtensor -t fp32 --param tied=0 "${SH[@]}"
run "torch-ddp DP=2" "$TT" 250 -v torch-ddp -t fp32 --param tied=0 --param tp=1 --param dp=2 "${SH[@]}"
run "deepspeed-bf16 TP=2" "$DS" 125 -v deepspeed-bf16 --param tied=0 "${SH[@]}"
run "deepspeed-zero1-bf16 DP=2" "$DS" 125 -v deepspeed-zero1-bf16 "${DP[@]}" "${SH[@]}"
run "deepspeed-zero2-bf16 DP=2" "$DS" 63 -v deepspeed-zero2-bf16 "${DP[@]}" "${SH[@]}"
run "deepspeed-zero2-tp-bf16 TP=2" "$DS" 63 -v deepspeed-zero2-tp-bf16 --param tied=0 "${SH[@]}"
run "deepspeed-zero1-bf16acc DP=2" "$DS" 62 -v deepspeed-zero1-bf16acc "${DP[@]}" "${SH[@]}"
run "deepspeed-zero2-fp16 DP=2 dynamic" "$DS" 62 -v deepspeed-zero2-fp16 -t fp16 "${DP[@]}" --param scaler=1 \
  --param growth_interval=1 --param loss_scale=1024 --fault unscale-after-update "${SH[@]}"
run "megatron-core-bf16 TP=2" "$MT" 187 -v megatron-core-bf16 --param tied=0 "${SH[@]}"
run "megatron-core-bf16 DP=2" "$MT" 63 -v megatron-core-bf16 "${DP[@]}" "${SH[@]}"
run "megatron-core-fp16 TP=2 dynamic" "$MT" 62 -v megatron-core-fp16 -t fp16 --param tied=0 --param scaler=1 \
  --param growth_interval=1 "${SH[@]}"
run "megatron-core-distopt-bf16 TP=2 patched" "$MT" 63 -v megatron-core-distopt-bf16 --param tied=0 \
  --fault distopt-step-patched "${SH[@]}"
run "megatron-core-distopt-bf16 DP=2 patched" "$MT" 62 -v megatron-core-distopt-bf16 "${DP[@]}" \
  --fault distopt-step-patched "${SH[@]}"
run "megatron-core-bf16 TP=2 x PP=2 tied, 4 ranks" "$MT4" 63 -v megatron-core-bf16 "${SH[@]}"
# resharding (reshard_at): each run saved at its layout, loaded at the other; judged by the set
TRIP=reshard_at
run "reshard built-in megatron bf16" "" 500 -v megatron "${SH[@]}"
run "reshard built-in megatron bf16 DP=2" "" 500 -v megatron "${DP[@]}" "${SH[@]}"
run "reshard built-in deepspeed bf16" "" 500 -v deepspeed "${SH[@]}"
run "reshard built-in megatron fp16 dynamic" "" 500 -v megatron -t fp16 --param scaler=1 --param growth_interval=1 "${SH[@]}"
run "reshard torch-dtensor" "$TT" 63 -v torch-dtensor -t fp32 --param tied=0 --shape 5x8x16x11x4
run "reshard torch-ddp" "$TT" 62 -v torch-ddp -t fp32 --param tied=0 --param tp=1 --param dp=2 --shape 5x8x16x11x4
run "reshard megatron-core-bf16 TP=2" "$MT" 63 -v megatron-core-bf16 --param tied=0 "${SH[@]}"
run "reshard megatron-core-bf16 DP=2" "$MT" 32 -v megatron-core-bf16 "${DP[@]}" "${SH[@]}"
run "reshard megatron-core-fp16 TP=2 dynamic" "$MT" 32 -v megatron-core-fp16 -t fp16 --param tied=0 --param scaler=1 \
  --param growth_interval=1 "${SH[@]}"
run "reshard megatron-core-bf16 TP=2 x PP=2 tied, 4 ranks" "$MT4" 16 -v megatron-core-bf16 "${SH[@]}"
TRIP=resume_at
# the defect, unpatched: every case a round-trip finding
run "megatron-core-distopt-bf16 DP=2 unpatched" "$MT" 5 -v megatron-core-distopt-bf16 "${DP[@]}" "${SH[@]}"
