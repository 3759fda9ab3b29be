#!/bin/bash
# Hazards (core/hazard.h): each example of a correct algorithm with a useless result is
# reported as its hazard, with its boundary found by precfuzz boundary to adjacent values and
# checked against a value derived by hand; a planted biased rounding inside the contract is
# found; and what must not be flagged is not.
# usage: tests/hazards.sh PRECFUZZ
P=$(realpath "$1")
. "$(dirname "$0")/check.sh"

# has OUTPUT LINE: OUTPUT has the fixed string LINE
has() { printf '%s\n' "$1" | grep -qF -- "$2"; }
# boundary_is "passes up to A: ...; fails from B" ARGS...: the boundary line of precfuzz boundary
boundary_is() {
  n=$((n + 1))
  local want=$1 out
  shift
  out=$("$P" boundary "$@" 2>&1)
  has "$out" "$want" || fail "boundary $* (expected '$want'): $out"
}

# 1. softmax over n equal logits, fp16 accumulation: exp(0) = 1 each, and the fp16 running sum
# stops at 2048 (2048 + 1 is a tie, kept at the even 2048). Every output is fl16(1/2048) =
# 2^-11 where the exact one is 1/n, so the outputs sum to n / 2048: saturated (and imprecise)
# when n / 2048 - 1 > 2^-7 (fp16's threshold, max(2^-10, 16 u)), n > 2064.
n=$((n + 1))
out=$("$P" run -k softmax -v safe -t fp16 -a fp16 --shape 1x4096 --input x:value=0 --at-defaults --cases 1 2>&1)
has "$out" "HAZARD softmax/safe fp16/fp16 seed 1 (verdict ok): saturated,imprecise" &&
  has "$out" "row 0: its outputs sum to 2 (exact 1)" || fail "softmax 4096 equal logits: $out"
# the same configuration over 5 cases: the hazard in every one, its HAZARD line once (at the
# first case; a line per case would bury the findings), and the summary says it holds for all
n=$((n + 1))
out=$("$P" run -k softmax -v safe -t fp16 -a fp16 --shape 1x4096 --input x:value=0 --at-defaults --cases 5 2>&1)
[ "$(echo "$out" | grep -c '^HAZARD ')" -eq 1 ] && has "$out" "hazards in 5 cases: saturated 5, imprecise 5" &&
  has "$out" "saturated in all 5 cases: it comes with this configuration" || fail "one HAZARD line per kind: $out"
# ... and run searches where it starts along the summed dimension, from the first case: the fp16
# running sum stops at 2048, each of the n outputs is 1/2048, a row sums to n/2048, beyond
# 1 + 2^-7 (fp16's threshold) from n = 2065; the line it prints runs the case there
n=$((n + 1))
has "$out" "saturated along dimension cols from seed 1's case: from 2065 up (2064: none)" &&
  rep=$(echo "$out" | sed -n 's/^    at the boundary: //p') && echo "$rep" | grep -q -- "--shape 1x2065 " &&
  eval "$rep" 2>&1 | grep -q "^HAZARD .*saturated" || fail "saturated's boundary from run: $out"
for h in saturated imprecise; do
  boundary_is "passes up to 2064: ok; fails from 2065: ok (hazards saturated,imprecise)" -k softmax -v safe -t fp16 -a fp16 \
    --shape 1x4096 --input x:value=0 --along dim:cols --from 1000 --to 4096 --fail $h
done
# with fp32 accumulation the sum is exact up to 2^24: no hazard at any length
boundary_is "no boundary in the range: every grid point passes" -k softmax -v safe -t fp16 -a fp32 --shape 1x4096 \
  --input x:value=0 --along dim:cols --from 1 --to 65536 --fail hazard

# 2. clip of n ones with fp16 sums of squares: the sum stops at 2048, the norm is
# fl32(sqrt(2048)) = 45.2548332 where the exact is sqrt(n) (64 for 4096). Saturated when
# 1 - 45.2548332 / sqrt(n) > 2^-7 (the looser of fp32's and fp16's thresholds):
# sqrt(2080) = 45.6070 gives 0.00772, sqrt(2081) = 45.6180 gives 0.00796.
n=$((n + 1))
out=$("$P" run -k clip -v megatron -t fp16 -a fp16 --shape 1x4096 --input g:value=1 --cases 1 2>&1)
has "$out" "the global norm came out as 45.2548 where the exact norm is 64" || fail "clip 4096 ones: $out"
boundary_is "passes up to 2080: ok; fails from 2081: ok (hazards saturated,imprecise)" -k clip -v megatron -t fp16 -a fp16 \
  --shape 1x4096 --input g:value=1 --along dim:n --from 1000 --to 4096 --fail saturated
boundary_is "no boundary in the range: every grid point passes" -k clip -v megatron -t fp16 -a fp32 --shape 1x4096 \
  --input g:value=1 --along dim:n --from 1 --to 4194304 --fail saturated

# 3. Adam's second moment in bf16, one step from v = 1 with g = 0: v' = fl_bf16(fl32(fl32(beta2)
# * 1)), which rounds back to 1 when fl32(beta2) >= 1 - 2^-9 (the midpoint between 1 and
# bf16's 1 - 2^-8; the tie goes to the even 1). fl32(beta2) reaches 1 - 2^-9 from beta2 =
# 1 - 2^-9 - 2^-25 (fp32's midpoint below it, a tie that goes to the even 1 - 2^-9):
# 0x1.feffffp-1. PyTorch's foreach path rounds beta2 to bf16 itself, through fp32 (torch 2.15's
# _foreach_mul_): fl_bf16(fl32(beta2)) is 1 from the same 0x1.feffffp-1 (straight from binary64
# it would be 0x1.ffp-1). With fp32 state (FusedAdam) v moves for every beta2 < 1 the parameter allows.
for v in state-lowp torch torch-foreach; do
  boundary_is "passes up to 0x1.fefffefffffffp-1 (0.998046845): ok; fails from 0x1.feffffp-1 (0.998046845): ok (hazards stagnant)" \
    -k adam -v $v -t bf16 --shape 4 --input v:value=1 --input g:value=0 --along param:beta2 --from 0.9 --to 0.9999999 --fail stagnant
done
boundary_is "no boundary in the range: every grid point passes" -k adam -v fused -t bf16 --shape 4 --input v:value=1 \
  --input g:value=0 --along param:beta2 --from 0.9 --to 0.9999999 --fail stagnant
# the first moment the same way (beta1 * m, m = 1; beta2 0.9 lets v move)
boundary_is "passes up to 0x1.fefffefffffffp-1 (0.998046845): ok; fails from 0x1.feffffp-1 (0.998046845): ok (hazards stagnant)" \
  -k adam -v state-lowp -t bf16 --shape 4 --input m:value=1 --input g:value=0 --input v:value=1 --param beta2=0.9 \
  --along param:beta1 --from 0.5 --to 0.999999 --fail stagnant

# 4. over a trajectory: after a spike at step 1 the bf16 second moment only decays, and from
# some beta2 on most of its steps round away; the fp32 state has no such boundary in [0.9, 1).
# The bf16 boundary is where half the moves are lost, which depends on the drawn noise (seed
# 1): the value is the search's, kept so that a change to it is seen; it must lie below
# 1 - 2^-9 (0.998046875), from where every pure decay of a bf16 value rounds away.
boundary_is "fails from 0x1.fe03fbp-1 (0.996124119): divergent (hazards stagnant)" -k schedule -v lowp-state -t bf16 --param spike_step=1 --param spike_mag=64 --along param:beta2 \
  --from 0.9 --to 0.9999999 --fail stagnant
for t in bf16 fp16; do
  boundary_is "no boundary in the range: every grid point passes" -k schedule -v fp32-state -t $t --param spike_step=1 \
    --param spike_mag=64 --along param:beta2 --from 0.9 --to 0.9999999 --fail stagnant
done

# a loss scale that can never come back: Megatron's fp32 scale, doubled after every step from
# 2^64 (window 1), is 2^127 after step 63 and inf after step 64; inf halves to inf, so the 6
# steps left are all skipped. PyTorch's _amp_update_scale_ stays at 2^127: no hazard.
n=$((n + 1))
out=$("$P" run -k loss_scale -v megatron -t fp32 --param scale0=0x1p64 --param window=1 --shape 70x2 --cases 1 2>&1)
has "$out" "stagnant: the loss scale is inf after step 64 and can never come back (inf halves to inf): 6 of the 6 later steps skipped" ||
  fail "megatron's scale at the fp32 ceiling: $out"
n=$((n + 1))
out=$("$P" run -k loss_scale -v pytorch -t fp32 --param scale0=0x1p64 --param window=1 --shape 70x2 --cases 1 2>&1)
has "$out" "hazards in 0 cases" || fail "pytorch's scale at the fp32 ceiling: $out"

# 5. biased: the fault softmax-round-toward-zero rounds every output toward zero. In fp32
# (fp32 accumulation) that stays inside every element's bound (verdict ok), and the rows' mean
# difference from the correctly rounded result is about -1/2 ulp: biased. Without the fault,
# and with the planted rounding absent, nothing is biased.
n=$((n + 1))
out=$("$P" run -k softmax -v safe -t fp32 --shape 512x64 --at-defaults --cases 2 --fault softmax-round-toward-zero 2>&1)
has "$out" "softmax/safe fp32/fp32: 2 cases (seeds 1..2): ok 2" && has "$out" "hazards in 2 cases: biased 2" &&
  has "$out" "ulps upward (+) or downward (-) from the correctly rounded result on average over 512 rows" ||
  fail "the planted round-toward-zero: $out"
# ...and pooled over the cases (run's summary), the same signature, flagged
has "$out" "output: -0.4" && has "$out" "over 1024 units: BIASED (upward or downward)" ||
  fail "the planted round-toward-zero, pooled over the cases: $out"
for t in fp32 fp16 bf16; do
  n=$((n + 1))
  out=$("$P" run -k softmax -t $t --shape 512x64 --cases 3 2>&1)
  has "$out" "hazards in 0 cases" || fail "softmax $t without a fault has a hazard: $out"
done
# every built-in operation's default cases: nothing biased (a shared denominator, a clipping
# coefficient or a trajectory's drift is no rounding bias)
for k in softmax attention adam clip loss_scale schedule; do
  n=$((n + 1))
  out=$("$P" run -k $k -t fp16 --cases 10 2>&1)
  ! has "$out" "biased" && ! has "$out" "BIASED" ||
    fail "$k fp16 defaults flagged biased: $(printf '%s\n' "$out" | grep -im2 biased)"
done
# a bias too small for one case, pooled over 400: bf16 flash attention's backward reads D =
# rowsum(dO o O) from the bf16 output, and dQ leans toward zero (-0.038 ulps of its root mean
# square, t = -13.2 over 1000 cases; 400 here); flash-pdp takes D from the fp32 P and dP and
# does not (t = -0.8 over 1000)
for vr in "flash 1" "flash-pdp 0"; do
  set -- $vr
  n=$((n + 1))
  out=$("$P" run -k attention_bwd -v $1 -t bf16 --shape 1x2x32x32x16 --scale 4 --cases 400 2>&1)
  t=$(printf '%s\n' "$out" | sed -n 's/^ *dQ: .* away from zero (t \([0-9.e+-]*\)).*/\1/p')
  [ -n "$t" ] && awk -v t="$t" -v lean=$2 'BEGIN { exit !(lean ? t <= -6 : t > -4 && t < 4) }' ||
    fail "attention_bwd $1 bf16 dQ pooled bias (t ${t:-none}, expected $([ $2 = 1 ] && echo '<= -6' || echo 'within 4')): $out"
done

# 6. torch.testing beside the contract: it passes the planted bias (each element within fp32's
# rtol) and rejects the saturated softmax
n=$((n + 1))
out=$("$P" run -k softmax -v safe -t fp32 --shape 512x64 --at-defaults --cases 2 --fault softmax-round-toward-zero 2>&1)
has "$out" "rejects 0 cases; passes 0 with a finding and 2 with a hazard" || fail "torch.testing on the planted bias: $out"
n=$((n + 1))
out=$("$P" run -k softmax -v safe -t fp16 -a fp16 --shape 1x4096 --input x:value=0 --cases 1 --json 2>&1)
printf '%s' "$out" | python3 -c '
import json, sys
c = json.load(sys.stdin)["cases"][0]
assert c["verdict"] == "ok" and not c["finding"], c["verdict"]
assert [h["hazard"] for h in c["hazards"]] == ["saturated", "imprecise"], c["hazards"]
assert c["torch_testing"]["passes"] is False, c["torch_testing"]' || fail "the JSON's hazards and torch_testing: $out"

# 7. the thresholds are settable, and bad values are refused
n=$((n + 1))
out=$("$P" run -k clip -v megatron -t fp16 -a fp16 --shape 1x4096 --input g:value=1 --cases 1 --imprecise fp16=0.5,fp32=0.5 2>&1)
has "$out" "hazards in 0 cases" || fail "--imprecise fp16=0.5 should clear a 0.293 shortfall: $out"
expect2 "--imprecise: 'fp8' is not a dtype" "$P" run -k clip --imprecise fp8=0.1
expect2 "--imprecise: fp16=2 is not a relative error in (0, 1)" "$P" run -k clip --imprecise fp16=2
expect2 "--imprecise: 'fp16' is not DTYPE=VALUE" "$P" run -k clip --imprecise fp16
expect2 "--fail: 'saturate' is not a verdict that fails" "$P" boundary -k clip -v megatron --along dim:n --fail saturate

# 7. attention backward in bf16 when every query's largest score is tied over 32 equal keys and v
# leans negative (tests/data/attention_bwd/tied-max-*.npy, made with numpy: |N(0,1)| queries, 32
# keys of 2.0, v = 0.5 N(0,1) - 1): D = rowsum(dO o O) read from the bf16 output O is off by O's
# rounding, every dS_ij = P_ij (dP_ij - D_i) inherits -P_ij dD_i, and dQ = dS K / sqrt(d) sums them
# along the tied key: dQ is noise, its error larger than itself (flash: 1.99 of the tensor's norm,
# standard 1.3). flash-pdp takes D from the fp32 P and dP: 0.162.
T=$(dirname "$0")/data/attention_bwd/tied-max
for vr in "flash 1" "standard 1" "flash-pdp 0"; do
  set -- $vr
  n=$((n + 1))
  out=$("$P" run -k attention_bwd -v $1 -t bf16 --shape 1x8x64x64x16 --input q:file=$T-q.npy --input k:file=$T-k.npy \
    --input v:file=$T-v.npy --input do:file=$T-do.npy --cases 1 2>&1)
  e=$(printf '%s\n' "$out" | sed -n 's/.*imprecise: dQ: normwise relative error \([0-9.e+-]*\).*/\1/p' | head -1)
  [ -n "$e" ] && awk -v e="$e" -v big=$2 'BEGIN { exit !(big ? e > 1 : e < 0.5) }' ||
    fail "attention_bwd $1 on tied maxima (dQ error ${e:-none}, expected $([ $2 = 1 ] && echo '> 1' || echo '< 0.5')): $out"
done

echo "hazards: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
