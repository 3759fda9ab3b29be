#!/usr/bin/env bash
# The README's table of PyTorch's kernels under precfuzz: for each example (examples/torch_*.py)
# and dtype, generated cases judged against the contract it names (findings, largest distance
# from the correctly rounded result in ulps) and the share of its outputs bitwise equal to
# precfuzz's emulation of that contract on the same cases (precfuzz diff-variant).
#   scripts/torch-table.sh [PRECFUZZ]     (default build/bin/precfuzz; needs python-env.sh --torch)
# PRECFUZZ_DEVICE=cuda measures PyTorch's CUDA kernels instead.
set -uo pipefail
cd "$(dirname "$0")/.."
P=${1:-build/bin/precfuzz}
PY=$(scripts/python-env.sh --torch) || exit 2
echo "| PyTorch op (variant, contract) | dtype | cases | findings | max ulps | bitwise = emulation |"
echo "|---|---|---|---|---|---|"
for row in "softmax torch-softmax torch_softmax safe 200" "attention torch-sdpa torch_sdpa flash 50" \
  "adam torch-adamw torch_adamw torch 100" "adam torch-adamw-foreach torch_adamw torch-foreach 100" \
  "adam torch-adamw-fused torch_adamw torch 100" "clip torch-clip torch_clip torch 100" \
  "loss_scale torch-gradscaler torch_grad_scaler pytorch 50"; do
  set -- $row
  K="exec:$PY examples/$3.py"
  diff=$("$P" --kernels "$K" diff-variant -k $1 -v $2 --cases $5 2>&1)
  for t in fp32 fp16 bf16; do
    out=$("$P" --kernels "$K" run -k $1 -v $2 -t $t --cases $5 2>&1)
    findings=$(echo "$out" | sed -n 's/^  findings \([0-9]*\) .*/\1/p')
    ulps=$(echo "$out" | sed -n 's/.*; max ulps \([0-9]*\) .*/\1/p')
    eq=$(echo "$diff" | awk -v t="$t/fp32" '$4 == t {print $7}')
    echo "| \`$2\` ($1/$4) | $t | $5 | ${findings:-?} | ${ulps:-?} | ${eq:-?} |"
  done
done
