#!/bin/bash
# scripts/fuzz-drivers.sh (the driver table scripts/gpu-check.sh prints for the CUDA backend)
# on the CPU backend, 1 s of mutation each: a row per driver with a corpus, its counts parsed
# from the driver's own lines (all_us >= kernel_us + oracle_us, the rest being >= 0), and
# bad usage exit 2.
# usage: tests/fuzz_drivers_table.sh BINDIR
B=$1
S=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

n=$((n + 1))
out=$("$S/scripts/fuzz-drivers.sh" "$B" "$T" 1 cpu 2>&1); rc=$?
[ $rc -eq 0 ] || fail "exit $rc: $out"
want=0
for d in "$B"/*_fuzzer; do [ -d "$S/corpora/$(basename "$d")" ] && want=$((want + 1)); done
n=$((n + 1))
rows=$(echo "$out" | grep -c '_fuzzer ')
[ "$want" -ge 9 ] && [ "$rows" -eq "$want" ] || fail "$rows rows for $want drivers with a corpus: $out"
n=$((n + 1))
bad=$(echo "$out" | awk '/_fuzzer / {
  if (!($2 ~ /^[0-9]+$/ && $2 > 0 && $3 ~ /^[0-9]+$/ && $3 > 0 && $4 ~ /^[0-9.]+$/ && $5 ~ /^[0-9]+$/)) { print; next }
  if ($6 == "-") next
  if (!($6 ~ /^[0-9.]+$/ && $7 ~ /^[0-9.]+$/ && $8 ~ /^[0-9.]+$/) || !($6 + 0 >= ($7 + $8) * 0.999)) print }')
[ -z "$bad" ] || fail "rows that do not add up: $bad"
n=$((n + 1))
echo "$out" | grep -q '^softmax_fuzzer .* [0-9.]\+ *[0-9.]\+ *[0-9.]\+$' || fail "softmax_fuzzer has no time split: $out"

for args in "" "$B $T x cpu" "$B $T 1 gpu" "$T/none $T 1 cpu"; do
  n=$((n + 1))
  out=$("$S/scripts/fuzz-drivers.sh" $args 2>&1); rc=$?
  [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] || fail "'$args' -> exit $rc: $out"
done

echo "fuzz_drivers_table: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
