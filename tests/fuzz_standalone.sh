#!/bin/bash
# The fuzz drivers' standalone main (gcc builds, the CUDA build): replay, then blind mutation
# with libFuzzer's flags. Same seed, same inputs: a fault found from one seed file is saved
# under the same name twice and replays with its verdict through the printed command; a run
# without a fault finds nothing; bad flags get exit 2 and one line.
# usage: tests/fuzz_standalone.sh BINDIR PRECFUZZ CORPORA
B=$1 P=$2 C=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

n=$((n + 1))
out=$("$B/softmax_fuzzer" -runs=3000 -seed=1 "$C/softmax_fuzzer" 2>&1) && echo "$out" | grep -q "then 3000 mutated inputs in .* no finding" ||
  fail "3000 clean mutations: $out"
n=$((n + 1))
out=$("$B/adam_fuzzer" -max_total_time=1 -seed=2 "$C/adam_fuzzer" 2>&1) && echo "$out" | grep -q "mutated inputs in 1\.[0-9] s" ||
  fail "-max_total_time=1: $out"
# PF_FUZZ_MAX_DIM: a positive integer, or exit 2 and one line; with it, the large sizes reach it
for bad in 0 -3 12x 99999999; do
  n=$((n + 1))
  out=$(PF_FUZZ_MAX_DIM=$bad "$B/softmax_fuzzer" -runs=10 -seed=1 "$C/softmax_fuzzer" 2>&1); rc=$?
  [ $rc -eq 2 ] && [ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -q "PF_FUZZ_MAX_DIM=$bad is not an integer in \[1, 16777216\]" ||
    fail "PF_FUZZ_MAX_DIM=$bad -> exit $rc: $out"
done
n=$((n + 1))
out=$(PF_FUZZ_MAX_DIM=300 "$B/softmax_fuzzer" -runs=2000 -seed=1 "$C/softmax_fuzzer" 2>&1) ||
  fail "PF_FUZZ_MAX_DIM=300: $out"

# the fault from one seed file, twice: the same crash file, and its replay line gives the verdict
mkdir -p "$T/one" "$T/a" "$T/b"
cp "$(ls "$C"/softmax_fuzzer/* | sort | head -1)" "$T/one/"
for d in a b; do # a with PF_FUZZ_STATS=1: its statistics printed when the finding stops it
  (cd "$T/$d" && PF_FUZZ_STATS=$([ $d = a ] && echo 1) PF_FINDINGS_DIR="$T/$d" PF_FUZZ_FAULT=softmax-no-max "$B/softmax_fuzzer" -runs=100000 -seed=5 \
    -artifact_prefix="$T/$d/" "$T/one" >"$T/$d.log" 2>&1) 2>/dev/null # the shell's "Aborted"
done
n=$((n + 1))
ca=$(cd "$T/a" && ls crash-* 2>/dev/null) cb=$(cd "$T/b" && ls crash-* 2>/dev/null)
[ -n "$ca" ] && [ "$ca" = "$cb" ] && cmp -s "$T/a/$ca" "$T/b/$cb" || fail "seed 5 twice: crash files '$ca' and '$cb': $(tail -3 "$T/a.log")"
n=$((n + 1))
line=$(sed -n 's/^precfuzz standalone: the input is saved; replay with: //p' "$T/a.log")
[ "${line#* }" = "replay --driver softmax_fuzzer --fault softmax-no-max $T/a/$ca" ] &&
  [ "${line%% *}" -ef "$B/precfuzz" ] || fail "replay line: '$line'"
n=$((n + 1))
out=$(${line} 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q ": overflow (" || fail "replaying the saved input -> exit $rc: $out"
n=$((n + 1))
grep -q "^precfuzz finding: softmax_fuzzer .* fault softmax-no-max: overflow" "$T/a.log" || fail "no finding line: $(cat "$T/a.log")"
n=$((n + 1))
grep -q "^precfuzz stats: [1-9][0-9]* cases judged inside the domain" "$T/a.log" || fail "PF_FUZZ_STATS=1 printed nothing at the finding"

# an artifact prefix that cannot be written to is said, not passed over
n=$((n + 1))
out=$(cd "$T" && PF_FINDINGS_DIR="$T" PF_FUZZ_FAULT=softmax-no-max "$B/softmax_fuzzer" -runs=100000 -seed=5 \
  -artifact_prefix="$T/no/such/dir/" "$T/one" 2>&1)
echo "$out" | grep -q "^precfuzz standalone: cannot save the input as $T/no/such/dir/crash-160f40cf63bb0aeb (see -artifact_prefix)$" ||
  fail "unwritable prefix: $(echo "$out" | tail -2)"

# a corpus input that is itself a finding is named, not saved again
n=$((n + 1))
out=$(cd "$T" && PF_FINDINGS_DIR="$T" PF_FUZZ_FAULT=softmax-no-max "$B/softmax_fuzzer" -runs=10 "$T/a/$ca" 2>&1)
echo "$out" | grep -q "^precfuzz standalone: the input is the file $T/a/$ca$" || fail "replayed finding: $out"

for bad in "-runs=x|-runs: 'x' is not an integer in [0, 1099511627776]" "-seed=-1|-seed: '-1' is not an integer" \
  "-max_len=0|-max_len: '0' is not an integer" "-dict=x|-dict=x: unknown flag" "-runs=5|mutation needs at least one input" \
  "$T/nope|$T/nope: no such file or directory"; do
  arg=${bad%%|*} want=${bad#*|}
  n=$((n + 1))
  out=$("$B/softmax_fuzzer" $arg 2>&1); rc=$?
  [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -qF -- "$want" || fail "$arg -> exit $rc: $out"
done

echo "fuzz_standalone: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
