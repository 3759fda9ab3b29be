#!/bin/bash
# A user's kernels from shared libraries (precfuzz --kernels, $PRECFUZZ_KERNELS): the example
# plugin examples/softmax_fast_exp/ is listed, judged, fuzzed and swept like a built-in
# variant, with outputs derived by hand; libraries that cannot work are refused with exit 2
# and one line.
# usage: tests/plugin.sh PRECFUZZ LIBDIR FUZZBINDIR
P=$1 L=$2 F=$3
C=$(cd "$(dirname "$0")/.." && pwd)/corpora
LIB=$L/softmax_fast_exp.so
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/check.sh"

n=$((n + 1))
out=$("$P" --kernels "$LIB" list 2>&1) && echo "$out" | grep -q "^softmax *fast-exp *fp32,fp16,bf16 *fp32 " || fail "list: $out"
n=$((n + 1))
out=$("$P" --kernels "$LIB" list --json 2>&1) && echo "$out" | tr -d ' \t\n' | grep -q '"variant":"fast-exp",[^}]*"library":"'"$LIB"'"' ||
  fail "list --json: $out"
n=$((n + 1))
out=$("$P" --kernels "$LIB" list 2>&1) && echo "$out" | grep -q "fast-exp .*(an example plugin) (contract of safe) \[from $LIB\]$" &&
  [ "$(echo "$out" | grep -c '\[from ')" -eq 1 ] || fail "list names the library of the user's variant only: $out"

# x = (0, -1) in fp32, derived apart (Python, every operation rounded to binary32): y =
# fl32(-fl32(log2 e)) = -0x1.715476p0, k = -2, f = 0x1.1d5714p-1, the cubic gives
# p = 0x1.78ade0p0, e = p/4, sum = fl32(1 + e); the outputs 1/sum = 0x1.764f52p-1 and
# e/sum = 0x1.13615ep-2 are 257 and 514 ulps from the correctly rounded 0x1.764d50p-1 and
# 0x1.136562p-2 (e^-1/(1 + e^-1) = 0.26894142...): inaccurate.
cat >"$T/case.json" <<'JSON'
{"format": "precfuzz-case/1", "kernel": "softmax", "variant": "fast-exp", "dtype": "fp32", "accum": "fp32",
 "shape": [1, 2], "inputs": {"x": {"values": ["0x0p+0", "-0x1p+0"]}}}
JSON
n=$((n + 1))
out=$("$P" --kernels "$LIB" replay --json "$T/case.json" 2>&1); rc=$?
flat=$(echo "$out" | tr -d ' \t\n')
[ $rc -eq 1 ] && echo "$flat" | grep -q '"y":"0x1.764f52p-1",[^}]*"rounded":"0x1.764d5p-1","ulps":257' &&
  echo "$flat" | grep -q '"y":"0x1.13615ep-2",[^}]*"rounded":"0x1.136562p-2","ulps":514' ||
  fail "replay (0, -1) -> exit $rc: $out"
# equal scores: exp(0) = 2^0 = p(0) = 1 exactly, every output 1/4: ok
n=$((n + 1))
out=$(PRECFUZZ_KERNELS="$LIB" "$P" run -k softmax -v fast-exp -t fp32 --shape 2x4 --input x:value=3 --cases 2 2>&1) ||
  fail "equal scores (PRECFUZZ_KERNELS) -> exit $?: $out"
n=$((n + 1))
out=$(PRECFUZZ_KERNELS="$LIB" "$P" run -k softmax -v fast-exp -t bf16 --cases 20 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "findings 20 (0 outside" || fail "bf16, 20 cases -> exit $rc: $out"
# a name without a slash is a file in the current directory, not one on the library path
n=$((n + 1))
out=$(cd "$L" && "$P" --kernels softmax_fast_exp.so list 2>&1) && echo "$out" | grep -q "fast-exp" || fail "relative name: $out"

# the sweep (and so the report) takes the user's variant in
n=$((n + 1))
out=$("$P" --kernels "$LIB" sweep --quick --kernel softmax -o "$T/r.json" 2>&1) && tr -d ' \t\n' <"$T/r.json" | grep -q '"variant":"fast-exp"' ||
  fail "sweep: $out"
# the softmax driver picks it among the variants, and finds it
n=$((n + 1))
out=$(cd "$T" && PF_FINDINGS_DIR="$T" PRECFUZZ_KERNELS="$LIB" "$F/softmax_fuzzer" -runs=3000 -seed=1 "$C/softmax_fuzzer" 2>&1)
echo "$out" | grep -q "^precfuzz finding: softmax_fuzzer softmax/fast-exp " || fail "softmax_fuzzer: $(echo "$out" | tail -3)"
# the printed replay commands load the library: they give the finding again
n=$((n + 1))
line=$(echo "$out" | sed -n 's/^reproduce with: //p' | head -1)
case "$line" in *"/precfuzz --kernels $LIB replay "*) ;; *) fail "driver's replay line: '$line'" ;; esac
out=$(${line} 2>&1); rc=$?
# the saved case records its verdict ("expect"): replayed, it is as expected (exit 0)
[ $rc -eq 0 ] && echo "$out" | grep -q "softmax/fast-exp .*: inaccurate (.*\[as expected\]" || fail "$line -> exit $rc: $out"
n=$((n + 1))
line=$("$P" --kernels "$LIB" run -k softmax -v fast-exp -t fp32 --cases 1 2>&1 | sed -n 's/^  reproduce with: //p' | head -1)
out=$(${line} 2>&1); rc=$?
[ $rc -eq 1 ] && [ "${line%% *}" -ef "$P" ] && case "$line" in *"/precfuzz --kernels $LIB run -k softmax -v fast-exp "*) true ;; *) false ;; esac ||
  fail "run's reproduce line '$line' -> exit $rc: $out"

expect2 "--kernels: cannot load $T/none.so" "$P" --kernels "$T/none.so" list
expect2 "has no pf_plugin_init" "$P" --kernels "$L/bad_plugin_no_init.so" list
expect2 "registered no kernel" "$P" --kernels "$L/bad_plugin_empty.so" list
abi=$(sed -n 's/^#define PF_KERNEL_ABI \([0-9]*\).*/\1/p' "$(dirname "$0")/../core/kernel.h")
expect2 "pf_plugin_init failed: kernel registration: incomplete kernel or ABI 99 (expected $abi)" "$P" --kernels "$L/bad_plugin_abi.so" list
expect2 "pf_plugin_init failed: this library refuses to register" "$P" --kernels "$L/bad_plugin_fails.so" list
# a user's kernel that fails on a case without a message: that case's verdict, the run goes on
n=$((n + 1))
out=$("$P" --kernels "$L/bad_plugin_run_fails.so" run -k softmax -v run-fails --cases 3 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "^softmax/run-fails fp16/fp32: 3 cases (seeds 1..3): failed 3" &&
  echo "$out" | grep -q "run_cpu returned status -[0-9]* without a message" || fail "a failing plugin kernel -> $rc: $out"
# a kernel registered from the init's stack frame: the registry keeps its own copy
n=$((n + 1))
out=$("$P" --kernels "$L/bad_plugin_stack.so" run -k softmax -v from-stack --cases 5 2>&1) &&
  echo "$out" | grep -q "^softmax/from-stack fp16/fp32: 5 cases (seeds 1..5): ok 5" &&
  "$P" --kernels "$L/bad_plugin_stack.so" list | grep -q "from-stack .*softmax/safe registered from a stack frame" ||
  fail "a kernel registered from the stack: $out"
# tables with one field wrong: refused at registration, naming the field (they crashed list or run)
expect2 "softmax-copy/broken: summary is NULL" "$P" --kernels "$L/bad_plugin_table1.so" list
expect2 "softmax-copy: ndims 99 is not in [1, 5]" "$P" --kernels "$L/bad_plugin_table2.so" list
expect2 "softmax-copy: input_count, output_count and oracle are required" "$P" --kernels "$L/bad_plugin_table3.so" list
expect2 "op name must be 1 to 47 of" "$P" --kernels "$L/bad_plugin_table4.so" list
expect2 "softmax-copy: variant name must be 1 to 47 of" "$P" --kernels "$L/bad_plugin_table5.so" list
expect2 "softmax-copy: variant name must be 1 to 47 of" "$P" --kernels "$L/bad_plugin_table6.so" list
expect2 "softmax-copy: variant name must be 1 to 47 of" "$P" --kernels "$L/bad_plugin_table10.so" list
expect2 "softmax/broken: like 'nonexistent' is no built-in variant of softmax" "$P" --kernels "$L/bad_plugin_table11.so" list
expect2 "op 'softmax' is already registered, with another table" "$P" --kernels "$L/bad_plugin_table7.so" list
expect2 "softmax-copy/broken: dtypes 0x0" "$P" --kernels "$L/bad_plugin_table8.so" list
expect2 "softmax-copy: input_count, output_count and oracle are required" "$P" --kernels "$L/bad_plugin_table9.so" list
expect2 "softmax-copy/broken: params[0]: 'beta' is no parameter of softmax-copy" "$P" --kernels "$L/bad_plugin_table12.so" list
expect2 "softmax-copy/broken: params.alpha: default 4 is not a value it takes" "$P" --kernels "$L/bad_plugin_table13.so" list
expect2 "softmax-copy/broken: params.mask: choices 0x8 names none of its 3 choices" "$P" --kernels "$L/bad_plugin_table14.so" list
expect2 "softmax-copy/broken: params.alpha: [1, 1e+300] is not a range within [0, 1.84467e+19]" "$P" --kernels "$L/bad_plugin_table15.so" list

# a C plugin's parameter ranges and defaults (softmax/narrow: alpha 1/8 only, any mask, causal by
# default), and a user's check after its like's (attention/small-d)
NL=$L/bad_plugin_narrow.so
n=$((n + 1))
out=$("$P" --kernels "$NL" run -k softmax -v narrow -t fp32 --shape 4x3 --cases 2 --json 2>/dev/null) &&
  echo "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["cases"][0]["case"]
assert float.fromhex(c["params"]["alpha"]) == 0.125 and c["params"]["mask"] == "causal", c["params"]' ||
  fail "a plugin's defaults (alpha 1/8, mask causal): $out"
# a replay line names what differs from the variant's own defaults, and gives the same case
# again: mask=none (the operation's default, not the variant's) is named, alpha (the variant's
# 1/8) is not (the fault-free variant has no finding: --imprecise makes a hazard)
# (the figures compared without the timings: those differ run to run, and under ASan)
n=$((n + 1))
out=$("$P" --kernels "$NL" run -k softmax -v narrow -t fp32 --param mask=none --imprecise fp32=1e-300 --cases 1 2>&1)
line=$(echo "$out" | sed -n 's/^  reproduce with: //p' | head -1)
again=$(${line} 2>&1)
case "$line" in *"--param mask=none "*) ;; *) false ;; esac && case "$line" in *alpha*) false ;; *) true ;; esac &&
  [ "$(echo "$again" | grep -c '^HAZARD softmax/narrow fp32/fp32 seed 1 ')" -eq 1 ] &&
  [ "$(echo "$out" | grep 'max ulps' | sed 's/; kernel .*//')" = "$(echo "$again" | grep 'max ulps' | sed 's/; kernel .*//')" ] || fail "the replay line against the defaults: $line -> $again"
expect2 "softmax/narrow takes alpha in [0.125, 0.125] only, not 1" "$P" --kernels "$NL" run -k softmax -v narrow --param alpha=1
expect2 "layer" "$P" --kernels "$NL" run -k attention -v small-d --shape 1x1x4x4x8 --param layer=2
expect2 "attention/small-d takes head_dim 8 at most, not 16" "$P" --kernels "$NL" run -k attention -v small-d
n=$((n + 1))
out=$("$P" --kernels "$NL" run -k attention -v small-d --shape 1x1x4x4x8 --cases 3 2>&1) ||
  fail "attention/small-d in its range: $out"
# the softmax driver fits its inputs into what the variant takes: none refused
n=$((n + 1))
out=$(cd "$T" && PF_FUZZ_STATS=1 PF_FUZZ_VARIANT=narrow PF_FINDINGS_DIR="$T" PRECFUZZ_KERNELS="$NL" "$F/softmax_fuzzer" -runs=500 -seed=1 "$C/softmax_fuzzer" 2>&1)
echo "$out" | grep -q "precfuzz stats: [0-9]* cases judged inside the domain, [0-9]* outside, 0 refused" ||
  fail "softmax_fuzzer on softmax/narrow: $(echo "$out" | grep -E 'precfuzz (stats|finding)' | head -3)"
expect2 "kernel softmax/fast-exp is already registered" "$P" --kernels "$LIB" --kernels "$LIB" list
expect2 "--kernels needs a shared library" "$P" --kernels
expect2 "PRECFUZZ_KERNELS: cannot load $T/none.so" env PRECFUZZ_KERNELS="$T/none.so" "$P" list
expect2 "PRECFUZZ_KERNELS: an empty entry in '$LIB::$LIB'" env PRECFUZZ_KERNELS="$LIB::$LIB" "$P" list
expect2 "softmax/fast-exp takes alpha in [1, 1] only, not 0.5" "$P" --kernels "$LIB" run -k softmax -v fast-exp --param alpha=0.5
expect2 "softmax/fast-exp takes mask none only, not causal" "$P" --kernels "$LIB" run -k softmax -v fast-exp --param mask=causal
expect2 "unknown variant 'fast-exp' of kernel softmax (precfuzz list; a user's kernel loads with --kernels)" "$P" replay "$T/case.json"
expect2 "PRECFUZZ_KERNELS: cannot load" env PRECFUZZ_KERNELS="$T/none.so" "$F/softmax_fuzzer" "$C/softmax_fuzzer"

echo "plugin: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
