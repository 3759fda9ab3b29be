#!/usr/bin/python3
"""The generic test: every variant the registry lists (precfuzz list --json) through the same
checks, as MPFR's tgeneric and PyTorch's OpInfo do; nothing in it names a family.

  mpmath  the oracle's exact values against the family's mpmath formula (kernels/<op>/<op>_mpmath.py:
          exact(case, inputs)), to 2^-150 relative: one small case (the module's SMALL arguments)
          in every dtype the variant takes, and the family's CHECKS (run arguments of the paths it
          needs checked beside them, once per family)
  fast    the same runs with the oracle's fast path and with MPFR alone (--oracle mpfr): the same
          exact values, roundings and verdicts, bit for bit
  replay  each of those cases written as a case file replays to the same outputs and verdicts
  faults  every fault a variant declares is found by the sweep's fault table (its per-fault
          settings, pf_op_sweep.fault_settings), the line it prints finds it again, and its
          minimized case keeps the verdict; a differential family's sweep runs its first
          variant, so each other variant's faults are run with the same settings (list --json)
  cuda    a variant that has a CUDA implementation: the entry its family's CPU side asks the
          module for (pf_cuda_entry("...") in kernels/<op>/) is one the built module registers
          (PF_CUDA_ENTRY: its name is in the module's strings; the module exports only its table)

A family without an mpmath formula is said so on its rows (its exact values are checked by
its own tests against values derived by hand); every other check runs for every variant.

usage: generic_check.py PRECFUZZ [-k KERNEL]...
Prints one row per variant and a summary; exit 1 when any check fails.
"""
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpmath  # noqa: E402

import oracle_mpmath_check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = "7"


class Failed(Exception):
    pass


def precfuzz(binary, args, ok=(0, 1)):
    """precfuzz ARGS: (exit status, stdout); a status outside ok fails the check."""
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    if p.returncode not in ok:
        raise Failed("precfuzz %s: exit %d: %s" % (" ".join(args), p.returncode, (p.stderr or p.stdout).strip()[-300:]))
    return p.returncode, p.stdout


def family_module(op):
    path = os.path.join(ROOT, "kernels", op, op + "_mpmath.py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location(op + "_mpmath", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def elements(res):
    return [[(e.get("y"), e.get("exact"), e.get("rounded"), e.get("verdict")) for e in c["elements"]] for c in res["cases"]]


def check_run(binary, args, module, tmp, tally):
    """One run's checks: mpmath (when the family has a formula), fast against MPFR, replay."""
    _, out = precfuzz(binary, ["run"] + args + ["--json"])
    fast = json.loads(out)
    if module is not None:
        checked, tiny, worst = oracle_mpmath_check.compare(fast)
        if worst >= oracle_mpmath_check.BOUND:
            raise Failed("mpmath: %s: relative difference 2^%s" % (" ".join(args), oracle_mpmath_check.log2(worst)))
        tally["checked"] += checked + tiny
        tally["worst"] = max(tally["worst"], worst)
    _, out = precfuzz(binary, ["run"] + args + ["--json", "--oracle", "mpfr"])
    ref = json.loads(out)
    if elements(fast) != elements(ref) or [c["verdict"] for c in fast["cases"]] != [c["verdict"] for c in ref["cases"]]:
        raise Failed("fast path against MPFR alone: %s: the exact values, roundings or verdicts differ" % " ".join(args))
    tally["fast"] += len(fast["cases"])
    for i, c in enumerate(fast["cases"]):
        path = os.path.join(tmp, "case%d.json" % i)
        with open(path, "w") as f:
            json.dump(c["case"], f)
        _, out = precfuzz(binary, ["replay", path, "--json"])
        again = json.loads(out)["cases"][0]
        if elements({"cases": [again]}) != elements({"cases": [c]}) or again["verdict"] != c["verdict"]:
            raise Failed("replay: %s case %d: its case file replays to other outputs or another verdict" % (" ".join(args), i))
        tally["replay"] += 1


def sweep_faults(binary, op, tmp):
    """The sweep's fault table of op: {(variant, fault): entry} and the differential's first variant."""
    out = os.path.join(tmp, "sweep.json")
    precfuzz(binary, ["sweep", "--kernel", op, "--cases", "4", "--points", "8", "-o", out], ok=(0,))
    with open(out) as f:
        res = json.load(f)
    table = {(e["variant"], e["fault"]): e for e in res["faults"]}
    first = None
    for d in res["differentials"]:
        first = d["variant"]
        for e in d["faults"]:
            table[(d["variant"], e["fault"])] = e
    return table, first


def check_faults(binary, entry, table, first, tmp):
    """Every fault of the variant found; its line finds it again; its minimized case holds."""
    found = 0
    for fault in entry["faults"]:
        e = table.get((entry["variant"], fault))
        if e is None and first is not None:  # a differential's other variant: run with the settings
            s = entry.get("fault_settings", {}).get(fault, {})
            dtype = s.get("dtype") or next(t for t in ("bf16", "fp16", "fp32") if t in entry["dtypes"])
            args = ["run", "-k", entry["kernel"], "-v", entry["variant"], "-t", dtype, "--fault", fault,
                    "--cases", "40", "--max-print", "0"]
            for p in s.get("params", []):
                args += ["--param", p]
            rc, _ = precfuzz(binary, args)
            if rc != 1:
                raise Failed("fault %s of %s/%s: not found in 40 cases (%s)" % (fault, entry["kernel"], entry["variant"], " ".join(args)))
            found += 1
            continue
        if e is None or not e["found"]:
            raise Failed("fault %s of %s/%s: the sweep does not find it" % (fault, entry["kernel"], entry["variant"]))
        line = shlex.split(e["replay"])
        rc, out = precfuzz(line[0], line[1:])
        if rc != 1:
            raise Failed("fault %s of %s/%s: its replay line finds nothing: %s" % (fault, entry["kernel"], entry["variant"], e["replay"]))
        if "minimized" in e:
            path = os.path.join(tmp, "minimized.json")
            with open(path, "w") as f:
                json.dump(e["minimized"], f)
            precfuzz(binary, ["replay", path], ok=(0,))
        found += 1
    return found


def cuda_entries(op):
    names = set()
    folder = os.path.join(ROOT, "kernels", op)
    for name in os.listdir(folder):
        if name.endswith(".c"):
            with open(os.path.join(folder, name)) as f:
                names |= set(re.findall(r'pf_cuda_entry\("([^"]+)"', f.read()))
    return names


def main():
    binary = os.path.abspath(sys.argv[1])
    only = [sys.argv[i + 1] for i, a in enumerate(sys.argv) if a == "-k" and i + 1 < len(sys.argv)]
    _, out = precfuzz(binary, ["list", "--json"], ok=(0,))
    listing = [e for e in json.loads(out) if not only or e["kernel"] in only]
    module_path = os.path.join(os.path.dirname(binary), "..", "lib", "precfuzz-cuda.so")
    exported = None
    if os.path.exists(module_path):
        with open(module_path, "rb") as f:
            module_bytes = f.read()
        exported = {m.decode() for m in re.findall(rb"\0(pf_[a-z0-9_]+_cuda)\0", module_bytes)}
    ops = list(dict.fromkeys(e["kernel"] for e in listing))
    failures, rows = [], 0
    print("%-14s %-20s %-34s %-7s %-7s %-7s %s" % ("kernel", "variant", "mpmath", "fast", "replay", "faults", "cuda"))
    with tempfile.TemporaryDirectory() as tmp:
        for op in ops:
            module = family_module(op)
            small = shlex.split(module.SMALL) if module is not None else []
            try:
                table, first = sweep_faults(binary, op, tmp)
            except Failed as e:
                failures.append(str(e))
                table, first = {}, None
            for entry in (e for e in listing if e["kernel"] == op):
                rows += 1
                tally = {"checked": 0, "worst": mpmath.mpf(0), "fast": 0, "replay": 0}
                cells = []
                try:
                    for t in entry["dtypes"]:
                        check_run(binary, ["-k", op, "-v", entry["variant"], "-t", t, "--cases", "1", "--seed", SEED] + small,
                                  module, tmp, tally)
                    if module is None:
                        cells.append("none (no %s_mpmath.py)" % op)
                    elif tally["checked"] == 0:  # every value undefined or zero: nothing was compared
                        raise Failed("mpmath: %s/%s: no element compared (SMALL gives no value to check)" % (op, entry["variant"]))
                    else:
                        cells.append("%d el., worst 2^%s" % (tally["checked"], oracle_mpmath_check.log2(tally["worst"])))
                    cells += [str(tally["fast"]), str(tally["replay"])]
                    n = check_faults(binary, entry, table, first, tmp)
                    cells.append("%d/%d" % (n, len(entry["faults"])))
                    if not entry["cuda"]:
                        cells.append("-")
                    elif exported is None:
                        cells.append("no module built")
                    else:
                        want = cuda_entries(op)
                        if not want or not want <= exported:
                            raise Failed("cuda: %s/%s: entries %s, the module registers %s of them" %
                                         (op, entry["variant"], sorted(want), sorted(want & exported)))
                        cells.append(",".join(sorted(want)))
                except Failed as e:
                    failures.append(str(e))
                    cells.append("FAILED")
                print("%-14s %-20s %-34s %-7s %-7s %-7s %s" % tuple([op, entry["variant"]] + (cells + [""] * 5)[:5]))
            if module is not None:  # the family's own paths, once
                tally = {"checked": 0, "worst": mpmath.mpf(0), "fast": 0, "replay": 0}
                try:
                    for line in module.CHECKS:
                        check_run(binary, ["-k", op] + shlex.split(line), module, tmp, tally)
                    print("%-14s %-20s %-34s %-7s %-7s" % (op, "(CHECKS: %d)" % len(module.CHECKS),
                          "%d el., worst 2^%s" % (tally["checked"], oracle_mpmath_check.log2(tally["worst"])),
                          tally["fast"], tally["replay"]))
                except Failed as e:
                    failures.append(str(e))
    for f in failures:
        print("FAIL: " + f)
    print("generic_check: %d variants of %d families, %d failures" % (rows, len(ops), len(failures)))
    return 1 if failures or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
