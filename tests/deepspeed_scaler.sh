#!/bin/bash
# DeepSpeed 0.19.8's three fp16 training paths (examples/deepspeed_loss_scaler.py: ZeRO stage 1's
# step with DynamicLossScaler, FP16_Optimizer, FP16_UnfusedOptimizer, each run through its own
# backward and step) against precfuzz's loss_scale/deepspeed-0.19 and deepspeed-0.19-fp16, bit
# for bit: the gradients handed to the optimizer, each step's status (applied, skipped, stopped
# at the minimum scale) and the scale, with the config's defaults, a short window (the window + 1
# growth rule, and the gradients of a growth step unscaled by the doubled scale), a spike, and
# gradients that turn infinite down to the minimum scale. Skipped without DeepSpeed
# (scripts/python-env.sh --frameworks).
# usage: tests/deepspeed_scaler.sh PRECFUZZ PYTHON
P=$(realpath "$1")
PY=$2
. "$(dirname "$0")/check.sh"
need_python deepspeed.runtime.fp16.loss_scaler "scripts/python-env.sh --frameworks installs it"

for v in ds-zero1-scaler ds-fp16-optimizer ds-fp16-unfused; do
  scaler_agrees $v deepspeed_loss_scaler fp16 1
done
# at the minimum scale 2^10, after the gradients turned infinite (step 20): ZeRO's run stops
# where DeepSpeed raises "Current loss scale already at minimum" and stays stopped;
# FP16_Optimizer keeps the minimum and skips every later step
for v in ds-zero1-scaler ds-fp16-optimizer; do
  n=$((n + 1))
  out=$("$P" --kernels "$(ex deepspeed_loss_scaler)" run -k loss_scale -v $v -t fp16 --shape 60x4 --param window=5 \
    --param min_scale=0x1p10 --param hysteresis=1 --param nonfinite_from=20 --cases 1 --json 2>/dev/null)
  echo "$out" | python3 -c '
import json, sys
e = json.load(sys.stdin)["cases"][0]["elements"]
T, n = 60, 4
status = [float.fromhex(e[T * n + t]["y"]) for t in range(T)]
scale = [float.fromhex(e[T * n + T + t]["y"]) for t in range(T)]
if sys.argv[1] == "ds-zero1-scaler":
    i = status.index(2.0)
    assert i >= 19 and all(s == 2.0 for s in status[i:]) and scale[i] == 1024.0, (status, scale)
else:
    assert 2.0 not in status and all(s == 1.0 for s in status[19:]) and scale[-1] == 1024.0, (status, scale)' $v ||
    fail "$v at the minimum scale: $out"
done
# a growth step: scale 16, window 2, so the scale doubles after step 3 (stable interval 2); the
# gradients of that step are divided by 32: DeepSpeed's order, reported as the hazard imprecise
for v in ds-zero1-scaler ds-fp16-unfused; do
  n=$((n + 1))
  out=$("$P" --kernels "$(ex deepspeed_loss_scaler)" run -k loss_scale -v $v -t fp16 --shape 4x2 --param window=2 \
    --param scale0=16 --cases 1 2>&1)
  echo "$out" | grep -q "imprecise: step 3: the scale grew from 16 to 32 .* receives 0.5 of the true gradient" &&
    echo "$out" | grep -q ": 1 cases (seeds 1..1): ok 1" || fail "$v's growth step: $out"
done

echo "deepspeed_scaler: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
