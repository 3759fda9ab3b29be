#!/usr/bin/env bash
# Every fuzz driver of a gcc (standalone-main) build: its corpus, then SECONDS of blind
# mutation (libFuzzer's flags, no coverage feedback) on BACKEND, one table row each: corpus
# inputs, mutated inputs, seconds, inputs/s, and per judged case the whole time, the kernel's
# part (on cuda: copies, launches, synchronisation) and the oracle's, in microseconds. Logs and
# findings go to OUTDIR. Exit 1 when a driver fails (a finding), 2 on bad usage.
# usage: scripts/fuzz-drivers.sh BINDIR OUTDIR SECONDS cpu|cuda
# (scripts/gpu-check.sh runs it on the CUDA backend; tests/fuzz_drivers_table.sh on the CPU.)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 4 ] || ! [[ $3 =~ ^[0-9]+$ ]] || { [ "$4" != cpu ] && [ "$4" != cuda ]; }; then
  echo "usage: scripts/fuzz-drivers.sh BINDIR OUTDIR SECONDS cpu|cuda" >&2
  exit 2
fi
BIN=$1 OUT=$2 FS=$3 BACKEND=$4
[ -d "$BIN" ] || { echo "fuzz-drivers: $BIN: no such directory" >&2; exit 2; }
mkdir -p "$OUT/findings" || exit 2
printf '%-22s %7s %9s %8s %10s %9s %9s %9s\n' driver corpus mutated seconds inputs/s all_us kernel_us oracle_us
rc=0
for d in "$BIN"/*_fuzzer; do
  name=$(basename "$d")
  [ -d "corpora/$name" ] || continue
  ml=$(sed -n 's/^max_len *= *//p' "corpora/$name.options" 2>/dev/null)
  log=$OUT/$name.$BACKEND.log
  PF_FUZZ_STATS=1 PF_FUZZ_BACKEND=$BACKEND PF_FINDINGS_DIR="$OUT/findings" "$d" -max_total_time="$FS" -seed=1 \
    ${ml:+-max_len=$ml} -artifact_prefix="$OUT/findings/$name-" "corpora/$name" >"$log" 2>&1 ||
    { echo "$name: FAILED (log $log)"; grep -m2 "^precfuzz" "$log"; rc=1; }
  # "replayed C inputs, then M mutated inputs in S s (R/s, seed 1), no finding" and
  # "precfuzz time per judged case: A us: kernel K us (P%), oracle O us (Q%), rest R us"
  runs=$(sed -n 's/^replayed \([0-9]*\) inputs, then \([0-9]*\) mutated inputs in \([0-9.]*\) s.*/\1 \2 \3/p' "$log")
  per=$(awk '/^precfuzz time per judged case/ { print $6, $9, $13 }' "$log")
  awk -v d="$name" -v runs="${runs:-- - -}" -v per="${per:-- - -}" 'BEGIN {
    split(runs, r, " "); split(per, p, " ")
    printf "%-22s %7s %9s %8s %10s %9s %9s %9s\n", d, r[1], r[2], r[3], (r[3] > 0 ? sprintf("%.0f", r[2] / r[3]) : "-"),
      p[1], p[2], p[3] }'
done
exit $rc
