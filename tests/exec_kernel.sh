#!/bin/bash
# Kernel processes (--kernels exec:CMD) end to end, with tests/kernels/softmax_kernel.py: a
# correct kernel is judged ok by run, fuzz driver, boundary and sweep; one moved 3 ulps is a
# finding at the element moved; one that crashes, exits, hangs, raises, answers with another
# dtype or shape, or writes garbage gets the verdict failed with the case and a replay line
# that reproduces it, and precfuzz serves the next case; a bad command or hello is exit 2.
# usage: tests/exec_kernel.sh PRECFUZZ SOFTMAX_FUZZER PYTHON
P=$(realpath "$1")
F=$(realpath "$2")
PY=$3
. "$(dirname "$0")/check.sh"
need_python "numpy, ml_dtypes" "scripts/python-env.sh makes it"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
K="exec:$PY tests/kernels/softmax_kernel.py"

# check WHAT COMMAND...: the command's output and status are in $out and $rc
check() {
  local what=$1
  shift
  n=$((n + 1))
  out=$("$@" 2>&1)
  rc=$?
}

# a correct kernel: listed with its contract and command, ok in every dtype
check list "$P" --kernels "$K" list
echo "$out" | grep -q "^softmax *np-softmax .*softmax in float64, rounded once (contract of safe) \[from $K\]$" ||
  fail "list: $out"
for t in fp32 fp16 bf16; do
  check "run $t" "$P" --kernels "$K" run -k softmax -v np-softmax -t $t --shape 4x64 --cases 40
  [ $rc -eq 0 ] && echo "$out" | grep -q "^softmax/np-softmax $t/fp32: 40 cases (seeds 1..40): ok 40 *$" || fail "run $t: $rc $out"
done
# an operation with one output (softmax_bwd's dx): one unnamed array is that output
check "softmax_bwd, one unnamed output" "$P" --kernels "$K" run -k softmax_bwd -v np-softmax-bwd -t bf16 --shape 4x64 --cases 20
[ $rc -eq 0 ] && echo "$out" | grep -q "^softmax_bwd/np-softmax-bwd bf16/fp32: 20 cases (seeds 1..20): ok 20 *$" ||
  fail "softmax_bwd unnamed output: $rc $out"
check "causal, mask values" "$P" --kernels "$K" run -k softmax -v np-softmax -t fp16 --shape 8x5 --param mask=causal --param mask_value=lowest --cases 20
[ $rc -eq 0 ] || fail "causal lowest: $out"
# the dtypes and accumulations a kernel takes are those its hello names
expect2 "softmax/np-naive takes mask none only, not causal" "$P" --kernels "$K" run -k softmax -v np-naive --param mask=causal --cases 1
expect2 "softmax/np-naive takes alpha in [0.5, 2] only, not 4" "$P" --kernels "$K" run -k softmax -v np-naive --param alpha=4 --cases 1
expect2 "softmax/np-naive does not support dtype bf16" "$P" --kernels "$K" run -k softmax -v np-naive -t bf16 --cases 1

# a kernel 3 ulps off at [0,1]: a finding there, replayable by the printed line
check "off by 3" "$P" --kernels "$K off-by-3" run -k softmax -v np-softmax -t fp16 --shape 2x4 --cases 2 --save-findings "$T/f"
[ $rc -eq 1 ] && echo "$out" | grep -q "^FINDING softmax/np-softmax fp16/fp32 seed 1: inaccurate at \[0,1\]: .* 3 ulps" ||
  fail "off-by-3: $rc $out"
line=$(echo "$out" | grep -m1 "reproduce with: " | sed 's/^ *reproduce with: //')
n=$((n + 1))
[ "${line%% *}" -ef "$P" ] || fail "the replay line does not name the precfuzz that ran ($P): $line"
out2=$(eval "$line" 2>&1)
[ $? -eq 0 ] && echo "$out2" | grep -q "inaccurate .*\[as expected\]" || fail "the printed replay line: $line: $out2"

# failures of the process: the verdict failed, with the reason, and the next case is served
check crash "$P" --kernels "$K crash-at 2" run -k softmax -v np-softmax -t fp16 --shape 2x4 --cases 3
[ $rc -eq 1 ] && echo "$out" | grep -q "^FINDING .* seed 2: failed: the kernel process was killed by signal 11 (Segmentation fault" &&
  echo "$out" | grep -q "3 cases (seeds 1..3): ok 2  failed 1" || fail "crash: $rc $out"
check exit "$P" --kernels "$K exit-at 1" run -k softmax -v np-softmax -t fp16 --shape 2x4 --cases 1
[ $rc -eq 1 ] && echo "$out" | grep -q "failed: the kernel process exited with status 3 before answering the case" || fail "exit: $out"
start=$(date +%s)
check hang env PRECFUZZ_KERNEL_TIMEOUT=1 "$P" --kernels "$K hang-at 2" run -k softmax -v np-softmax -t fp16 --shape 2x4 --cases 3
[ $rc -eq 1 ] && echo "$out" | grep -q "seed 2: failed: the kernel process timed out (1 s, PRECFUZZ_KERNEL_TIMEOUT)" &&
  echo "$out" | grep -q "ok 2  failed 1" && [ $(($(date +%s) - start)) -lt 20 ] || fail "hang: $out"
check raise "$P" --kernels "$K raise" run -k softmax -v np-softmax -t fp32 --shape 2x3 --cases 1
[ $rc -eq 1 ] && echo "$out" | grep -q "failed: the kernel raised an error on the case: ValueError: three columns are not supported" ||
  fail "raise: $out"
check "wrong dtype" "$P" --kernels "$K wrong-dtype" run -k softmax -v np-softmax -t fp16 --shape 2x3 --cases 1
echo "$out" | grep -q "failed: the kernel's answer does not fit the case: outputs are fp32, the case's dtype is fp16" ||
  fail "wrong dtype: $out"
check "wrong shape" "$P" --kernels "$K wrong-shape" run -k softmax -v np-softmax -t fp16 --shape 2x3 --cases 1
echo "$out" | grep -q "failed: .*'output' has shape \[3,2\], the stage's is \[2,3\]" || fail "wrong shape: $out"
check garbage "$P" --kernels "$K garbage" run -k softmax -v np-softmax -t fp16 --shape 2x3 --cases 1
echo "$out" | grep -q "failed: the kernel process broke the protocol .*does the kernel print to its standard output" ||
  fail "garbage: $out"
check print "$P" --kernels "$K print" run -k softmax -v np-softmax -t fp16 --shape 2x3 --cases 2
[ $rc -eq 0 ] || fail "a kernel that prints: $out"
# eighteen malformed answers (wrong types, ids, sizes, names, truncated or trailing .npy bytes, a
# header that is not an object, of length 0 or 2^31, an unknown event): each is the verdict failed with a reason,
# never a crash or a wait for bytes that do not come; the lingering processes are ended at exit
chaos_ok=0
for s in $(seq 17 34); do
  out=$(PRECFUZZ_KERNEL_TIMEOUT=5 "$P" --kernels "$K chaos $s" run -k softmax -v np-softmax -t fp16 --shape 2x3 --cases 1 2>&1)
  rc=$?
  if [ $rc -eq 1 ] && echo "$out" | grep -q "seed 1: failed: " && ! echo "$out" | grep -q "timed out"; then
    chaos_ok=$((chaos_ok + 1))
  else
    echo "chaos $s: exit $rc: $out"
  fi
done
n=$((n + 1))
[ $chaos_ok -eq 18 ] || fail "malformed answers: $chaos_ok of 18 gave failed"
n=$((n + 1))
sleep 0.5
pgrep -f "softmax_kernel.py chaos" >/dev/null && fail "a kernel process outlived precfuzz"

# a failed case saved and replayed fails again
check "replay failed" "$P" --kernels "$K crash-at 1" run -k softmax -v np-softmax -t fp16 --shape 2x3 --cases 1 --save-findings "$T/c"
check "replay failed" "$P" --kernels "$K crash-at 1" replay "$T"/c/*.json
[ $rc -eq 0 ] && echo "$out" | grep -q "failed (failed: the kernel process was killed .*) \[as expected\]" || fail "replay of failed: $out"

# the fuzz driver, aimed at the kernel: clean on the correct one, stops at the crash
check fuzz env PRECFUZZ_KERNELS="$K" PF_FUZZ_VARIANT=np-softmax "$F" -runs=500 -seed=1 corpora/softmax_fuzzer
[ $rc -eq 0 ] && echo "$out" | grep -q "500 mutated inputs .* no finding" || fail "fuzz: $out"
check "fuzz crash" env PRECFUZZ_KERNELS="$K crash-at 3" PF_FUZZ_VARIANT=np-softmax "$F" -runs=50 -seed=1 \
  -artifact_prefix="$T/" corpora/softmax_fuzzer
[ $rc -ne 0 ] && echo "$out" | grep -q "precfuzz finding: softmax_fuzzer softmax/np-softmax .*failed: the kernel process was killed" &&
  echo "$out" | grep -q "reproduce with: [^ ]*precfuzz --kernels 'exec:.*crash-at 3' replay" || fail "fuzz crash: $out"
rm -f finding-softmax_fuzzer-*.json
expect2 "fuzz driver: PF_FUZZ_VARIANT: 'sfe' is no variant of softmax" env PF_FUZZ_VARIANT=safe,sfe "$F" -runs=1 corpora/softmax_fuzzer

# boundary and sweep take it like a built-in variant
check boundary "$P" --kernels "$K" boundary -k softmax -v np-naive -t fp16 --along scale
[ $rc -eq 0 ] && echo "$out" | grep -q "no boundary in the range: every grid point passes" || fail "boundary: $out"
check sweep "$P" --kernels "$K" sweep --kernel softmax --quick -o "$T/sweep.json"
[ $rc -eq 0 ] && grep -q '"variant":\s*"np-softmax"' "$T/sweep.json" || fail "sweep: $out"

# a bad command, hello or setting: exit 2, one line
expect2 "exec: needs a command" "$P" --kernels "exec:" list
# (the shell's own complaint comes first: the process's standard error is precfuzz's)
check "no such command" "$P" --kernels "exec:/nonexistent/kernel" list
[ $rc -eq 2 ] && [ "$(echo "$out" | tail -1)" = "precfuzz: --kernels: exec:/nonexistent/kernel: the kernel process exited with status 127 before its hello" ] ||
  fail "no such command: $out"
expect2 "the kernel process exited with status 4 before its hello" "$P" --kernels "$K no-hello" list
expect2 "kernel 0 of the hello: no operation 'no-such-op'" "$P" --kernels "$K bad-hello" list
expect2 "kernel 0 of the hello: unknown key 'dtype' (op, variant, like, summary, dtypes, accums, params, faults)" "$P" --kernels "$K typo-hello" list
# the protocol's reader is as strict as the case-file reader
expect2 "variant 'vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv' is not 1 to 47 letters" "$P" --kernels "$K lax-hello 1" list
expect2 "before its hello: the header: a string holds a NUL character" "$P" --kernels "$K lax-hello 2" list
expect2 "before its hello: the header: data after the JSON value" "$P" --kernels "$K lax-hello 3" list
expect2 "before its hello: the header: field 'type' is given twice in one object" "$P" --kernels "$K lax-hello 4" list
expect2 "kernel softmax/np-softmax: fault 1 is not 1 to 47 letters, digits or ._+- (not starting with -)" "$P" --kernels "$K bad-faults 1" list
expect2 "kernel softmax/np-softmax: fault 'twice' named twice" "$P" --kernels "$K bad-faults 2" list
expect2 "kernel softmax/np-softmax: \"faults\" is not a list of at most 16 names" "$P" --kernels "$K bad-faults 3" list
expect2 "diff-variant: no dtype and accumulation of those given to compare" "$P" --kernels "$K" diff-variant -k softmax -v np-naive -t bf16
expect2 "PRECFUZZ_KERNEL_TIMEOUT: 'soon' is not a number of seconds" env PRECFUZZ_KERNEL_TIMEOUT=soon "$P" --kernels "$K" list
expect2 "np-softmax is already registered" "$P" --kernels "$K" --kernels "$K" list
# boundary --every: a kernel wrong at the widths w % 7 == 3 only; from 8 to 40 columns that is
# 10, 17, 24, 31 and 38, five runs of one (a threshold search reports the first change only)
n=$((n + 1))
out=$("$P" --kernels "$K wrong-widths" boundary -k softmax -v np-softmax -t fp32 --shape 1x8 --along dim:cols --from 8 --to 40 --every 2>&1)
echo "$out" | grep -q "every value 8 .. 40: 5 of 33 fail, in 5 runs" && [ "$(echo "$out" | grep -cE '^  (10|17|24|31|38): inaccurate')" -eq 5 ] &&
  echo "$out" | grep -q "replay the first failing one: .*--shape 1x10 " || fail "boundary --every: $out"
n=$((n + 1))
out=$("$P" --kernels "$K wrong-widths" boundary -k softmax -v np-softmax -t fp32 --shape 1x8 --along dim:cols --from 8 --to 40 --every --json 2>&1)
echo "$out" | python3 -c '
import json, sys
e = json.load(sys.stdin)["every"]
assert e["values"] == 33 and e["failing"] == 5 and [r["lo"] for r in e["runs"]] == [10, 17, 24, 31, 38], e' || fail "boundary --every --json: $out"
expect2 "--every runs one case per value: --cases must be 1" "$P" boundary -k softmax -v safe --along dim:cols --every --cases 2
expect2 "--every steps over every value: no --points or --refine" "$P" boundary -k softmax -v safe --along dim:cols --every --points 8
expect2 "--every: the range holds more than 100000 values of int (--from, --to)" "$P" boundary -k softmax -v safe --along dim:cols --every
# a binary64 range whose ordinals differ by more than int64 holds: refused, not overflowed
expect2 "--every: the range holds more than 100000 values of binary64" "$P" boundary -k softmax -v safe --along param:alpha --from 0 --to 0x1p64 --every
# PRECFUZZ_KERNELS: an exec: entry takes the rest, ':' included
n=$((n + 1))
out=$(PRECFUZZ_KERNELS="exec:PATH=/usr/bin:/bin; $PY tests/kernels/softmax_kernel.py" "$P" list 2>&1) &&
  echo "$out" | grep -q "np-softmax" || fail "PRECFUZZ_KERNELS with ':' in the command: $out"

echo "exec_kernel: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
