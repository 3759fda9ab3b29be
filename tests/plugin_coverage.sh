#!/usr/bin/env bash
# A user's kernel library built with coverage instrumentation (-fsanitize=fuzzer-no-link) gives
# the fuzz drivers coverage feedback: libFuzzer registers its counters as a second module
# before fuzzing starts (the drivers load $PRECFUZZ_KERNELS in LLVMFuzzerInitialize), and its
# edges count in cov:. An uninstrumented library adds no module.
# usage: plugin_coverage.sh FUZZ_BUILD_DIR   (make fuzz runs it)
F=$1
S=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
src="$S/examples/softmax_fast_exp/softmax_fast_exp.c"
inc="-I$S"
clang $inc -O1 -shared -fPIC -o "$T/plain.so" "$src" || exit 1
clang $inc -O1 -fsanitize=fuzzer-no-link,address -shared -fPIC -o "$T/cov.so" "$src" || exit 1
for p in plain cov; do
  mkdir "$T/c_$p"
  PRECFUZZ_KERNELS="$T/$p.so" PF_FUZZ_VARIANT=fast-exp "$F/bin/softmax_fuzzer" -runs=1 "$T/c_$p" >"$T/$p.log" 2>&1
  grep -o 'INFO: Loaded [0-9]* modules' "$T/$p.log" | head -1 >"$T/$p.mods"
done
[ "$(cat "$T/plain.mods")" = "INFO: Loaded 1 modules" ] || fail "uninstrumented plugin: $(cat "$T/plain.mods")"
[ "$(cat "$T/cov.mods")" = "INFO: Loaded 2 modules" ] || fail "instrumented plugin not registered before fuzzing: $(cat "$T/cov.mods"): $(head -5 "$T/cov.log")"
echo "plugin_coverage: $((2 - failed)) checks passed, $failed failed"
[ $failed -eq 0 ]
