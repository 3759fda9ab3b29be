#!/usr/bin/env bash
# A first survey, until precision-report lands (issue 7): every softmax variant, storage
# dtype and accumulation at growing input scale, as verdict counts per configuration.
# usage: softmax-survey.sh PRECFUZZ [CASES]
set -u
P=$1
CASES=${2:-20}
printf '%-8s %-5s %-5s %6s   %s\n' variant dtype accum scale "verdicts (cases), findings outside the domain"
for v in naive safe online; do
  for t in fp32 fp16 bf16; do
    for a in fp32 $t; do
      [ "$t" = fp32 ] && [ "$a" = fp32 ] && [ "$a" != "$t" ] && continue
      for s in 1 4 16 64; do
        line=$("$P" run -k softmax -v "$v" -t "$t" -a "$a" --scale "$s" --cases "$CASES" --seed 1 --max-print 0 2>&1)
        verdicts=$(echo "$line" | sed -n 's/.*): \(.*\)$/\1/p' | head -1)
        outside=$(echo "$line" | sed -n 's/.*findings \([0-9]*\) (\([0-9]*\) outside.*/\2 of \1/p')
        printf '%-8s %-5s %-5s %6s   %s; %s\n' "$v" "$t" "$a" "$s" "$verdicts" "$outside"
      done
    done
  done
done | awk '!seen[$0]++'
