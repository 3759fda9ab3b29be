#!/bin/bash
# The figures of a framework adapter on a rank group (docs/kernels/tp-diff.md quotes them):
# the rank group's start, cases per second once started, findings on clean cases (goal 0), and
# for each fault switch the median number of cases to its first finding over several starting
# seeds. Prints figures; asserts nothing (speed is measured, not tested).
# usage: bench/ranks.sh [CLEAN_CASES [SEEDS]]   (default 1000 clean cases, 5 starting seeds)
#   env: PRECFUZZ (default build/bin/precfuzz), PY (default .venv/bin/python),
#        ADAPTER (default "ranks:2:$PY examples/deepspeed_tp.py"), VARIANT (deepspeed-bf16),
#        FAULTS (default: the five of examples/deepspeed_tp.py), ARGS (default --param tied=0)
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
SEEDS=${2:-5}
P=${PRECFUZZ:-build/bin/precfuzz}
PY=${PY:-.venv/bin/python}
K=${ADAPTER:-"ranks:2:$PY examples/deepspeed_tp.py"}
V=${VARIANT:-deepspeed-bf16}
FAULTS=${FAULTS:-"tp-replicated-unclipped norm-no-dedup norm-rank0-only norm-not-allreduced norm-averaged"}
read -r -a EXTRA <<<"${ARGS:---param tied=0}"
now() { date +%s.%N; }
runs() { "$P" --kernels "$K" diff-tp -v "$V" "${EXTRA[@]}" "$@" 2>&1 | grep -v '^\[rank'; } # each flag once

t0=$(now); runs --cases 1 --max-print 0 >/dev/null; t1=$(now)
out=$(runs --cases "$N" --max-print 0); t2=$(now)
python3 - "$t0" "$t1" "$t2" "$N" <<'PY'
import sys
t0, t1, t2, n = map(float, sys.argv[1:5])
per = ((t2 - t1) - (t1 - t0)) / (n - 1)  # the group's start cancels: N cases less one
print(f"rank group start (imports, process group, first optimizer): {t1 - t0 - per:.1f} s")
print(f"cases per second once started: {1 / per:.1f} ({n:.0f} cases in {t2 - t1:.1f} s with the start)")
PY
echo "clean cases: $(echo "$out" | grep -E "cases \(seeds" | sed 's/^ *//')"
echo "  $(echo "$out" | grep -E "^  findings" | sed 's/^ *//')"
echo "fault                        cases to the first finding (starting seeds 1, 1001, ...)   median"
for f in $FAULTS; do
  firsts=()
  for k in $(seq 0 $((SEEDS - 1))); do
    s=$((1 + 1000 * k))
    seed=$(runs --fault "$f" --cases 20 --seed "$s" --max-print 1 | sed -n 's/^FINDING .* seed \([0-9]*\):.*/\1/p' | head -1)
    firsts+=("${seed:+$((seed - s + 1))}")
    [ -z "$seed" ] && firsts[-1]=">20"
  done
  med=$(printf '%s\n' "${firsts[@]}" | sed 's/>20/99/' | sort -n | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; print (m==99?">20":m)}')
  printf '%-28s %-58s %s\n' "$f" "${firsts[*]}" "$med"
done
