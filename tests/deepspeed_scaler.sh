#!/bin/bash
# DeepSpeed's DynamicLossScaler (0.19.8, examples/deepspeed_loss_scaler.py) against precfuzz's
# loss_scale/deepspeed-0.19, bit for bit: the applied gradients, each step's status (applied,
# skipped, stopped at the minimum scale) and the scale, in three dtypes, with the config's
# defaults, a short window (the window + 1 growth rule), a spike, and gradients that turn
# infinite until the run stops. Skipped without DeepSpeed (scripts/python-env.sh --frameworks).
# usage: tests/deepspeed_scaler.sh PRECFUZZ PYTHON
P=$(realpath "$1")
PY=$2
. "$(dirname "$0")/check.sh"
need_python deepspeed.runtime.fp16.loss_scaler "scripts/python-env.sh --frameworks installs it"

for t in fp32 fp16 bf16; do
  scaler_agrees ds-loss-scaler deepspeed_loss_scaler $t 1
done
# the run stops where DeepSpeed raises "Current loss scale already at minimum": at the minimum
# scale 2^10, after the gradients turned infinite (step 20), and stays stopped
n=$((n + 1))
out=$("$P" --kernels "$(ex deepspeed_loss_scaler)" run -k loss_scale -v ds-loss-scaler -t fp16 --shape 60x4 --param window=5 \
  --param min_scale=0x1p10 --param hysteresis=1 --param nonfinite_from=20 --cases 1 --json 2>/dev/null)
echo "$out" | python3 -c '
import json, sys
e = json.load(sys.stdin)["cases"][0]["elements"]
T, n = 60, 4
status = [float.fromhex(e[T * n + t]["y"]) for t in range(T)]
scale = [float.fromhex(e[T * n + T + t]["y"]) for t in range(T)]
i = status.index(2.0)
assert i >= 19 and all(s == 2.0 for s in status[i:]) and scale[i] == 1024.0, (status, scale)' ||
  fail "the stop at the minimum scale: $out"

echo "deepspeed_scaler: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
