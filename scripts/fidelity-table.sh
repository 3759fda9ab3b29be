#!/usr/bin/env bash
# The fidelity table (docs/own-kernels.md): the frameworks' own kernels under precfuzz. For each example
# (examples/torch_*.py, examples/deepspeed_loss_scaler.py, examples/megatron_grad_scaler.py) and dtype, generated cases judged
# against the contract it names (findings, largest distance from the correctly rounded result
# in ulps) and the share of its outputs bitwise equal to precfuzz's emulation of that contract
# on the same cases (precfuzz diff-variant), with why the rest differs. A row is: operation,
# variant, example, the contract it names, cases (the example's declared count), and the dtypes
# it takes.
#   scripts/fidelity-table.sh [PRECFUZZ]   (default build/bin/precfuzz; needs python-env.sh --frameworks)
# PRECFUZZ_DEVICE=cuda measures PyTorch's CUDA kernels instead.
set -uo pipefail
cd "$(dirname "$0")/.."
P=${1:-build/bin/precfuzz}
PY=$(scripts/python-env.sh --frameworks) || exit 2
TV=$("$PY" -c "import torch; print(torch.__version__.split('+')[0])")
DV=$("$PY" -c "import deepspeed; print(deepspeed.__version__)" 2>/dev/null | tail -1)
MV=$("$PY" -c "from importlib.metadata import version; print(version('megatron-core'))")
# why a variant and dtype is not bit for bit what the emulation computes (measured, see docs/own-kernels.md)
why() {
  case "$1 $2" in
    "torch-softmax fp32" | "torch-softmax fp16") echo "ATen's vectorized softmax (its exp and sum order) is not modelled" ;;
    "torch-softmax-bwd "*) echo "ATen's vectorized softmax backward (its sum order) is not modelled" ;;
    "torch-sdpa "*) echo "the fused CPU kernel's blocking and exp are not modelled" ;;
    "torch-adamw fp32" | "torch-adamw-foreach fp32")
      echo "torch's CPU fp32 sqrt is MKL's vsSqrt (ATen cpu/vml.h): not correctly rounded (1 ulp off on 19.8% of inputs in [0,4) here) and CPU-dependent; the emulation's is correctly rounded" ;;
    "torch-clip fp32") echo "torch's fp32 norm is a vectorized reduction (order by vector width); the emulation sums in order" ;;
    *) echo "" ;;
  esac
}
echo "| framework op (variant, contract) | framework | dtype | cases | findings | max ulps | bitwise = emulation | why not all |"
echo "|---|---|---|---|---|---|---|---|"
# every variant of the kernel processes the examples declare (scripts/targets.py), with the
# contract it names (its "like") and the dtypes it takes, from precfuzz list --json
rows=()
while IFS=$'\t' read -r ex kernel variants _ start _ cases; do
  [ "$start" = exec ] || continue
  name=$(basename "$ex" .py)
  while read -r v like dtypes; do
    rows+=("$kernel $v $name $like $cases $dtypes")
  done < <("$P" --kernels "exec:$PY $ex" list --json | python3 -c '
import json, sys
for k in json.load(sys.stdin):
    if k.get("like"):
        print(k["variant"], k["like"], ",".join(k["dtypes"]))')
done < <(python3 scripts/targets.py --needs torch --needs frameworks)
for row in "${rows[@]}"; do
  set -- $row
  K="exec:$PY examples/$3.py"
  diff=$("$P" --kernels "$K" diff-variant -k $1 -v $2 --cases $5 2>&1)
  # the dtypes the framework's path takes (DeepSpeed scales fp16 only)
  for t in ${6//,/ }; do
    out=$("$P" --kernels "$K" run -k $1 -v $2 -t $t --cases $5 2>&1)
    findings=$(echo "$out" | sed -n 's/^  findings \([0-9]*\) .*/\1/p')
    ulps=$(echo "$out" | sed -n 's/.*; max ulps \([0-9]*\) .*/\1/p')
    eq=$(echo "$diff" | awk -v t="$t/fp32" '$4 == t {print $7}')
    reason=""
    [ "${eq:-?}" = 100.00% ] || reason=$(why $2 $t)
    fw="torch $TV"
    [ "$3" = deepspeed_loss_scaler ] && fw="DeepSpeed $DV"
    [ "$3" = megatron_grad_scaler ] && fw="megatron-core $MV (CPU)"
    echo "| \`$2\` ($1/$4) | $fw | $t | $5 | ${findings:-?} | ${ulps:-?} | ${eq:-?} | $reason |"
  done
done
