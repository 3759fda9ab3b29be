#!/usr/bin/env python3
"""The framework-kernel targets: the examples that put a framework's own kernels under precfuzz
(examples/*.py), each declaring on one line what it registers and how it starts:

  # precfuzz-target: kernel=K start=exec|ranks:N needs=torch|frameworks cases=N variants=V1,V2 [fuzz=V1,...]

kernel: the family (its fuzz driver is <kernel>_fuzzer); start: a kernel process (exec) or a
rank group of N processes (ranks:N); needs: what scripts/python-env.sh installs for it (--torch,
--frameworks); cases: how many cases a check runs per variant; variants: every variant it
registers; fuzz: those make fuzz-torch aims at (default: all). scripts/run-fuzzers.sh --torch,
tests/torch_kernels.sh and scripts/gpu-check.sh read this listing; --check starts each target
and compares what it registers (precfuzz --kernels SPEC list --json) with its line.

usage: scripts/targets.py [--needs torch|frameworks]... [--json | --variants]
       scripts/targets.py --check PRECFUZZ PYTHON [--needs ...]
Without --json: one target per line, tab-separated: example kernel variants fuzz start needs cases
(variants and fuzz comma-separated; example as examples/NAME.py). --variants: one line per
variant of the kernel processes (start=exec), space-separated: kernel variant NAME cases (the
example as examples/NAME.py). Exit 2 on a malformed line.
"""
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"^# precfuzz-target: (.*)$", re.M)
FIELDS = ("kernel", "start", "needs", "cases", "variants")


def bad(path, why):
    print("targets: %s: %s" % (os.path.relpath(path, ROOT), why), file=sys.stderr)
    sys.exit(2)


def parse(path):
    with open(path) as f:
        found = LINE.findall(f.read())
    if not found:
        return None
    if len(found) > 1:
        bad(path, "more than one precfuzz-target line")
    t = {}
    for word in found[0].split():
        key, eq, value = word.partition("=")
        if not eq or not value or key not in FIELDS + ("fuzz",) or key in t:
            bad(path, "'%s' is not one of %s=VALUE, once each" % (word, ", ".join(FIELDS + ("fuzz",))))
        t[key] = value
    missing = [k for k in FIELDS if k not in t]
    if missing:
        bad(path, "missing %s" % ", ".join(missing))
    if not re.fullmatch(r"exec|ranks:[1-9][0-9]*", t["start"]):
        bad(path, "start=%s: exec or ranks:N" % t["start"])
    if t["needs"] not in ("torch", "frameworks"):
        bad(path, "needs=%s: torch or frameworks" % t["needs"])
    if not t["cases"].isdigit() or int(t["cases"]) < 1:
        bad(path, "cases=%s: a positive integer" % t["cases"])
    t["variants"] = t["variants"].split(",")
    t["fuzz"] = t["fuzz"].split(",") if "fuzz" in t else list(t["variants"])
    if not set(t["fuzz"]) <= set(t["variants"]):
        bad(path, "fuzz= names %s, not among its variants" % ",".join(sorted(set(t["fuzz"]) - set(t["variants"]))))
    t["cases"] = int(t["cases"])
    t["example"] = os.path.relpath(path, ROOT)
    return t


def targets(needs):
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.py"))):
        t = parse(path)
        if t and (not needs or t["needs"] in needs):
            out.append(t)
    return out


def check(precfuzz, python, ts):
    """Each target's registered variants against its line."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo")
    failed = 0
    for t in ts:
        spec = "%s:%s %s" % (t["start"], python, t["example"])
        p = subprocess.run([precfuzz, "--kernels", spec, "list", "--json"], capture_output=True, text=True,
                           cwd=ROOT, env=env, timeout=600)
        if p.returncode != 0:
            print("FAIL: %s: precfuzz --kernels '%s' list: exit %d: %s" % (t["example"], spec, p.returncode, p.stderr.strip()[-300:]))
            failed += 1
            continue
        got = [(e["kernel"], e["variant"]) for e in json.loads(p.stdout) if e.get("like")]
        want = [(t["kernel"], v) for v in t["variants"]]
        if sorted(got) != sorted(want):
            print("FAIL: %s registers %s; its line says %s" % (t["example"], got, want))
            failed += 1
        else:
            print("%s: %d variants of %s, as its line says" % (t["example"], len(got), t["kernel"]))
    return failed


def main(argv):
    needs = [argv[i + 1] for i, a in enumerate(argv) if a == "--needs" and i + 1 < len(argv)]
    for n in needs:
        if n not in ("torch", "frameworks"):
            print("targets: --needs %s: torch or frameworks" % n, file=sys.stderr)
            return 2
    ts = targets(needs)
    if "--check" in argv:
        i = argv.index("--check")
        if len(argv) < i + 3:
            print("targets: --check PRECFUZZ PYTHON", file=sys.stderr)
            return 2
        for path, what in ((argv[i + 1], "PRECFUZZ"), (argv[i + 2], "PYTHON")):
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                print("targets: --check %s: %s is not an executable file" % (what, path), file=sys.stderr)
                return 2
        failed = check(argv[i + 1], argv[i + 2], ts)
        print("targets: %d of %d as declared" % (len(ts) - failed, len(ts)))
        return 1 if failed else 0
    if "--variants" in argv:
        for t in ts:
            if t["start"] == "exec":
                for v in t["variants"]:
                    print(t["kernel"], v, os.path.splitext(os.path.basename(t["example"]))[0], t["cases"])
        return 0
    if "--json" in argv:
        json.dump(ts, sys.stdout, indent=1)
        print()
        return 0
    for t in ts:
        print("\t".join([t["example"], t["kernel"], ",".join(t["variants"]), ",".join(t["fuzz"]), t["start"],
                         t["needs"], str(t["cases"])]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
