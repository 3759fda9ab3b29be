#!/usr/bin/env python3
"""The CI examples (examples/ci/: GitHub Actions, GitLab CI) parse, call make targets and
variables that exist, and upload what the commands they run write: their precfuzz lines are
run for real (in a scratch directory, with this build's precfuzz as build/bin/precfuzz), the
SARIF files that come out are SARIF with rules linking docs/verdicts.md, the JUnit files are
JUnit, and every uploaded path is one a command of theirs or a make target writes.
usage: ci_examples.py PRECFUZZ SOURCE_DIR   (exit 77 without PyYAML)"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

try:
    import yaml
except ImportError:
    print("ci_examples: skipped (no PyYAML: scripts/python-env.sh)")
    sys.exit(77)

P, S = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failed = 0
checks = 0


def check(cond, what):
    global failed, checks
    checks += 1
    if not cond:
        failed += 1
        print(f"FAIL: {what}")


makefile = open(os.path.join(S, "Makefile")).read()
phony = set(re.search(r"^\.PHONY:(.*)$", makefile, re.M).group(1).split())
make_vars = set(re.findall(r"^([A-Z_]+)\s*\?=", makefile, re.M))
# what the make targets write, as the Makefile and run-fuzzers.sh name it
fuzzers = open(os.path.join(S, "scripts", "run-fuzzers.sh")).read()
made = {
    "build/reports/": "$(BUILD)/reports/" in makefile,
    "build/fuzz/fuzz-results.xml": '"$FUZZ_BUILD/fuzz-results.xml"' in fuzzers,
    "build/fuzz/findings/": "$FUZZ_BUILD/findings/" in fuzzers,
}


# a make command: at the start of a line or after && || ; (not a package named make)
MAKE = r"(?:^|&&|\|\||;)\s*make ([a-z-]+)((?: [A-Z_]+=\S+)*)"


def check_make(line, where):
    for m in re.finditer(MAKE, line, re.M):
        check(m.group(1) in phony, f"{where}: make {m.group(1)} is no target of the Makefile")
        for var in re.findall(r"([A-Z_]+)=", m.group(2)):
            check(var in make_vars, f"{where}: make variable {var} is not the Makefile's")


def run_scratch(script, env, where):
    """The script with make lines made no-ops (checked above), in a scratch directory where
    build/bin/precfuzz is this build's; returns the directory."""
    d = tempfile.mkdtemp(prefix="ci-example-")
    os.makedirs(os.path.join(d, "build", "bin"))
    os.symlink(P, os.path.join(d, "build", "bin", "precfuzz"))
    script = re.sub(MAKE, lambda m: m.group(0)[: m.group(0).index("make")] + "true", script, flags=re.M)
    e = dict(os.environ, **env)
    p = subprocess.run(["bash", "-e", "-c", script], cwd=d, env=e, capture_output=True, text=True)
    check(p.returncode == 0, f"{where}: its commands exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return d


def check_outputs(d, sarif_path, junit_globs, docs_url, where):
    sarifs = sorted(glob.glob(os.path.join(d, sarif_path, "*.sarif")))
    check(len(sarifs) == 4, f"{where}: {len(sarifs)} SARIF files under {sarif_path}, not 4")
    for f in sarifs:
        s = json.load(open(f))
        rules = s["runs"][0]["tool"]["driver"]["rules"]
        check(s["version"] == "2.1.0" and all(r["helpUri"].startswith(docs_url + "verdicts.md#") for r in rules),
              f"{where}: {f} is no SARIF 2.1.0 with rules linking {docs_url}verdicts.md")
    for g in junit_globs:
        if g in made:
            check(made[g], f"{where}: {g} is written by no make target")
            continue
        files = glob.glob(os.path.join(d, g))
        check(files, f"{where}: the JUnit report {g} matches no file the commands wrote")
        for f in files:
            check(ET.parse(f).getroot().tag in ("testsuites", "testsuite"), f"{where}: {f} is not JUnit XML")


def check_paths(d, paths, where):
    for p in paths:
        p = p.strip()
        if not p:
            continue
        if p in made:
            check(made[p], f"{where}: {p} is written by no make target")
        else:
            check(os.path.exists(os.path.join(d, p)), f"{where}: uploads {p}, which its commands do not write")


# ---- GitHub Actions ----
gh = yaml.safe_load(open(os.path.join(S, "examples", "ci", "github-actions.yml")))
on = gh.get("on", gh.get(True))  # YAML 1.1 reads the key `on` as true
check(set(on) >= {"push", "pull_request"}, "github: not run on push and pull_request")
check(gh["permissions"].get("security-events") == "write", "github: no security-events: write (the SARIF upload)")
(job,) = gh["jobs"].values()
steps = job["steps"]
runs = [s for s in steps if "run" in s]
for s in runs:
    check_make(s["run"], "github")
uses = {s["uses"].split("@")[0]: s for s in steps if "uses" in s}
check("actions/checkout" in uses, "github: no checkout")
sarif_step = uses.get("github/codeql-action/upload-sarif")
check(sarif_step and sarif_step.get("if") == "always()", "github: no upload-sarif step run always")
kern = [s for s in runs if "precfuzz run" in s["run"]]
check(len(kern) == 1, "github: not one step running precfuzz")
url = "https://github.example/o/r/blob/0123/docs/"
env = {k: (url if "${{" in v else v) for k, v in kern[0].get("env", {}).items()}
check(env.get("PRECFUZZ_DOCS_URL") == url, "github: PRECFUZZ_DOCS_URL not set from the repository and commit")
d = run_scratch(kern[0]["run"], env, "github")
check_outputs(d, sarif_step["with"]["sarif_file"], [], url, "github")
art = uses.get("actions/upload-artifact")
check(art and art.get("if") == "always()", "github: no upload-artifact step run always")
check_paths(d, art["with"]["path"].splitlines(), "github")

# ---- GitLab CI ----
gl = yaml.safe_load(open(os.path.join(S, "examples", "ci", "gitlab-ci.yml")))
(job,) = [v for k, v in gl.items() if isinstance(v, dict) and "script" in v]
script = "\n".join(job["script"])
check_make(script, "gitlab")
check(job["artifacts"]["when"] == "always", "gitlab: artifacts not kept always")
url = "https://gitlab.example/o/r/-/blob/0123/docs/"
d = run_scratch(script, {"PRECFUZZ_DOCS_URL": url}, "gitlab")
check(job["variables"]["PRECFUZZ_DOCS_URL"] == "$CI_PROJECT_URL/-/blob/$CI_COMMIT_SHA/docs/",
      "gitlab: PRECFUZZ_DOCS_URL not set from the project and commit")
check_outputs(d, "build/ci", job["artifacts"]["reports"]["junit"], url, "gitlab")
check_paths(d, job["artifacts"]["paths"], "gitlab")

print(f"ci_examples: {checks - failed} checks passed, {failed} failed")
sys.exit(1 if failed else 0)
