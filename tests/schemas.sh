#!/usr/bin/env bash
# The JSON precfuzz writes and reads against its schemas (docs/schemas/): case files (the
# regression corpus, saved findings, minimized cases), run --json and replay --json of every
# kernel, diff-tp --json, sweep results, SARIF; and documents broken on purpose are rejected
# (a -1 for a missing distance, an unknown field, a missing required one).
# usage: schemas.sh PRECFUZZ PYTHON   (PYTHON: scripts/python-env.sh's, with jsonschema)
P=$1
PY=$2
S=$(cd "$(dirname "$0")/.." && pwd)
D="$S/docs/schemas"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if ! "$PY" -c "import jsonschema" 2>/dev/null; then
  echo "no python with jsonschema at $PY (scripts/python-env.sh makes it)"
  exit 77
fi
n=0
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
ok() { n=$((n + 1)); }
check() { "$PY" "$S/tests/check_schema.py" "$D" "$@" >"$T/err" 2>&1 && ok || fail "$1: $(head -5 "$T/err")"; }

# case files
check case.schema.json "$S"/corpora/regressions/*.json
"$P" run -k softmax -v naive -t fp16 --scale 200 --at-defaults --cases 2 --save-findings "$T/found" >/dev/null 2>&1
"$P" minimize "$T/found/softmax-naive-fp16-fp32-seed1-overflow.json" -o "$T/small.json" >/dev/null 2>&1
check case.schema.json "$T"/found/*.json "$T/small.json"
# a case that names a checkpoint (the run's own, kept, then one element changed: a finding)
"$P" diff-tp -v megatron --cases 1 --param resume_at=1 --save-checkpoint "$T/ck" >/dev/null 2>&1
python3 "$S/tests/ckpt_edit.py" "$T/ck/tp2-dp1" 0 master 0 0x1p-3 >/dev/null
"$P" diff-tp -v megatron --cases 1 --param resume_at=1 --checkpoint "$T/ck/tp2-dp1" --save-findings "$T/ckf" >/dev/null 2>&1
check case.schema.json "$T"/ckf/*.json
# run --json of every kernel (findings included: faults and overflowing scales), replay --json, diff-tp --json
"$P" run -k softmax -v naive -t fp16 --shape 2x8 --scale 200 --special-rate 0.1 --at-defaults --cases 3 --json >"$T/r1.json" 2>/dev/null
"$P" run -k attention -t bf16 --shape 1x1x4x4x8 --cases 2 --json >"$T/r2.json" 2>/dev/null
"$P" run -k adam -t fp16 --shape 16 --cases 2 --json >"$T/r3.json" 2>/dev/null
"$P" run -k clip -t fp16 --shape 2x8 --scale 1e4 --cases 2 --json >"$T/r4.json" 2>/dev/null
"$P" run -k loss_scale --cases 2 --json >"$T/r5.json" 2>/dev/null
"$P" run -k schedule --cases 1 --json >"$T/r6.json" 2>/dev/null
"$P" replay "$S"/corpora/regressions/*.json --json >"$T/r7.json" 2>/dev/null
"$P" diff-tp --cases 2 --fault norm-no-dedup --json >"$T/r8.json" 2>/dev/null
for f in "$T"/r?.json; do [ -s "$f" ] || fail "$f is empty"; done
check run.schema.json "$T"/r?.json
# a run with an element without a distance says why (null and ulps_why), never -1
"$PY" -c '
import json, sys
els = [e for c in json.load(open(sys.argv[1]))["cases"] for e in c["elements"]]
assert any(e["ulps"] is None and e["ulps_why"] == "the output is NaN" for e in els)
assert all(e["ulps"] is None or e["ulps"] >= 0 for e in els)' "$T/r1.json" && ok || fail "no null ulps with its reason in run --json"
# sweep results
"$P" sweep --quick -o "$T/results.json" >/dev/null 2>&1 || fail "sweep --quick"
check results.schema.json "$T/results.json"
# SARIF, with findings and without
"$P" run -k softmax -v naive --scale 200 --at-defaults --cases 2 --sarif "$T/f.sarif" >/dev/null 2>&1
"$P" run -k softmax -v safe --cases 2 --sarif "$T/ok.sarif" >/dev/null 2>&1
check sarif-subset.schema.json "$T/f.sarif" "$T/ok.sarif"

# documents broken on purpose
"$PY" - "$T" <<'PY'
import json, sys, os
t = sys.argv[1]
def w(name, d): json.dump(d, open(os.path.join(t, name), "w"))
r = json.load(open(os.path.join(t, "r1.json")))
e = next(x for x in r["cases"][0]["elements"] if x["ulps"] is None)
e["ulps"] = -1; e.pop("ulps_why"); w("bad_run1.json", r)               # a sentinel
r = json.load(open(os.path.join(t, "r1.json")))
r["cases"][0]["elements"][0].pop("ulps_why", None); r["cases"][0]["elements"][0]["ulps"] = None
w("bad_run2.json", r)                                                   # null without why
c = json.load(open(os.path.join(t, "small.json"))); c["extra"] = 1; w("bad_case1.json", c)
c = json.load(open(os.path.join(t, "small.json"))); c["dtype"] = "fp8"; w("bad_case2.json", c)
c = json.load(open(os.path.join(t, "small.json"))); next(iter(c["inputs"].values()))["values"][0] = "1.5.2"
w("bad_case3.json", c)
s = json.load(open(os.path.join(t, "results.json"))); del s["faults"]; w("bad_results.json", s)
s = json.load(open(os.path.join(t, "results.json"))); s["extra"] = 1; w("bad_results2.json", s)
s = json.load(open(os.path.join(t, "results.json"))); s["environment"]["quick"] = "yes"; w("bad_results3.json", s)
s = json.load(open(os.path.join(t, "results.json"))); s["kernels"][0]["configs"][0]["findings"] = -1; w("bad_results4.json", s)
s = json.load(open(os.path.join(t, "results.json"))); s["kernels"][0]["configs"][0]["dtype"] = "fp64"; w("bad_results5.json", s)
s = json.load(open(os.path.join(t, "f.sarif"))); s["runs"][0]["results"][0]["level"] = "fatal"; w("bad_sarif.json", s)
PY
check run.schema.json --invalid "$T/bad_run1.json" "$T/bad_run2.json"
check case.schema.json --invalid "$T/bad_case1.json" "$T/bad_case2.json" "$T/bad_case3.json"
check results.schema.json --invalid "$T/bad_results.json" "$T/bad_results2.json" "$T/bad_results3.json" "$T/bad_results4.json" \
  "$T/bad_results5.json"
# and precision-report refuses them too
for f in bad_results bad_results2 bad_results3 bad_results4 bad_results5; do
  n=$((n + 1))
  "$(dirname "$P")/precision-report" -i "$T/$f.json" -o "$T/$f.html" >/dev/null 2>&1
  [ $? -eq 2 ] || fail "precision-report took $f.json, which the schema rejects"
done
check sarif-subset.schema.json --invalid "$T/bad_sarif.json"
# and precfuzz itself refuses the broken case files the schema rejects
for f in bad_case1 bad_case2 bad_case3; do
  "$P" replay "$T/$f.json" >/dev/null 2>&1
  [ $? -eq 2 ] && ok || fail "precfuzz replay accepted $f.json, which the schema rejects"
done

echo "schemas: $n checks passed, $failed failed"
[ $failed -eq 0 ]
