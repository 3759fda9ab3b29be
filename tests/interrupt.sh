#!/usr/bin/env bash
# Ctrl-C: run stops after the case at hand, prints what it judged (its JSON stays whole) and
# exits 130; a kernel process is ended at once (a hung one does not hold the run to its
# timeout, and none outlives it); sweep -o and precision-report -o end at once and leave an
# existing file as it was, with no temporary file beside it.
# usage: interrupt.sh PRECFUZZ PRECISION_REPORT [PYTHON]
set -u
set -m # job control: background jobs take SIGINT (a script's would ignore it)
P=$1
R=$2
PY=${3:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/check.sh"
ok() { n=$((n + 1)); }

# interrupt CMD...: starts it, lets it work, sends SIGINT ($SIG: another); its exit status in $rc
interrupt() {
  "$@" >"$T/out" 2>"$T/err" &
  local pid=$!
  sleep 2
  kill -"${SIG:-INT}" "$pid"
  wait "$pid"
  rc=$?
}

long=(run -k attention -v flash --shape 1x1x64x64x32 --cases 1000000)
interrupt "$P" "${long[@]}"
[ $rc -eq 130 ] && ok || fail "run: exit $rc after Ctrl-C (want 130): $(head -3 "$T/err")"
grep -qE '^interrupted \(Ctrl-C\) after [0-9]+ of 1000000 cases$' "$T/out" && ok || fail "run: no 'interrupted after' line"
grep -qE '^attention/flash fp16/fp32: [0-9]+ cases \(seeds 1\.\.[0-9]+\): ok' "$T/out" && ok || fail "run: no summary of the cases judged"

interrupt "$P" "${long[@]}" --json
[ $rc -eq 130 ] && ok || fail "run --json: exit $rc after Ctrl-C (want 130)"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["interrupted"] is True and len(d["cases"]) > 0, d.keys()' "$T/out" && ok || fail "run --json after Ctrl-C is not whole JSON saying so"
grep -qE '^precfuzz: interrupted \(Ctrl-C\) after [0-9]+ of 1000000 cases of attention/flash$' "$T/err" && ok ||
  fail "run --json: no 'interrupted after' line on stderr: $(cat "$T/err")"
# SIGTERM as Ctrl-C, its status 128 + 15
SIG=TERM interrupt "$P" "${long[@]}" --json
[ $rc -eq 143 ] && grep -qE '^precfuzz: interrupted \(SIGTERM\) after [0-9]+ of 1000000 cases' "$T/err" && ok ||
  fail "run --json: SIGTERM -> exit $rc (want 143): $(cat "$T/err")"

# a kernel process hung on its second case: Ctrl-C ends it at once, the run says the one case
# it judged (the hung one is not counted, not 'failed'), and no process of its group is left
if [ -n "$PY" ] && "$PY" -c "import numpy" >/dev/null 2>&1; then
  S=$(cd "$(dirname "$0")/.." && pwd)
  mark="interrupt-test-$$"
  t0=$(date +%s)
  PRECFUZZ_KERNEL_TIMEOUT=120 interrupt "$P" --kernels "exec:$PY $S/tests/kernels/softmax_kernel.py hang-at 2 # $mark" \
    run -k softmax -v np-softmax --cases 5
  secs=$(( $(date +%s) - t0 ))
  [ $rc -eq 130 ] && [ $secs -lt 30 ] && ok || fail "run with a hung kernel process: exit $rc after $secs s (want 130 at once): $(head -3 "$T/err")"
  grep -qE '^interrupted \(Ctrl-C\) after 1 of 5 cases$' "$T/out" && ! grep -q "failed" "$T/out" && ok ||
    fail "run with a hung kernel process: $(cat "$T/out")"
  sleep 1
  left=$(pgrep -f "$mark" || true)
  [ -z "$left" ] && ok || fail "the kernel process outlived the run: $(ps -o pid,pgid,args -p "$left" 2>&1)"
else
  echo "(no numpy at ${PY:-no python given}: the kernel process's Ctrl-C not checked)"
fi

printf 'old results\n' >"$T/results.json"
interrupt "$P" sweep -o "$T/results.json"
[ $rc -eq 130 ] && ok || fail "sweep: exit $rc after Ctrl-C (want 130)"
[ "$(cat "$T/results.json")" = "old results" ] && ok || fail "sweep -o: Ctrl-C changed the existing file"
printf 'old page\n' >"$T/page.html"
interrupt "$R" -o "$T/page.html"
[ $rc -eq 130 ] && ok || fail "precision-report: exit $rc after Ctrl-C (want 130)"
[ "$(cat "$T/page.html")" = "old page" ] && ok || fail "precision-report -o: Ctrl-C changed the existing file"
leftover=$(find "$T" -name '*.tmp.*' | head -1)
[ -z "$leftover" ] && ok || fail "a temporary file was left: $leftover"

echo "interrupt: $n passed, $failed failed"
[ $failed -eq 0 ]
