#!/bin/bash
# precfuzz replay and minimize on raw fuzz-driver inputs (issue 6): two fault findings kept
# in tests/data/<driver>-<fault>/ replay with their verdict, minimize to at most 8 input
# elements, replay minimized with the same verdict, and minimize to the same file twice;
# malformed inputs get exit 2 and one line.
# usage: tests/cli_minimize.sh PRECFUZZ
P=$1
D=$(cd "$(dirname "$0")" && pwd)/data
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

for pair in "softmax_fuzzer-softmax-no-max overflow" "loss_scale_fuzzer-loss-scale-no-skip overflow"; do
  dir=${pair% *} want=${pair#* }
  raw=$(ls "$D/$dir"/crash-* | head -1)
  n=$((n + 1))
  out=$("$P" replay "$raw" 2>&1); rc=$?
  [ $rc -eq 1 ] && echo "$out" | grep -q ": $want (" || fail "replay $raw -> exit $rc: $out"
  mkdir -p "$T/$dir"
  cp "$raw" "$T/$dir/"
  copy=$T/$dir/$(basename "$raw")
  n=$((n + 1))
  out=$("$P" minimize "$copy" -o "$T/a.json" 2>&1) || fail "minimize $raw: $out"
  elems=$(echo "$out" | sed -n 's/.* -> \([0-9]*\) (.*/\1/p')
  [ -n "$elems" ] && [ "$elems" -le 8 ] || fail "minimize $raw: $elems input elements (want <= 8): $out"
  echo "$out" | grep -q "^[^ ]*/precfuzz replay $T/a.json$" || fail "minimize $raw prints no replay line: $out"
  n=$((n + 1))
  out=$("$P" replay "$T/a.json" 2>&1) && echo "$out" | grep -q "$want .*\[as expected\]" || fail "replay minimized: $out"
  n=$((n + 1))
  "$P" minimize "$copy" -o "$T/b.json" >/dev/null 2>&1 && cmp -s "$T/a.json" "$T/b.json" || fail "minimize $raw twice: files differ"
  n=$((n + 1))
  "$P" minimize "$T/a.json" -o "$T/c.json" >/dev/null 2>&1 && cmp -s "$T/a.json" "$T/c.json" || fail "minimize of the minimized case changed it"
  echo "$dir: replay $want, minimized to $elems input elements"
done

# expect2 NEEDLE ARGS...: exit 2 and one stderr line with NEEDLE
expect2() {
  local needle=$1; shift
  n=$((n + 1))
  "$P" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -qF -- "$needle" "$T/err"; then
    fail "precfuzz $* -> exit $rc (want 2, one line with '$needle'): $(cat "$T/err")"
  fi
}
mkdir -p "$T/softmax_fuzzer" "$T/nowhere"
printf 'x' >"$T/softmax_fuzzer/short"
printf '\001\002\003\004\005\006\007\010\011' >"$T/nowhere/raw"
printf '{"format": "precfuzz-case/1", "kernel": "softmax",' >"$T/trunc.json"
cp "$D/softmax_fuzzer-softmax-no-max/"crash-* "$T/softmax_fuzzer/finding"
expect2 "too short for softmax_fuzzer" replay "$T/softmax_fuzzer/short"
expect2 "too short for softmax_fuzzer" minimize "$T/softmax_fuzzer/short"
expect2 "name it with --driver" replay "$T/nowhere/raw"
expect2 "name it with --driver" minimize "$T/nowhere/raw"
expect2 "unknown driver 'frob_fuzzer'" replay --driver frob_fuzzer "$T/nowhere/raw"
expect2 "not a fault of softmax_fuzzer" replay --fault loss-scale-no-skip "$T/softmax_fuzzer/finding"
expect2 "trunc.json" replay "$T/trunc.json"
expect2 "trunc.json" minimize "$T/trunc.json"
expect2 "no finding to minimize" minimize "$T/softmax_fuzzer/finding"
expect2 "missing" minimize "$T/missing"
expect2 "one FILE only" minimize "$T/a.json" "$T/b.json"
expect2 "-o needs a value" minimize "$T/a.json" -o
expect2 "unknown option '--frob'" minimize --frob "$T/a.json"
expect2 "--driver needs a value" replay --driver

echo "cli_minimize: $((n - failed)) passed, $failed failed"
[ $failed -eq 0 ]
