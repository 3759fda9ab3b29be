#!/usr/bin/env bash
# precision-report: a quick sweep's report is well-formed (parsed as XML), has every kernel's
# section with its SVG plots, the differential (TP) and fault sections; md and json summaries; malformed
# results get exit 2 and one line naming the problem.
# usage: report.sh PRECFUZZ PRECISION_REPORT
P=$1
R=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
ok() { n=$((n + 1)); }

"$P" sweep --quick -o "$T/r.json" >/dev/null 2>&1 || fail "precfuzz sweep --quick"
# results are the same bytes whatever the thread count and the run (timings are said, not stored)
"$P" sweep --quick --kernel softmax --jobs 1 -o "$T/j1.json" >/dev/null 2>&1 &&
  "$P" sweep --quick --kernel softmax --jobs 2 -o "$T/j2.json" >/dev/null 2>&1 && cmp -s "$T/j1.json" "$T/j2.json" && ok ||
  fail "sweep --jobs 1 and --jobs 2 differ"
"$P" run -k attention -v flash --shape 1x1x8x8x8 --cases 2 --json >"$T/a1.json" 2>/dev/null
"$P" run -k attention -v flash --shape 1x1x8x8x8 --cases 2 --json >"$T/a2.json" 2>/dev/null
cmp -s "$T/a1.json" "$T/a2.json" && ok || fail "run --json differs between two identical runs"
# progress: in a log (here stderr is a file) only for a run estimated at a minute or more, or
# asked for, as plain lines with the time elapsed; never on stdout
"$P" run -k softmax --shape 64x1024 --cases 3 >"$T/p.out" 2>"$T/p.err"
! grep -q 'cases, ' "$T/p.err" && ok || fail "progress shown in a log for a run of a second"
PRECFUZZ_PROGRESS=1 "$P" run -k softmax -v safe --shape 64x16384 --cases 10 >"$T/p.out" 2>"$T/p.err"
grep -qE '^\[[1-9][0-9]* s\] softmax/safe: [0-9]+ of 10 cases, ' "$T/p.err" && ! grep -q 'of 10 cases' "$T/p.out" && ok ||
  fail "PRECFUZZ_PROGRESS=1 shows no progress on stderr: $(cat "$T/p.err")"
# a boundary search says where it is, per point (a search along a dimension may take minutes)
PRECFUZZ_PROGRESS=1 "$P" boundary -k softmax -v safe -t bf16 -a bf16 --along dim:cols --to 65536 >"$T/b.out" 2>"$T/b.err"
grep -qE '^\[[1-9][0-9]* s\] boundary softmax/safe bf16 along dimension cols: [0-9]+ points searched \(1 case each\), now at [0-9]+$' "$T/b.err" &&
  ! grep -q 'points searched' "$T/b.out" && grep -q '^  no boundary in the range' "$T/b.out" && ok ||
  fail "boundary with PRECFUZZ_PROGRESS=1 shows no progress per point: $(cat "$T/b.err")"
# -o that cannot be written is said before the sweep runs (it took seconds before saying so)
out=$("$R" -o "$T" 2>&1); [ $? -eq 2 ] && [ "$out" = "precision-report: -o: $T: is a directory" ] && ok ||
  fail "precision-report -o DIR: $out"
# --sarif: one result per finding (rule = verdict, with its help, at the variant and at its
# source file, which GitHub's code scanning requires, the replay line in the message, which gives
# the finding again), none for a clean run, and the file whole
"$P" run -k softmax -v naive --scale 200 --at-defaults --cases 3 --sarif "$T/f.sarif" >/dev/null 2>&1
line=$(python3 - "$T/f.sarif" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == "2.1.0", d["version"]
run = d["runs"][0]
rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
res = run["results"]
assert len(res) == 3 and all(r["ruleId"] == "overflow" and r["ruleId"] in rules for r in res), res
assert res[0]["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "softmax/naive"
uri = res[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
assert uri == "kernels/softmax/softmax_cpu.c", uri
assert all(r["help"]["text"] for r in run["tool"]["driver"]["rules"])
print(res[0]["message"]["text"].split("Reproduce with: ")[1])
PY
) && ok || fail "run --sarif with findings: $line"
out=$(eval "$line" 2>&1); [ $? -eq 1 ] && echo "$out" | grep -q '^FINDING softmax/naive .* seed 1: overflow' && ok ||
  fail "the SARIF message's replay line: $line: $out"
# with PRECFUZZ_DOCS_URL every rule links its section of docs/verdicts.md (GitHub's anchors)
PRECFUZZ_DOCS_URL=https://example.org/p/blob/0123/docs/ "$P" run -k softmax -v naive --scale 200 --at-defaults \
  --cases 1 --sarif "$T/u.sarif" >/dev/null 2>&1
line=$(python3 - "$T/u.sarif" "$(dirname "$0")/../docs/verdicts.md" <<'PY'
import json, re, sys
rules = json.load(open(sys.argv[1]))["runs"][0]["tool"]["driver"]["rules"]
anchors = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
           for h in re.findall(r"^#+ (.*)$", open(sys.argv[2]).read(), re.M)}
for r in rules:
    base, _, anchor = r["helpUri"].partition("#")
    assert base == "https://example.org/p/blob/0123/docs/verdicts.md" and anchor in anchors, (r["id"], r["helpUri"])
print(len(rules))
PY
) && ok || fail "run --sarif's helpUri: $line"
"$P" run -k softmax -v safe --cases 3 --sarif "$T/ok.sarif" >/dev/null 2>&1 &&
  python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["runs"][0]["results"] == []' "$T/ok.sarif" && ok ||
  fail "run --sarif without findings"
# --junit: a suite per variant, a case per seed; a finding is a failure of its verdict whose text
# replays it; a hazard is said in system-err and is no failure; the counts add up
"$P" run -k softmax --scale 200 --at-defaults --cases 3 --junit "$T/j.xml" >/dev/null 2>&1
"$P" run -k softmax -v safe -t fp16 -a fp16 --shape 1x4096 --input x:value=0 --at-defaults --cases 1 --junit "$T/h.xml" >/dev/null 2>&1
line=$(python3 - "$T/j.xml" "$T/h.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
assert r.tag == "testsuites" and r.get("tests") == "9" and r.get("failures") == "3", r.attrib
# times: every case's, each suite the sum of its cases', the whole the sum of the suites'
sums = [sum(float(c.get("time")) for c in s) for s in r]
assert all(abs(float(s.get("time")) - t) < 1e-5 * len(s) for s, t in zip(r, sums)), sums
assert abs(float(r.get("time")) - sum(float(s.get("time")) for s in r)) < 1e-5 * len(r) and float(r.get("time")) > 0
suites = {s.get("name"): s for s in r}
naive = suites["softmax/naive fp16/fp32"]
assert naive.get("tests") == "3" and naive.get("failures") == "3"
assert suites["softmax/safe fp16/fp32"].get("failures") == "0"
cases = list(naive)
assert [c.get("name") for c in cases] == ["seed 1", "seed 2", "seed 3"]
f = cases[0].find("failure")
assert f.get("type") == "overflow" and f.get("message").startswith("overflow at ")
h = ET.parse(sys.argv[2]).getroot()
assert h.get("failures") == "0" and h.get("tests") == "1", h.attrib
err = h.find("testsuite/testcase/system-err").text
assert err.startswith("hazard saturated: ") and "reproduce with: " in err, err
print(f.text.split("reproduce with: ")[1])
PY
) && ok || fail "run --junit: $line"
out=$(eval "$line" 2>&1); [ $? -eq 1 ] && echo "$out" | grep -q '^FINDING softmax/naive .* seed 1: overflow' && ok ||
  fail "the JUnit failure's replay line: $line: $out"
"$P" diff-tp --cases 2 --json >"$T/d1.json" 2>/dev/null
"$P" diff-tp --cases 2 --json >"$T/d2.json" 2>/dev/null
[ -s "$T/d1.json" ] && cmp -s "$T/d1.json" "$T/d2.json" && ok || fail "diff-tp --json differs between two identical runs"
# run --json streams: memory does not grow with the cases (4,000 cases took 175 MB more than 200)
# (under ASan, freed memory waits in its quarantine: switched off here, it would count as growth)
rss() {
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0 /usr/bin/time -f "%M" \
    "$P" run -k softmax -v safe --shape 2x16 --cases "$1" --json 2>&1 >/dev/null | tail -1
}
few=$(rss 200) many=$(rss 4000)
[ $((many - few)) -lt 20000 ] && ok || fail "run --json grew by $((many - few)) KB from 200 to 4000 cases"
# and stays small: no CUDA library is loaded for a CPU run (10^5 cases took 4.3 MB here)
[ "$many" -lt 204800 ] && ok || fail "run --json of 4000 cases took $many KB (limit 200 MB)"
"$R" -i "$T/r.json" -o "$T/r.html" >"$T/out" 2>"$T/err" && grep -qx "$T/r.html" "$T/out" && ok || fail "precision-report -i: $(cat "$T/err")"
kernels=$("$P" list | awk 'NR > 1 && NF && $1 != "tp_diff" && !/^parameters/ {print $1} /^parameters/ {exit}' | sort -u)
python3 - "$T/r.html" $kernels <<'PY' && ok || fail "the report's HTML"
import sys, xml.etree.ElementTree as ET
ns = {"h": "http://www.w3.org/1999/xhtml", "s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()          # well-formed, or this raises
ids = {e.get("id"): e for e in root.iter() if e.get("id")}
for k in sys.argv[2:]:
    sec = ids.get("kernel-" + k)
    assert sec is not None, "no section for kernel " + k
    svgs = sec.findall(".//s:svg", ns)
    assert svgs, "kernel %s: no SVG plot" % k
    assert any(p.get("points", "").strip() for s in svgs for p in s.iter("{http://www.w3.org/2000/svg}polyline")), \
        "kernel %s: plots without data" % k
for i in ("summary", "diff-tp_diff", "faults", "findings", "environment"):
    assert i in ids, "no #" + i
links = [a.get("href") for a in root.iter("{http://www.w3.org/1999/xhtml}a")]
assert all(h.startswith("#") for h in links), "an external link"
text = ET.tostring(root, encoding="unicode")
assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/", ""), "an external asset or script"
PY
# attention_bwd's rounding-bias probe: in the results (dQ and dK over its cases), and as a
# table in its section
python3 - "$T/r.json" "$T/r.html" <<'PY' && ok || fail "the bias probe in the results and the report"
import json, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1]))
ab = [k for k in d["kernels"] if k["kernel"] == "attention_bwd"][0]
probes = [c["bias"] for c in ab["configs"] if "bias" in c]
assert probes and all(b["shape"] == "1x2x32x32x16" and b["scale"] == 4 for b in probes), probes
assert any(b["cases"] > 0 and {"dQ", "dK"} <= {s["stage"] for s in b["stages"]} for b in probes), probes
assert all("bias" not in c for k in d["kernels"] if k["kernel"] == "softmax" for c in k["configs"]), "a probe softmax has none of"
root = ET.parse(sys.argv[2]).getroot()
sec = [e for e in root.iter() if e.get("id") == "kernel-attention_bwd"][0]
text = "".join(sec.itertext())
assert "Rounding bias over many cases (cases of shape 1x2x32x32x16 at scale 4" in text, text[:300]
PY
"$R" -i "$T/r.json" --format md >"$T/r.md" 2>"$T/err" && grep -q '^| softmax | naive | fp16/fp32 |' "$T/r.md" && ok || fail "--format md: $(cat "$T/err")"
"$R" -i "$T/r.json" --format json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["summary"] and d["faults"]' && ok || fail "--format json"
"$R" --quick -o "$T/q.html" --save-results "$T/q.json" >/dev/null 2>"$T/err" && [ -s "$T/q.html" ] && [ -s "$T/q.json" ] && ok || fail "precision-report without -i: $(cat "$T/err")"

# expect2 NEEDLE ARGS...: exit 2 and one stderr line with NEEDLE
expect2() {
  local needle=$1; shift
  "$R" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -qF -- "$needle" "$T/err"; then
    fail "precision-report $* -> exit $rc (want 2, one line with '$needle'): $(cat "$T/err")"
  else ok; fi
}
# mutate EXPR FILE: a copy of the results with one Python statement applied to d
mutate() { python3 -c "import json,sys; d=json.load(open('$T/r.json')); $1; json.dump(d, open('$2','w'))"; }
printf '{"format": "precfuzz-results/2", "kernels": [' >"$T/trunc.json"
printf '' >"$T/empty.json"
mutate 'd["format"]="precfuzz-results/9"' "$T/fmt.json"
mutate 'del d["kernels"][0]["configs"][0]["max_ulps"]' "$T/miss.json"
mutate 'd["kernels"][0]["configs"][2]["scan"]["points"][3]["fails"]="x"' "$T/type.json"
mutate 'd["faults"][0]["found"]=1' "$T/bool.json"
mutate 'd["kernels"][0]["configs"][0]["thresholds"][0]["found"]=True; del d["kernels"][0]["configs"][0]["thresholds"][0]["replay"]' "$T/th.json"
mutate 'd=[d]' "$T/arr.json"
# a stage the probe finds biased is a hazard of its row: said in the md summary, and the row's severity
ab=$(python3 -c "import json; print([k['kernel'] for k in json.load(open('$T/r.json'))['kernels']].index('attention_bwd'))")
mutate "b=d['kernels'][$ab]['configs'][0]['bias']; b['cases']=128; d['kernels'][$ab]['configs'][0]['findings']=0; s=[x for x in b['stages'] if x['stage']=='dQ'][0]; s.update(mean_away=-0.31, t_away=-9.2, biased='toward zero')" "$T/biased.json"
"$R" -i "$T/biased.json" --format md | grep -q '| attention_bwd | [a-z-]* | [a-z0-9/]* | [a-z ]* | 0 | .*dQ biased toward zero over 128 cases: -0.31 ulps, t -9.2' && ok ||
  fail "a biased stage is not in the md summary"
"$R" -i "$T/biased.json" --format json | python3 -c "
import json, sys
r = [x for x in json.load(sys.stdin)['summary'] if x['kernel'] == 'attention_bwd'][0]
assert r['severity'] in ('hazard', 'finding') and r['bias']['cases'] == 128, r" && ok || fail "a biased stage's severity"
mutate "d['kernels'][$ab]['configs'][0]['bias']['stages'][0]['units']='x'" "$T/bias.json"
expect2 "kernels[$ab].configs[0].bias.stages[0].units: wrong type (a count: an integer >= 0)" -i "$T/bias.json"
mutate "d['kernels'][$ab]['configs'][0]['bias']['stages'][0]['biased']='sideways'" "$T/sense.json"
expect2 "kernels[$ab].configs[0].bias.stages[0].biased: not one of" -i "$T/sense.json"
mutate "del d['kernels'][$ab]['configs'][0]['bias']['t_limit']" "$T/limit.json"
expect2 "kernels[$ab].configs[0].bias.t_limit: missing (a number)" -i "$T/limit.json"
# the thresholds the page states are those the probe was judged with, from the results
mutate "[c['bias'].update(t_limit=4.5) for c in d['kernels'][$ab]['configs'] if 'bias' in c]" "$T/t45.json"
"$R" -i "$T/t45.json" -o "$T/t45.html" >/dev/null 2>&1 && grep -q 'biased at |t| &gt;= 4.5 and' "$T/t45.html" && ok ||
  fail "the bias table's thresholds are not the results' own"
mutate 'del d["differentials"][0]["faults"][0]["cases_to_find"]' "$T/diff.json"
# a sweep with accumulation in the storage dtype ("accum": "storage") reads back
"$P" sweep --kernel softmax --cases 2 --points 8 -o "$T/st.json" >/dev/null 2>&1 && grep -q '"accum":[[:space:]]*"storage"' "$T/st.json" &&
  "$R" -i "$T/st.json" -o "$T/st.html" >/dev/null 2>"$T/err" && ok || fail "a sweep with storage accumulation: $(cat "$T/err")"
# values the sweep never writes: refused, each class by name
mutate "d['kernels'][0]['configs'][0]['findings']=-1" "$T/neg.json"
expect2 "kernels[0].configs[0].findings: not allowed (a count: an integer >= 0)" -i "$T/neg.json"
mutate "d['kernels'][0]['configs'][0]['scan']['points'][0]['fails']=d['kernels'][0]['configs'][0]['scan']['cases']+1" "$T/many.json"
expect2 "kernels[0].configs[0].scan.points[0].fails: " -i "$T/many.json"
mutate "d['kernels'][0]['configs'][0]['dtype']='fp64'" "$T/dt.json"
expect2 "kernels[0].configs[0].dtype: not allowed (a dtype: fp32, fp16 or bf16)" -i "$T/dt.json"
mutate "d['kernels'][0]['kernel']='mish'" "$T/kn.json"
expect2 "kernels[0].kernel: no operation 'mish'" -i "$T/kn.json"
mutate "d['environment']['quick']='yes'" "$T/qk.json"
expect2 "environment.quick: wrong type (true or false)" -i "$T/qk.json"
mutate "d['kernels'][0]['configs'][0]['scan']['points'][0]['x_hex']='0x1.8p+99'" "$T/xh.json"
expect2 "kernels[0].configs[0].scan.points[0].x_hex: not the hex spelling of x" -i "$T/xh.json"
mutate "d['extra']=1" "$T/top.json"
expect2 "extra: an unknown field" -i "$T/top.json"
sed 's/"max_rel":[^,]*,/"max_rel": 1e999,/' "$T/r.json" >"$T/inf.json"
expect2 "is beyond binary64" -i "$T/inf.json"
sed 's/"max_rel":[^,]*,/"max_rel": 1e-400,/' "$T/r.json" >"$T/tiny.json"
expect2 "is below the least value of binary64" -i "$T/tiny.json"
# an output over an input or over the other output, a flag twice, a sweep setting with -i: refused
cp "$T/r.json" "$T/r.keep"
expect2 "is the input (-i)" -i "$T/r.json" -o "$T/./r.json"
cmp -s "$T/r.json" "$T/r.keep" && ok || fail "precision-report -o over -i changed the input"
expect2 "--save-results and -o name one file" --quick --save-results "$T/s.json" -o "$T/s.json"
expect2 "--cases given twice" --cases 2 --cases 3
expect2 "--cases: the sweep does not run when -i is given" -i "$T/r.json" --cases 5 -o "$T/c.html"
expect2 "not valid JSON" -i "$T/trunc.json"
expect2 "not valid JSON" -i "$T/empty.json"
expect2 "is not precfuzz-results/2" -i "$T/fmt.json"
expect2 "kernels[0].configs[0].max_ulps: missing (a number)" -i "$T/miss.json"
expect2 "kernels[0].configs[2].scan.points[3].fails: wrong type (a count: an integer >= 0)" -i "$T/type.json"
expect2 "faults[0].found: wrong type (true or false)" -i "$T/bool.json"
expect2 "thresholds[0].replay: missing" -i "$T/th.json"
expect2 "differentials[0].faults[0].cases_to_find: missing (a number)" -i "$T/diff.json"
expect2 "not a JSON object" -i "$T/arr.json"
expect2 "No such file" -i "$T/none.json"
expect2 "is not html, md or json" -i "$T/r.json" --format pdf
expect2 "unknown option '--frob'" --frob
expect2 "-o needs a value" -i "$T/r.json" -o
expect2 "cannot write" -i "$T/r.json" -o "$T/no/such/dir/r.html"
expect2 "the sweep does not run" -i "$T/r.json" --save-results "$T/x.json"

# the first screen: a cell per variant and dtype with its state, where it is safe (decimal) and
# the share of its bound used; grey where no case lay inside the domain (not measured, never
# green); the torch.testing column neutral; the plots of the quantity the contract judges, and
# none without data; the Markdown summary in decimal. softmax/naive fp16 (exp in fp32) overflows
# past ln(FLT_MAX) = 88.72283906: its last good fp16 value is 88.6875 (fp16's spacing there is 1/16).
mutate "c=[c for c in d['kernels'][0]['configs'] if c['variant']=='safe' and c['dtype']=='fp16'][0]; \
c.update(cases_outside_domain=c['scan']['cases']*len(c['scan']['points']), findings=0, hazard_cases=0); \
c['hazards'].update({h: 0 for h in c['hazards']}); [p.update(fails=0) for k in d['kernels'][1:2] for c2 in k['configs'] for p in c2['scan']['points']]" "$T/na.json"
"$R" -i "$T/na.json" -o "$T/na.html" >/dev/null 2>&1
python3 - "$T/na.html" "$T/r.json" <<'PY' && ok || fail "the report's first screen"
import json, sys, xml.etree.ElementTree as ET
H = "{http://www.w3.org/1999/xhtml}"
root = ET.parse(sys.argv[1]).getroot()
table = [t for t in root.iter(H + "table") if t.get("class") == "summary"][0]
rows = table.findall(H + "tr")
heads = ["".join(th.itertext()) for th in rows[0]]
assert heads[2:7] == ["fp32/fp32", "fp16/fp32", "fp16/storage", "bf16/fp32", "bf16/storage"], heads
cells = {}
for r in rows[1:]:
    tds = r.findall(H + "td")
    k, v = "".join(tds[0].itertext()), "".join(tds[1].itertext())
    for h, td in zip(heads[2:], tds[2:]):
        cells[(k, v, h)] = (td.get("class"), "".join(td.itertext()))
    assert tds[-1].get("class") == "neutral", ("torch.testing is coloured", k, v)
cls, text = cells[("softmax", "naive", "fp16/fp32")]
assert cls == "warn" and text.startswith("boundary") and "safe for value \u2264 88.69 (overflow)" in text, text
assert "bound used: " in text, text
cls, text = cells[("softmax", "safe", "fp16/fp32")]
assert cls == "na" and text.startswith("not measured") and "bound used" not in text, (cls, text)
assert all(c != "good" or t.startswith("ok") for c, t in cells.values()), "a green cell that is not ok"
# the plots: the share of the bound, the bound drawn at 1; softmax_bwd (no failure left) has no
# frame of the fraction failing, and says why
secs = {e.get("id"): e for e in root.iter() if e.get("id", "").startswith("kernel-")}
titles = lambda k: ["".join(t.itertext()) for t in secs[k].iter("{http://www.w3.org/2000/svg}title")]
assert any("share of the contract's bound used" in t for t in titles("kernel-softmax")), titles("kernel-softmax")
assert not any("fraction of" in t for t in titles("kernel-softmax_bwd")), titles("kernel-softmax_bwd")
assert "No case failed (finding) anywhere along" in "".join(secs["kernel-softmax_bwd"].itertext())
PY
# the share of the bound: at most 1 at a point without a finding inside the domain, and beyond 1
# (or null: beyond any share) at one with findings; null where no case was inside the domain
python3 - "$T/r.json" <<'PY' && ok || fail "max_bound_use against the findings"
import json, sys
d = json.load(open(sys.argv[1]))
n = 0
for k in d["kernels"]:
    for c in k["configs"]:
        cases = c["scan"]["cases"]
        for p in c["scan"]["points"]:
            u = p["max_bound_use"]
            if p["outside_domain"] == cases:
                assert u is None, (k["kernel"], c["variant"], p)
            elif p["findings"]:
                assert u is None or u > 1, (k["kernel"], c["variant"], p)
            else:
                assert u is not None and 0 <= u <= 1, (k["kernel"], c["variant"], p)
            n += 1
assert n > 100, n
PY
"$R" -i "$T/r.json" --format md | grep -q '^| softmax | naive | fp16/fp32 | boundary | 0 | - | [0-9.e+-]* | value ≤ 88.69 (overflow), value ≥ -1[0-9.]* (underflow)' &&
  ok || fail "the Markdown summary in decimal: $("$R" -i "$T/r.json" --format md | grep -m1 '| softmax | naive | fp16/fp32')"

echo "report: $n passed, $failed failed"
[ $failed -eq 0 ]
