#!/usr/bin/env bash
# Runs every fuzz driver of the fuzz build (make fuzz) and prints a summary table.
#
#   scripts/run-fuzzers.sh           each driver for FUZZ_SECONDS on a working copy of its corpus;
#                                    exit 1 on any finding (each one replayed once more to confirm)
#   scripts/run-fuzzers.sh --faults  each fault switch of each kernel under its driver, from an
#                                    empty corpus: time and runs to the first finding; exit 1 if
#                                    a fault is not found within FUZZ_SECONDS; each finding is
#                                    minimized (precfuzz minimize) and the table says how far
#   scripts/run-fuzzers.sh --torch   the frameworks' kernels the examples declare
#                                    (scripts/targets.py: PyTorch's kernel processes and rank
#                                    groups from .venv; with --frameworks installed also
#                                    DeepSpeed's and Megatron's scalers and optimizers)
#                                    under the drivers of their operations, each
#                                    aimed at them (PF_FUZZ_VARIANT) for FUZZ_SECONDS; exit 1 on
#                                    a finding, each printed whole and replayed on the emulation
#                                    it claims the contract of: "fidelity gap" when that keeps
#                                    the contract, "contract wrong" when it breaks it too;
#                                    FUZZ_TORCH_GAPS=report: exit 0 when all are fidelity gaps;
#                                    needs scripts/python-env.sh --torch;
#                                    FUZZ_TORCH_DRIVERS="softmax_fuzzer ..." runs only those
#   scripts/run-fuzzers.sh --merge   folds the new inputs of the last make fuzz
#                                    ($FUZZ_BUILD/corpus/<driver>) into corpora/<driver> with
#                                    libFuzzer's -merge=1 (only inputs that add coverage)
#
# Environment: FUZZ_BUILD (build/fuzz), FUZZ_SECONDS (60), FUZZ_JOBS (1), FUZZ_SEED (libFuzzer's
# -seed; unset: a fresh one each run; CI sets it so that its runs can be repeated).
set -u
cd "$(dirname "$0")/.."
FUZZ_BUILD=${FUZZ_BUILD:-build/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_JOBS=${FUZZ_JOBS:-1}
mode=${1:-run}
case "$FUZZ_SECONDS" in ''|*[!0-9]*) echo "run-fuzzers: FUZZ_SECONDS must be a positive integer, got '$FUZZ_SECONDS'" >&2; exit 2;; esac
case "$FUZZ_JOBS" in ''|*[!0-9]*|0) echo "run-fuzzers: FUZZ_JOBS must be a positive integer, got '$FUZZ_JOBS'" >&2; exit 2;; esac
case "${FUZZ_TORCH_GAPS:-fail}" in fail|report) ;; *) echo "run-fuzzers: FUZZ_TORCH_GAPS must be fail or report, got '$FUZZ_TORCH_GAPS'" >&2; exit 2;; esac
seed_opt=()
if [ -n "${FUZZ_SEED:-}" ]; then
  case "$FUZZ_SEED" in *[!0-9]*) echo "run-fuzzers: FUZZ_SEED must be a positive integer, got '$FUZZ_SEED'" >&2; exit 2;; esac
  seed_opt=(-seed="$FUZZ_SEED")
fi
[ "$mode" = run ] || [ "$mode" = --faults ] || [ "$mode" = --merge ] || [ "$mode" = --torch ] ||
  { echo "run-fuzzers: unknown argument '$mode' (--faults, --torch, --merge)" >&2; exit 2; }

drivers=()
for d in "$FUZZ_BUILD"/bin/*_fuzzer; do [ -x "$d" ] && drivers+=("$(basename "$d")"); done
[ ${#drivers[@]} -gt 0 ] || { echo "run-fuzzers: no drivers in $FUZZ_BUILD/bin (make fuzz builds them)" >&2; exit 2; }
if [ "$mode" = --merge ]; then
  printf '%-22s %10s %10s\n' driver before after
  for drv in "${drivers[@]}"; do
    [ -d "$FUZZ_BUILD/corpus/$drv" ] || continue
    mkdir -p "corpora/$drv"
    before=$(find "corpora/$drv" -type f | wc -l)
    "$FUZZ_BUILD/bin/$drv" -merge=1 "corpora/$drv" "$FUZZ_BUILD/corpus/$drv" >"$FUZZ_BUILD/merge-$drv.log" 2>&1 ||
      { echo "run-fuzzers: merging $drv failed (log: $FUZZ_BUILD/merge-$drv.log)" >&2; exit 1; }
    printf '%-22s %10s %10s\n' "$drv" "$before" "$(find "corpora/$drv" -type f | wc -l)"
  done
  exit 0
fi

out=$FUZZ_BUILD/runs
# junit FILE SUITE: the table as JUnit XML for a CI's test report, from lines on stdin
# "name<TAB>failed (0 or 1)<TAB>message<TAB>text", written whole under a temporary name
JUNIT_PY=$(cat <<'PY'
import os, sys, xml.etree.ElementTree as ET
rows = [(l.rstrip("\n").split("\t", 3) + ["", "", ""])[:4] for l in sys.stdin if l.strip()]
root = ET.Element("testsuites", name="precfuzz " + sys.argv[2], tests=str(len(rows)),
                  failures=str(sum(r[1] == "1" for r in rows)))
suite = ET.SubElement(root, "testsuite", name=sys.argv[2], tests=root.get("tests"), failures=root.get("failures"),
                      errors="0", skipped="0")
for name, failed, msg, text in rows:
    case = ET.SubElement(suite, "testcase", classname=sys.argv[2], name=name)
    if failed == "1":
        ET.SubElement(case, "failure", type="finding", message=msg).text = text
    else:
        ET.SubElement(case, "system-out").text = msg + ("\n" + text if text else "")
tmp = sys.argv[1] + ".tmp"
ET.ElementTree(root).write(tmp, encoding="UTF-8", xml_declaration=True)
os.replace(tmp, sys.argv[1])
PY
)
junit() { python3 -c "$JUNIT_PY" "$1" "$2"; }
rm -rf "$out"
mkdir -p "$out"

# stat NAME LOG: a libFuzzer final statistic
stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -1; }

# fuzz_one KEY DRIVER FAULT CORPUS...: runs one driver, writes $out/KEY.{log,row}
fuzz_one() {
  local key=$1 drv=$2 fault=$3; shift 3
  local findings=$FUZZ_BUILD/findings/$key # <driver>[-<fault>]: precfuzz replay/minimize read both from it
  mkdir -p "$findings"
  local t0 t1 rc
  t0=$(date +%s.%N)
  PF_FUZZ_FAULT=$fault PF_FINDINGS_DIR=$findings "$FUZZ_BUILD/bin/$drv" -max_total_time="$FUZZ_SECONDS" \
    -print_final_stats=1 -artifact_prefix="$findings/" -timeout=60 -rss_limit_mb=4096 "${seed_opt[@]}" "$@" >"$out/$key.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local runs eps cov
  runs=$(stat number_of_executed_units "$out/$key.log")
  eps=$(stat average_exec_per_sec "$out/$key.log")
  cov=$(grep -o 'cov: [0-9]*' "$out/$key.log" | tail -1 | cut -d' ' -f2)
  local found=0 confirmed=-
  if [ $rc -ne 0 ]; then
    found=1
    local art
    art=$(grep -o "Test unit written to .*" "$out/$key.log" | tail -1 | sed 's/Test unit written to //')
    if [ -n "$art" ] && [ -f "$art" ]; then
      # confirm: the saved input must fail again
      if PF_FUZZ_FAULT=$fault PF_FINDINGS_DIR=$findings "$FUZZ_BUILD/bin/$drv" "$art" >"$out/$key.confirm" 2>&1; then
        confirmed=no
      else
        confirmed=yes
      fi
    fi
    echo "$art" >"$out/$key.artifact"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\n' "$drv" "${fault:--}" "${runs:-0}" "${eps:-0}" "${cov:-0}" "$found" \
    "$confirmed" "$(echo "$t1 - $t0" | bc)" >"$out/$key.row"
  # a line as each driver ends, so that a CI log hears from a run of many minutes
  [ "${PRECFUZZ_PROGRESS:-}" = 0 ] || echo "run-fuzzers: $key: ${runs:-0} runs, $([ $found = 1 ] && echo "a finding" || echo "no finding")" >&2
}

# driver_options DRIVER: libFuzzer flags from corpora/DRIVER.options (OSS-Fuzz's format: a
# [libfuzzer] section of key = value lines; a dict is named relative to corpora/)
driver_options() {
  local f=corpora/$1.options
  [ -f "$f" ] || return 0
  sed -n '/^\[libfuzzer\]/,/^\[/{/^[a-z_]* *=/p}' "$f" | while IFS='=' read -r k v; do
    k=$(echo "$k" | tr -d ' ') v=$(echo "$v" | sed 's/^ *//; s/ *$//')
    [ "$k" = dict ] && v=corpora/$v
    echo "-$k=$v"
  done
}

throttle() { while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do wait -n; done; }

if [ "$mode" = --torch ]; then
  scripts/python-env.sh --check --torch ||
    { echo "run-fuzzers: no PyTorch in ${PRECFUZZ_VENV:-.venv} (scripts/python-env.sh --torch installs it)" >&2; exit 2; }
  PY=${PRECFUZZ_VENV:-.venv}/bin/python
  # driver, example, the variants it aims at[, ranks:N for a rank group]: every target the
  # examples declare (scripts/targets.py), DeepSpeed's and Megatron's where they are installed
  needs=(--needs torch)
  scripts/python-env.sh --check --frameworks && needs+=(--needs frameworks)
  targets=()
  while IFS=$'\t' read -r ex kernel _ fuzz start _ _; do
    s=""
    [ "$start" = exec ] || s=$start
    targets+=("${kernel}_fuzzer $(basename "$ex" .py) $fuzz $s")
  done < <(python3 scripts/targets.py "${needs[@]}")
  [ ${#targets[@]} -gt 0 ] || { echo "run-fuzzers: scripts/targets.py lists no target" >&2; exit 2; }
  keys=()
  if [ -n "${FUZZ_TORCH_DRIVERS:-}" ]; then
    chosen=()
    for t in "${targets[@]}"; do
      case " $FUZZ_TORCH_DRIVERS " in *" ${t%% *} "*) chosen+=("$t") ;; esac
    done
    [ ${#chosen[@]} -gt 0 ] || { echo "run-fuzzers: FUZZ_TORCH_DRIVERS names none of ${targets[*]%% *}" >&2; exit 2; }
    targets=("${chosen[@]}")
  fi
  for t in "${targets[@]}"; do
    set -- $t
    work=$FUZZ_BUILD/corpus-torch/$1
    mkdir -p "$work"
    [ -d "corpora/$1" ] && cp -n corpora/"$1"/* "$work"/ 2>/dev/null
    opts=()
    mapfile -t opts < <(driver_options "$1")
    keys+=("torch-$2")
    throttle
    spec="${4:-exec}:$PY examples/$2.py"
    (export PRECFUZZ_KERNELS="$spec" PF_FUZZ_VARIANT=$3; fuzz_one "torch-$2" "$1" "" "${opts[@]}" "$work") &
  done
  wait
  printf '\n%-22s %-52s %10s %8s %9s\n' driver variants runs runs/s findings
  total=0
  for i in "${!targets[@]}"; do
    set -- ${targets[$i]}
    IFS=$'\t' read -r _ _ runs eps cov found confirmed secs <"$out/${keys[$i]}.row"
    printf '%-22s %-52s %10s %8s %9s\n' "$1" "$3" "$runs" "$eps" "$found"
    total=$((total + found))
    if [ -f "$out/${keys[$i]}.artifact" ]; then
      grep -E "^precfuzz finding|^reproduce with" "$out/${keys[$i]}.log" | head -2 | sed 's/^/  /'
    fi
  done
  echo "logs: $out/torch-*.log"
  [ $total -eq 0 ] && exit 0
  # Each finding, classified: its case (printed whole, so a CI log replays it anywhere) run
  # again on the emulation whose contract the framework's kernel claims ("like"). If the
  # emulation breaks the contract too, the contract is wrong: precfuzz's bug. If not, the
  # framework computes something other than the emulation on this machine: a fidelity gap.
  echo
  echo "machine: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); torch CPU capability:" \
    "$("$PY" -c 'import torch; print(torch.backends.cpu.get_cpu_capability())' 2>/dev/null)"
  contract_wrong=0
  for i in "${!targets[@]}"; do
    set -- ${targets[$i]}
    [ -f "$out/${keys[$i]}.artifact" ] || continue
    case_file=$(grep -o 'replay [^ ]*\.json' "$out/${keys[$i]}.log" | head -1 | cut -d' ' -f2)
    if [ -z "$case_file" ] || [ ! -f "$case_file" ]; then
      echo "$1: the finding left no case file (log: $out/${keys[$i]}.log)"
      contract_wrong=1
      continue
    fi
    echo "$1: the finding's case ($case_file):"
    python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":")))' "$case_file" | sed 's/^/  /'
    variant=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["variant"])' "$case_file")
    # the target's own spec (a rank group's "ranks:N": its script cannot run as one process)
    like=$(PRECFUZZ_KERNELS="${4:-exec}:$PY examples/$2.py" "$FUZZ_BUILD/bin/precfuzz" list --json 2>/dev/null | python3 -c '
import json, sys
print(next((k["like"] for k in json.load(sys.stdin) if k["variant"] == sys.argv[1]), ""))' "$variant")
    emu=$out/${keys[$i]}.emulation.json
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["variant"] = sys.argv[2]; c.pop("expect", None); json.dump(c, open(sys.argv[3], "w"), indent=1)' \
      "$case_file" "$like" "$emu"
    if [ -z "$like" ]; then
      echo "  no emulation to compare with ($variant names none)"
      contract_wrong=1
    elif "$FUZZ_BUILD/bin/precfuzz" replay "$emu" >"$out/${keys[$i]}.emulation.log" 2>&1; then
      echo "  fidelity gap: the emulation $like keeps the contract on this case; $variant on this machine does not"
    else
      echo "  contract wrong: the emulation $like breaks it too ($out/${keys[$i]}.emulation.log)"
      contract_wrong=1
    fi
  done
  # FUZZ_TORCH_GAPS=report (CI): fidelity gaps are printed, not fatal; a wrong contract is
  [ "${FUZZ_TORCH_GAPS:-fail}" = report ] && [ $contract_wrong -eq 0 ] && exit 0
  exit 1
fi

if [ "$mode" = run ]; then
  for drv in "${drivers[@]}"; do
    work=$FUZZ_BUILD/corpus/$drv
    mkdir -p "$work"
    [ -d "corpora/$drv" ] && cp -n corpora/"$drv"/* "$work"/ 2>/dev/null
    opts=()
    mapfile -t opts < <(driver_options "$drv")
    throttle
    fuzz_one "$drv" "$drv" "" "${opts[@]}" "$work" &
  done
  wait
  printf '\n%-22s %12s %10s %8s %9s\n' driver runs runs/s cov findings
  total=0
  for drv in "${drivers[@]}"; do
    IFS=$'\t' read -r _ _ runs eps cov found confirmed secs <"$out/$drv.row"
    printf '%-22s %12s %10s %8s %9s\n' "$drv" "$runs" "$eps" "$cov" "$found"
    total=$((total + found))
  done
  for drv in "${drivers[@]}"; do
    [ -f "$out/$drv.artifact" ] || continue
    echo
    echo "FINDING in $drv (confirmed on replay: $(cut -f7 "$out/$drv.row")):"
    grep -E "^precfuzz finding|^reproduce with|ERROR: (Address|Undefined|LeakSanitizer|libFuzzer)|runtime error" "$out/$drv.log" | head -5 | sed 's/^/  /'
    echo "  raw input: $(cat "$out/$drv.artifact"); replay it with: $FUZZ_BUILD/bin/$drv $(cat "$out/$drv.artifact")"
    echo "  or: precfuzz replay $(cat "$out/$drv.artifact"); shrink it: precfuzz minimize $(cat "$out/$drv.artifact")"
  done
  for drv in "${drivers[@]}"; do
    IFS=$'\t' read -r _ _ runs eps cov found confirmed secs <"$out/$drv.row"
    if [ -f "$out/$drv.artifact" ]; then
      msg=$(grep -m1 -E "^precfuzz finding|ERROR: (Address|Undefined|LeakSanitizer|libFuzzer)|runtime error" "$out/$drv.log")
      printf '%s\t1\t%s\t%s\n' "$drv" "${msg:-a finding}" "raw input $(cat "$out/$drv.artifact"): $FUZZ_BUILD/bin/$drv $(cat "$out/$drv.artifact")"
    else
      printf '%s\t0\t%s runs (%s/s), coverage %s, no finding\t\n' "$drv" "$runs" "$eps" "$cov"
    fi
  done | tr -d '\r' | junit "$FUZZ_BUILD/fuzz-results.xml" fuzz
  echo
  echo "logs: $out/; new corpus entries: $FUZZ_BUILD/corpus/ (make fuzz-merge folds them into corpora/);" \
    "JUnit: $FUZZ_BUILD/fuzz-results.xml"
  [ $total -eq 0 ] || exit 1
  exit 0
fi

# --faults: every fault switch the kernels declare, under the driver named after its kernel
P=$FUZZ_BUILD/bin/precfuzz
mapfile -t pairs < <("$P" list --json | python3 -c '
import json, sys
seen = set()
for k in json.load(sys.stdin):
    for f in k["faults"]:
        if (k["kernel"], f) not in seen:
            seen.add((k["kernel"], f)); print(k["kernel"] + "_fuzzer\t" + f)')
[ ${#pairs[@]} -gt 0 ] || { echo "run-fuzzers: no fault switches found" >&2; exit 2; }
for p in "${pairs[@]}"; do
  drv=${p%%$'\t'*}
  fault=${p#*$'\t'}
  [ -x "$FUZZ_BUILD/bin/$drv" ] || { echo "run-fuzzers: no driver $drv for fault $fault" >&2; exit 1; }
  empty=$FUZZ_BUILD/corpus-faults/$drv-$fault
  rm -rf "$empty"
  mkdir -p "$empty"
  throttle
  mapfile -t fopts < <(driver_options "$drv")
  fuzz_one "$drv-$fault" "$drv" "$fault" "${fopts[@]}" "$empty" &
done
wait
printf '\n%-22s %-32s %12s %10s %6s %10s\n' driver fault runs-to-find seconds found minimized
missed=0
for p in "${pairs[@]}"; do
  drv=${p%%$'\t'*}
  fault=${p#*$'\t'}
  IFS=$'\t' read -r _ _ runs eps cov found confirmed secs <"$out/$drv-$fault.row"
  # the finding, minimized: input elements before -> after (precfuzz minimize)
  mini=-
  art=$(cat "$out/$drv-$fault.artifact" 2>/dev/null)
  if [ -n "$art" ] && [ -f "$art" ]; then
    "$P" minimize "$art" -o "$art.min.json" >"$out/$drv-$fault.min" 2>&1 &&
      mini=$(sed -n 's/.*: \([0-9]*\) input elements -> \([0-9]*\) .*/\1->\2/p' "$out/$drv-$fault.min")
  fi
  printf '%-22s %-32s %12s %10s %6s %10s\n' "$drv" "$fault" "$runs" "$secs" "$([ "$found" = 1 ] && echo yes || echo NO)" "${mini:--}"
  [ "$found" = 1 ] || missed=$((missed + 1))
done
for p in "${pairs[@]}"; do
  drv=${p%%$'\t'*}
  fault=${p#*$'\t'}
  IFS=$'\t' read -r _ _ runs eps cov found confirmed secs <"$out/$drv-$fault.row"
  if [ "$found" = 1 ]; then
    printf '%s %s\t0\tfound after %s runs in %s s\t%s\n' "$drv" "$fault" "$runs" "$secs" "$(grep -m1 '^precfuzz finding' "$out/$drv-$fault.log")"
  else
    printf '%s %s\t1\tthe fault was not found within %s s\t%s runs\n' "$drv" "$fault" "$FUZZ_SECONDS" "$runs"
  fi
done | junit "$FUZZ_BUILD/fuzz-faults-results.xml" fuzz-faults
echo "minimized findings: $FUZZ_BUILD/findings/<driver>-<fault>/*.min.json (logs: $out/*.min); JUnit: $FUZZ_BUILD/fuzz-faults-results.xml"
[ $missed -eq 0 ] || { echo "$missed fault(s) not found within ${FUZZ_SECONDS}s" >&2; exit 1; }
