#!/bin/bash
# Megatron's DynamicGradScaler (megatron-core 0.16.1, examples/megatron_grad_scaler.py) against
# precfuzz's loss_scale/megatron, bit for bit: the applied gradients, each step's status and the
# scale, in three dtypes, with Megatron's defaults, a short window, a spike, gradients that turn
# infinite (Megatron keeps skipping at the minimum scale), and the fp32 ceiling, where the scale
# tensor becomes inf and every later step is skipped. Skipped without megatron-core
# (scripts/python-env.sh --frameworks).
# usage: tests/megatron_scaler.sh PRECFUZZ PYTHON
P=$(realpath "$1")
PY=$2
. "$(dirname "$0")/check.sh"
need_python megatron.core.optimizer.grad_scaler "scripts/python-env.sh --frameworks installs it"

for t in fp32 fp16 bf16; do
  scaler_agrees megatron-grad-scaler megatron_grad_scaler $t 3
  agree megatron-grad-scaler megatron_grad_scaler loss_scale $t 100.00 --param scale0=0x1p64 --param window=1 --shape 70x2
done
# at the fp32 ceiling: 2^127 doubles to inf (an fp32 tensor), inv_scale is then 0, every
# gradient fl(inf g) is inf or NaN, and every later step is skipped with the scale still inf
n=$((n + 1))
out=$("$P" --kernels "$(ex megatron_grad_scaler)" run -k loss_scale -v megatron-grad-scaler -t fp32 --shape 70x2 \
  --param scale0=0x1p64 --param window=1 --cases 1 --json 2>/dev/null)
echo "$out" | python3 -c '
import json, sys
e = json.load(sys.stdin)["cases"][0]["elements"]
T, n = 70, 2
status = [float.fromhex(e[T * n + t]["y"]) for t in range(T)]
scale = [float.fromhex(e[T * n + T + t]["y"]) for t in range(T)]
# scale0 2^64 doubles after every clean step: 2^127 after step 63 (index 62), inf after the next
assert scale[62] == 2.0**127 and scale[63] == float("inf"), scale
assert status[63] == 0 and all(s == 1.0 for s in status[64:]) and all(s == float("inf") for s in scale[63:]), (status, scale)' ||
  fail "the fp32 ceiling: $out"

echo "megatron_scaler: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
