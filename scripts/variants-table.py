#!/usr/bin/env python3
"""docs/variants.md from the registry: every family and variant precfuzz lists (precfuzz list
--json), with its dtypes, accumulations, CUDA implementation, faults and the settings the
faults' runs need. make test checks that the committed page is what this writes (tests:
variants_table).

usage: scripts/variants-table.py PRECFUZZ [OUT]   (OUT default: stdout)
"""
import json
import os
import subprocess
import sys


def page(listing):
    out = ["# Families and variants", "",
           "Generated from the registry (`precfuzz list --json`) by `scripts/variants-table.py`; `make test`",
           "checks that it is current. Each family's page (`docs/kernels/`) says what its variants compute and",
           "where their contracts come from; `precfuzz list` prints the contracts. Beside a fault, in",
           "parentheses: the dtype and parameters its runs need to show it (the sweep's fault table and the",
           "generic test run it so).", ""]
    ops = list(dict.fromkeys(e["kernel"] for e in listing))
    for op in ops:
        rows = [e for e in listing if e["kernel"] == op]
        out += ["## `%s`" % op, "", "| variant | dtypes | accumulation | CUDA | faults | what |", "|---|---|---|---|---|---|"]
        for e in rows:
            faults = []
            for f in e["faults"]:
                s = e.get("fault_settings", {}).get(f)
                if s:
                    how = ", ".join(s["params"])
                    if "dtype" in s:
                        how = "%s; %s" % (s["dtype"], how)
                    faults.append("`%s` (%s)" % (f, how))
                else:
                    faults.append("`%s`" % f)
            out.append("| `%s` | %s | %s | %s | %s | %s |" % (
                e["variant"], ", ".join(e["dtypes"]), ", ".join(e["accums"]), "yes" if e["cuda"] else "-",
                ", ".join(faults) or "-", e["summary"].replace("|", "\\|")))
        out.append("")
    out.append("%d variants of %d families." % (len(listing), len(ops)))
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        p = subprocess.run([sys.argv[1], "list", "--json"], capture_output=True, text=True)
    except OSError as e:
        print(f"variants-table.py: {sys.argv[1]}: {e.strerror}", file=sys.stderr)
        return 2
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        print(f"variants-table.py: {sys.argv[1]} list --json: exit {p.returncode}: {lines[-1] if lines else ''}",
              file=sys.stderr)
        return 2
    listing = json.loads(p.stdout)
    text = page([e for e in listing if not e.get("like")])  # the built-in variants only
    if len(sys.argv) == 3:
        tmp = sys.argv[2] + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, sys.argv[2])
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
