#!/bin/bash
# run's default cases draw the hyperparameters users train with (pf_param_desc.train): a fault
# that lives only beyond step 256 (the fault adam-step-bf16: torchao's bf16 step count, stuck at
# 256 before its PR 4915) is found at run's defaults and missed with --at-defaults (step 1); a
# finding's replay line reproduces it, and so does its seed alone; a parameter the command line
# gives is never drawn; a variant's narrowing holds (block: flash only); fp32-held decimals are
# drawn as fp32 values; list says what is drawn.
# usage: tests/cli_training_draws.sh PRECFUZZ
P=$1
. "$(dirname "$0")/check.sh"

n=$((n + 1))
out=$("$P" run -k adam -v torch -t bf16 --fault adam-step-bf16 --cases 100 --max-print 1 2>&1)
found=$(echo "$out" | sed -n 's/^  findings \([0-9]*\) .*/\1/p')
[ "${found:-0}" -ge 5 ] && echo "$out" | grep -q "^  drawn per case from the values users train with .*: lr, beta2, eps, wd, step$" ||
  fail "adam-step-bf16 at run's defaults: $found findings: $out"
n=$((n + 1))
out0=$("$P" run -k adam -v torch -t bf16 --fault adam-step-bf16 --cases 100 --at-defaults 2>&1)
echo "$out0" | grep -q "^  findings 0 " && ! echo "$out0" | grep -q "drawn per case" ||
  fail "--at-defaults: step 1 cannot show the fault: $out0"

# the finding's replay line, and its seed alone, give the same finding
n=$((n + 1))
first=$(echo "$out" | grep -m1 "^FINDING")
rep=$(echo "$out" | grep -A1 -m1 "^FINDING" | sed -n 's/.*reproduce with: //p')
seed=$(echo "$first" | sed 's/.* seed \([0-9]*\):.*/\1/')
echo "$rep" | grep -q -- "--param step=[0-9]* .*--at-defaults --seed $seed --cases 1" || fail "replay line: $rep"
again=$(eval "$rep" 2>&1 | grep -m1 "^FINDING")
alone=$("$P" run -k adam -v torch -t bf16 --fault adam-step-bf16 --seed "$seed" --cases 1 2>&1 | grep -m1 "^FINDING")
[ -n "$first" ] && [ "$again" = "$first" ] && [ "$alone" = "$first" ] ||
  fail "replay: '$first' / '$again' / '$alone'"

# what --json says each case ran with
params() { python3 -c '
import json, sys
for c in json.load(sys.stdin)["cases"]:
    print(c["case"]["params"].get(sys.argv[1]))' "$1"; }
n=$((n + 1))
steps=$("$P" run -k adam -v torch -t bf16 --param step=5 --cases 20 --json 2>/dev/null | params step | sort -u)
[ "$steps" = "5" ] || fail "a given step was drawn over: $steps"
n=$((n + 1))
lrs=$("$P" run -k adam -v torch -t bf16 --cases 60 --json 2>/dev/null | params lr | sort -u | wc -l)
[ "$lrs" -eq 7 ] || fail "60 cases drew $lrs of adam's 7 learning rates"
n=$((n + 1))
blocks=$("$P" run -k attention -v flash --cases 40 --json 2>/dev/null | params block | sort -nu | tr '\n' ' ')
other=$("$P" run -k attention -v post-scale --cases 40 --json 2>/dev/null | params block | sort -u | tr '\n' ' ')
[ "$blocks" = "4 8 64 128 " ] && [ "$other" = "64 " ] || fail "block: flash drew '$blocks', post-scale '$other'"
n=$((n + 1))
ls=$("$P" run -k cross_entropy -v fused --cases 20 --json 2>/dev/null | params label_smoothing | sort -u | tr '\n' ' ')
[ "$ls" = "0x0p+0 0x1.99999ap-4 " ] || fail "label_smoothing drew '$ls' (0 and fl32(0.1))"
n=$((n + 1))
"$P" list | grep -q "^  adam step .*; run draws it from 1..1000000$" || fail "list does not say what run draws"
expect2 "--at-defaults" "$P" run -k adam --at-defaults --at-defaults --cases 1
expect2 "--at-defaults" "$P" run -k adam --at-defaults=1 --cases 1

echo "cli_training_draws: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
