#!/bin/bash
# PyTorch's kernels through the kernel protocol (examples/torch_*.py), on the CPU: each is
# judged ok on generated cases in fp32, fp16 and bf16; its bitwise agreement with precfuzz's
# emulation is what was measured for torch 2.15.0 (where the emulation is exact: the scaler,
# the three AdamW paths in fp16/bf16, clip_grad_norm_ in fp16/bf16); the two cases fuzzing
# PyTorch found before the emulations modelled it replay ok; the softmax driver fuzzes
# torch.softmax without a finding. Skipped without PyTorch (scripts/python-env.sh --torch).
# usage: tests/torch_kernels.sh PRECFUZZ SOFTMAX_FUZZER PYTHON
P=$(realpath "$1")
F=$(realpath "$2")
PY=$3
. "$(dirname "$0")/check.sh"
need_python "torch, numpy" "scripts/python-env.sh --torch installs it"

# KERNEL VARIANT EXAMPLE CASES, for every variant of the PyTorch kernel processes the examples
# declare (scripts/targets.py): ok on every case in each dtype
mapfile -t rows < <(python3 scripts/targets.py --needs torch --variants)
[ ${#rows[@]} -ge 10 ] || fail "scripts/targets.py lists ${#rows[@]} PyTorch kernel variants"
for row in "${rows[@]}"; do
  set -- $row
  for t in fp32 fp16 bf16; do
    n=$((n + 1))
    out=$("$P" --kernels "$(ex $3)" run -k $1 -v $2 -t $t --cases $4 2>&1)
    [ $? -eq 0 ] && echo "$out" | grep -q "^$1/$2 $t/fp32: $4 cases (seeds 1..$4): ok $4 *$" || fail "$2 $t: $out"
  done
done
# causal attention with q_len != k_len, both alignments: the mask built for SDPA is the
# operation's (bottom right), and SDPA's own is_causal is causal-top-left
for m in causal causal-top-left; do
  for s in 1x2x8x16x8 1x2x16x8x8; do
    n=$((n + 1))
    out=$("$P" --kernels "$(ex torch_sdpa)" run -k attention -v torch-sdpa -t fp16 --shape $s --param mask=$m --cases 10 2>&1) ||
      fail "sdpa $m $s: $out"
  done
done

agree torch-gradscaler torch_grad_scaler loss_scale fp16 100.00
agree torch-gradscaler torch_grad_scaler loss_scale bf16 100.00
# at the fp32 ceiling: _amp_update_scale_ keeps 2^127 rather than growing to inf
agree torch-gradscaler torch_grad_scaler loss_scale fp32 100.00 --param scale0=0x1p64 --param window=1 --shape 70x2 \
  --input g:value=0
# SDPA's backward on the CPU under attention_bwd/flash's contract, both causal alignments; on every
# query's largest score tied (tests/data/attention_bwd/tied-max-*.npy) its bf16 dQ is noise, as the
# emulation's is (the hazard imprecise: D = rowsum(dO o O) from the bf16 output)
for m in causal causal-top-left; do
  for s in 1x2x8x16x8 1x2x16x8x8; do
    n=$((n + 1))
    out=$("$P" --kernels "$(ex torch_sdpa_backward)" run -k attention_bwd -v torch-sdpa-bwd -t bf16 --shape $s --param mask=$m \
      --cases 10 2>&1) || fail "sdpa backward $m $s: $out"
  done
done
n=$((n + 1))
T=$(dirname "$0")/data/attention_bwd/tied-max
out=$("$P" --kernels "$(ex torch_sdpa_backward)" run -k attention_bwd -v torch-sdpa-bwd -t bf16 --shape 1x8x64x64x16 \
  --input q:file=$T-q.npy --input k:file=$T-k.npy --input v:file=$T-v.npy --input do:file=$T-do.npy --cases 1 2>&1)
echo "$out" | grep -q "(verdict ok): imprecise" && echo "$out" | grep -q "imprecise: dQ: normwise relative error [1-9]" ||
  fail "sdpa backward on tied maxima (expected dQ imprecise, error above 1): $out"

# F.cross_entropy on the CPU: bit for bit with logsoftmax-cpu in fp16 and bf16 (the sum and its log
# held in the input's dtype, nll_loss's cascade in it), 40 rows too (the cascade's second level)
agree torch-cross-entropy torch_cross_entropy cross_entropy fp16 100.00
agree torch-cross-entropy torch_cross_entropy cross_entropy bf16 100.00 --shape 40x300
agree torch-cross-entropy torch_cross_entropy cross_entropy bf16 100.00 --shape 6x300 --param reduction=sum
# label smoothing as PyTorch composes it ((1 - eps) nll + smooth eps / C, each op stored in the input's dtype)
for r in mean none; do
  agree torch-cross-entropy torch_cross_entropy cross_entropy fp16 100.00 --shape 6x300 --param label_smoothing=0.125 \
    --param reduction=$r
done
# and its fp16 overflow: -sum lp stored in fp16 is -inf where the loss is 4500 (the regression case, run by torch)
n=$((n + 1))
ce=$(mktemp --suffix=.json)
sed 's/"logsoftmax-cpu"/"torch-cross-entropy"/' "$(dirname "$0")/../corpora/regressions/cross-entropy-torch-smoothing-fp16-overflow.json" >"$ce"
out=$("$P" --kernels "$(ex torch_cross_entropy)" replay "$ce" 2>&1)
echo "$out" | grep -q "torch-cross-entropy fp16/fp32: overflow (overflow, born in loss at loss\[0\]: got inf" ||
  fail "torch's smoothing overflow: $out"
rm -f "$ce"
agree torch-adamw torch_adamw adam fp16 100.00
agree torch-adamw torch_adamw adam bf16 100.00
# fp32: the share equal to the emulation depends on the CPU (torch's fp32 sqrt is MKL's
# vsSqrt, not correctly rounded, and its path differs by instruction set): printed, not checked
rate=$("$P" --kernels "$(ex torch_adamw)" diff-variant -k adam -v torch-adamw -t fp32 --cases 20 2>&1 |
  awk '$1 == "adam" && $2 == "torch-adamw" {print $7}')
echo "torch-adamw fp32 on this CPU ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)): ${rate:-?} of the outputs bitwise equal to adam/torch"

# fp32 AdamW with m subnormal: torch's addcdiv_ rounds lr/bc1 * m (a deeper subnormal) before
# dividing by the denominator, 781 ulps off; adam/torch models that order, so it is within the
# contract, and the emulation computes the same bits
n=$((n + 1))
out=$("$P" --kernels "$(ex torch_adamw)" replay tests/data/torch/adamw-fp32-subnormal-m.json 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "adam/torch-adamw fp32/fp32: ok \[as expected\]" || fail "the fp32 AdamW subnormal case: $out"
agree torch-adamw torch_adamw adam fp32 100.00 --input p:value=0x1.0802p-125 --input g:value=0x1.60585p-125 --input m:value=0 \
  --input v:value=0 --param step=514 --param beta2=0x1.ff7ced916872bp-1 --param eps=0x1.5798ee2308c3ap-27

# fp16 clip_grad_norm_ with max_norm 2^-13: torch rounds its coefficient (norm + 1e-6)
# .reciprocal() * max_norm in fp16 step by step, as clip/torch now does: within the contract
n=$((n + 1))
out=$("$P" --kernels "$(ex torch_clip)" replay tests/data/torch/clip-fp16-small-max-norm.json 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "clip/torch-clip fp16/fp32: ok \[as expected\]" || fail "the fp16 clip case: $out"
agree torch-clip torch_clip clip fp16 100.00
agree torch-clip torch_clip clip bf16 100.00
agree torch-clip torch_clip clip fp16 100.00 --param max_norm=0x1p-13 --scale 16
agree torch-adamw-foreach torch_adamw adam fp16 100.00 --param wd=0.1
# _foreach_mul_ rounds beta2 to bf16 through fp32: at 0x1.fefffffp-1 that is 1 (directly: 0x1.fep-1)
agree torch-adamw-foreach torch_adamw adam bf16 100.00 --param beta2=0x1.fefffffp-1
agree torch-adamw-fused torch_adamw adam fp16 100.00 --param wd=0.01 --param beta1=0.3 --param step=7
agree torch-adamw-fused torch_adamw adam bf16 100.00
# what GradScaler hands the fused step: the gradients unscaled inside it, in fp32 and not stored
# to T first (a scale of 1000: 27% of bf16 m differ if the quotient is stored first), and a found
# inf that leaves everything as it was
agree torch-adamw-fused torch_adamw adam bf16 100.00 --param grad_scale=1000
agree torch-adamw-fused torch_adamw adam fp16 100.00 --param grad_scale=0x1p16 --param wd=0.1
agree torch-adamw-fused torch_adamw adam bf16 100.00 --param grad_scale=0x1p16 --param found_inf=1
# PyTorch's own bf16 AdamW over 100 steps (run --steps), no training loop written: from p = 1
# with g = 1/2 it never moves while the exact trajectory reaches 0.900000002 (tests/cli_trajectory.sh
# derives it), as the emulation says
n=$((n + 1))
out=$("$P" --kernels "$(ex torch_adamw)" run -k adam -v torch-adamw -t bf16 --shape 8 --steps 100 --input p:value=1 \
  --input m:value=0 --input v:value=0 --input g:value=0.5 --at-defaults --cases 1 2>&1)
echo "$out" | grep -q "stagnant: 8 of the 8 elements the exact trajectory moved an ulp or more never moved (p\[0\] stayed 1, exact 0.900000002)" ||
  fail "PyTorch's AdamW as a trajectory: $out"
n=$((n + 1))
out=$("$P" --kernels "$(ex torch_adamw)" run -k adam -v torch-adamw-fused -t bf16 --cases 40 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "drawn per case .*: lr, beta2, eps, wd, step, grad_scale, found_inf$" ||
  fail "run's defaults on the fused AdamW: $out"
# denominators made by eps (v tiny): add_(eps) takes eps in bf16 on the single-tensor and
# foreach paths (the fused kernel in fp32); the case make fuzz-torch found in CI and here
EPS_DOMINATED="--param eps=0x1.0c6f7a0b5ed8dp-20 --param step=100000 --input p:scale=0x1p-48 --input v:scale=0x1p-40 --input m:scale=0x1p-30 --input g:scale=0x1p-30 --shape 64"
for v in torch-adamw torch-adamw-foreach torch-adamw-fused; do
  agree $v torch_adamw adam bf16 100.00 $EPS_DOMINATED
done
n=$((n + 1))
out=$("$P" --kernels "$(ex torch_adamw)" replay tests/data/torch/adamw-foreach-bf16-eps-dominates.json 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "adam/torch-adamw-foreach bf16/fp32: ok \[as expected\]" || fail "the eps-dominated foreach case: $out"

# F.layer_norm on the CPU: bit for bit with layernorm/torch (mean, rstd and y) in every dtype, on
# rows that stop short of a vector, fill one, end in a scalar tail, or pass the moments' cascade
# (40000: five levels), with fp32 weights and a mean far from 0; exactly 1, not rounded to 100.00%.
# fp16 with fp32 weights saves rstd in fp32, where its scalar tail's fma shows (rows of 8 and 24).
bitwise() { python3 -c 'import json,sys; v=json.load(sys.stdin)["variants"][0]; sys.exit(v["bitwise_equal"] != 1)'; }
for t in fp32 fp16 bf16; do
  for s in 3x7 2x33 4x1000 1x40000; do
    n=$((n + 1))
    out=$("$P" --kernels "$(ex torch_layer_norm)" diff-variant -k layernorm -v torch-layer-norm -t $t --cases 5 \
      --shape $s --param weights=$([ $t = fp32 ] && echo storage || echo fp32) --input x:offset=3 --json 2>&1)
    echo "$out" | bitwise || fail "F.layer_norm $t $s: not bit for bit with layernorm/torch: $out"
  done
done
n=$((n + 1))
out=$("$P" --kernels "$(ex torch_layer_norm)" diff-variant -k layernorm -v torch-layer-norm -t fp16 --cases 3 \
  --shape 300x8 --param weights=storage --json 2>&1)
echo "$out" | bitwise || fail "F.layer_norm fp16 300x8 fp16 weights: not bit for bit with layernorm/torch: $out"

# its backward (aten::native_layer_norm_backward after the forward): dx, dgamma and dbeta bit for
# bit with layernorm_bwd/torch, rows under a vector (7), with a partial vector (13, 33, 100),
# 16 + 8 (24), many (1000); 1 and 3 threads (each sums its rows' dgamma and dbeta in its own
# buffer); weights of the input's dtype and fp32
for t in fp32 fp16 bf16; do
  for w in storage fp32; do
    [ $t = fp32 ] && [ $w = fp32 ] && continue
    for s in 3x7 5x13 4x24 4x33 100x16 6x1000; do
      n=$((n + 1))
      b=$([ $s = 100x16 ] && echo 3 || echo 1)
      out=$("$P" --kernels "$(ex torch_layer_norm_backward)" diff-variant -k layernorm_bwd -v torch-layer-norm-backward \
        -t $t --cases 3 --shape $s --param weights=$w --param blocks=$b --input x:offset=3 --json 2>&1)
      echo "$out" | bitwise || fail "native_layer_norm_backward $t $w $s: not bit for bit with layernorm_bwd/torch: $out"
    done
  done
done
# the bf16 buffer: 4096 tokens of dy = 1 give dbeta 256 (PyTorch and the emulation alike), a hazard
n=$((n + 1))
out=$("$P" --kernels "$(ex torch_layer_norm_backward)" run -k layernorm_bwd -v torch-layer-norm-backward -t bf16 \
  --cases 1 --shape 4096x8 --param weights=fp32 --param blocks=1 --input dy:value=1 2>&1)
echo "$out" | grep -q "saturated: dbeta\[0\] came out as 256 where the exact sum over the 4096 tokens is 4096" ||
  fail "native_layer_norm_backward bf16: the saturated dbeta: $out"

# F.rms_norm likewise (rstd by the composite's own ops): the scalar sum (5), vectors with a tail
# (33), the cascade (1000), a row past ATen's grain (40000, one thread)
for t in fp32 fp16 bf16; do
  for s in 3x5 2x33 4x1000 1x40000; do
    n=$((n + 1))
    out=$("$P" --kernels "$(ex torch_rms_norm)" diff-variant -k rmsnorm -v torch-rms-norm -t $t --cases 5 --shape $s \
      --param weights=$([ $t = bf16 ] && echo fp32 || echo storage) --json 2>/dev/null)
    echo "$out" | bitwise || fail "F.rms_norm $t $s: not bit for bit with rmsnorm/torch: $out"
  done
done

# autograd through F.rms_norm (its composite's ops): dx and dgamma bit for bit with
# rmsnorm_bwd/torch; rows under a vector (5), with a tail (13, 33), 32 + 8 columns (40: the
# outer sum's groups), 37 (32 and five single columns), many tokens (1000)
for t in fp32 fp16 bf16; do
  for w in storage fp32; do
    [ $t = fp32 ] && [ $w = fp32 ] && continue
    for s in 3x5 5x13 4x33 7x40 1000x37; do
      n=$((n + 1))
      out=$("$P" --kernels "$(ex torch_rms_norm_backward)" diff-variant -k rmsnorm_bwd -v torch-rms-norm-backward \
        -t $t --cases 2 --shape $s --param weights=$w --json 2>&1)
      echo "$out" | bitwise || fail "F.rms_norm's backward $t $w $s: not bit for bit with rmsnorm_bwd/torch: $out"
    done
  done
done

# the softmax driver on torch.softmax: no finding
n=$((n + 1))
# (a copy of the corpus: a libFuzzer build of the driver would write its new inputs into it)
CORPUS=$(mktemp -d)
cp corpora/softmax_fuzzer/* "$CORPUS"/
out=$(PRECFUZZ_KERNELS="$(ex torch_softmax)" PF_FUZZ_VARIANT=torch-softmax "$F" -runs=2000 -seed=1 "$CORPUS" 2>&1)
rm -rf "$CORPUS"
[ $? -eq 0 ] && echo "$out" | grep -q "2000 mutated inputs .* no finding" || fail "fuzzing torch.softmax: $out"
rm -f finding-softmax_fuzzer-*.json crash-*

echo "torch_kernels: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
