#!/usr/bin/env bash
# The foundation's acceptance runs (issue 2): naive fp16 softmax at scale 16 overflows, the
# safe variant does not, and naive bf16 does not.
# usage: cli_softmax_acceptance.sh PRECFUZZ
set -u
P=$1
fail=0
check() { # check WANT_RC NEEDLE ARGS...
  local want=$1 needle=$2; shift 2
  out=$("$P" "$@" 2>&1)
  rc=$?
  if [ $rc -ne "$want" ] || ! grep -q -- "$needle" <<<"$out"; then
    echo "FAIL: precfuzz $* -> exit $rc (want $want, output with '$needle')"
    echo "$out" | tail -5
    fail=$((fail + 1))
  else
    echo "ok: precfuzz $* -> exit $rc; $(grep -- "$needle" <<<"$out" | head -1)"
  fi
}
check 1 "overflow 200" run -k softmax -v naive -t fp16 -a fp16 --scale 16 --cases 200 --seed 1
check 0 "ok 200" run -k softmax -v safe -t fp16 -a fp16 --scale 16 --cases 200 --seed 1
check 0 "ok 200" run -k softmax -v naive -t bf16 -a bf16 --scale 16 --cases 200 --seed 1
[ $fail -eq 0 ]
