#!/usr/bin/env bash
# A survey, until precision-report lands (issue 7): verdicts of every softmax variant and of
# every attention variant across dtypes, accumulations and growing input scale.
# usage: survey.sh PRECFUZZ [CASES]
set -u
P=$1
CASES=${2:-20}

row() { # row LABEL ARGS...: one configuration's verdict counts and findings outside the domain
  local label=$1; shift
  local out verdicts outside
  out=$("$P" run "$@" --cases "$CASES" --seed 1 --max-print 0 2>&1)
  verdicts=$(echo "$out" | sed -n 's/.*): \(.*\)$/\1/p' | head -1 | sed 's/ *$//')
  outside=$(echo "$out" | sed -n 's/.*findings \([0-9]*\) (\([0-9]*\) outside.*/\2 of \1/p' | head -1)
  printf '%-44s %-22s %s\n' "$label" "$verdicts" "$outside"
}

printf '%-44s %-22s %s\n' "softmax: variant dtype/accum scale" "verdicts (cases)" "findings outside the domain"
for v in naive safe online; do
  for ta in fp32/fp32 fp16/fp32 fp16/fp16 bf16/fp32 bf16/bf16; do
    for s in 1 4 16 64; do
      row "$v $ta x$s" -k softmax -v "$v" -t "${ta%/*}" -a "${ta#*/}" --scale "$s"
    done
  done
done
echo
printf '%-44s %-22s %s\n' "attention 1x2x16x16x64: variant dtype/accum scale" "verdicts (cases)" "findings outside the domain"
for cfg in "post-scale" "inward" "layer-scaled --param layer=8" "flash"; do
  for ta in fp16/fp16 fp16/fp32 bf16/fp32; do
    for s in 16 64 128 192; do
      # shellcheck disable=SC2086
      row "${cfg/ --param /,} $ta x$s" -k attention -v $cfg -t "${ta%/*}" -a "${ta#*/}" --shape 1x2x16x16x64 --scale "$s"
    done
  done
done

echo
echo "adam, one step from m = v = 0 at p = 1 (lr 1e-3, eps 1e-8): the largest gradient 2^-k that fails"
printf '%-28s %s\n' "variant dtype" "first failing g (verdict); all larger g ok"
for cfg in "torch fp16" "torch bf16" "state-lowp fp16" "no-master fp16" "fused fp16" "fused bf16"; do
  set -- $cfg
  first="none down to 2^-40"
  for k in $(seq 0 40); do
    out=$("$P" run -k adam -v "$1" -t "$2" --shape 1 --cases 1 --max-print 0 --input p:value=1 --input m:value=0 \
          --input v:value=0 --input "g:value=0x1p-$k" 2>&1)
    verdict=$(echo "$out" | sed -n 's/.*): \([a-z]*\) 1.*/\1/p' | head -1)
    if [ "$verdict" != ok ]; then first="g = 2^-$k ($verdict)"; break; fi
  done
  printf '%-28s %s\n' "$cfg" "$first"
done

echo
echo "training trajectories (schedule, 200 steps x 8 parameters, cosine decay to 0 after no warm-up,"
echo "curvatures |N(0,1)|, gradient noise N(0, 0.01^2), bf16 parameters, tolerance 1% of |p*| + lr):"
echo "cases that leave the exact trajectory or lose an update, of 5; the earliest step at which one"
echo "does, and why (left: beyond the tolerance; lost: an update lost)"
printf '%-12s %-7s' "state" "beta2"
for lr in 1e-4 3e-4 1e-3 3e-3 1e-2; do printf ' %-17s' "lr $lr"; done
echo
for v in fp32-state lowp-state; do
  for b2 in 0.95 0.99 0.999; do
    printf '%-12s %-7s' "${v%-state}" "$b2"
    for lr in 1e-4 3e-4 1e-3 3e-3 1e-2; do
      out=$("$P" run -k schedule -v "$v" -t bf16 --shape 200x8 --cases 5 --seed 1 --max-print 5 --param "lr=$lr" \
            --param "beta2=$b2" --input curv:scale=1 --input noise:scale=0.01 2>&1)
      n=$(echo "$out" | grep '^schedule/' | sed -n 's/.*divergent \([0-9][0-9]*\).*/\1/p' | head -1)
      first=$(echo "$out" | grep '^FINDING' | sed -n 's/.* at step \([0-9]*\).*/\1 left/p; s/.*update lost at step \([0-9]*\):.*/\1 lost/p' \
              | sort -n | head -1)
      if [ -n "$n" ]; then printf ' %-17s' "$n/5, step ${first% *} ${first#* }"; else printf ' %-17s' "0/5"; fi
    done
    echo
  done
done

echo
echo "seed 001, a gradient spike x100 at the last of 100 warm-up steps (scripts/warmup-spike.py):"
python3 "$(dirname "$0")/warmup-spike.py" "$P"
