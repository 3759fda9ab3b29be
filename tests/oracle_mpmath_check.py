#!/usr/bin/python3
"""Independent check of the oracles: recompute every exact value that `precfuzz run --json` printed
with mpmath (not MPFR) at 1000 bits, from the stored inputs the JSON lists, and require agreement to
better than 2^-150 relative. Each operation brings its formula: kernels/<op>/<op>_mpmath.py, whose
exact(case, inputs) gives the exact outputs (softmax, attention, adam and clip have one).

usage: oracle_mpmath_check.py PRECFUZZ -- RUN-ARGS...   (runs precfuzz run RUN-ARGS --json)
"""
import importlib.util
import json
import os
import subprocess
import sys

import mpmath

from mpmath_util import parse_hex

mpmath.mp.prec = 1000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def formula(kernel):
    """The operation's exact(case, inputs), from kernels/<kernel>/<kernel>_mpmath.py."""
    path = os.path.join(ROOT, "kernels", kernel, kernel + "_mpmath.py")
    if not os.path.exists(path):
        sys.exit("oracle_mpmath_check: %s has no mpmath formula (%s)" % (kernel, os.path.relpath(path, ROOT)))
    spec = importlib.util.spec_from_file_location(kernel + "_mpmath", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.exact


BOUND = mpmath.mpf(2) ** -150


def compare(res):
    """Every exact value of a run --json result against the formula: (elements checked, elements
    below MPFR's range checked against their bound, worst relative difference). AssertionError
    on a disagreement that is not a difference of rounding (undefined, zero, a bound broken)."""
    worst, checked, tiny = mpmath.mpf(0), 0, 0
    for r in res["cases"]:
        case = r["case"]
        iv = {name: [parse_hex(v) for v in vals] for name, vals in r["input_values"].items()}
        want = formula(case["kernel"])(case, iv)
        assert len(want) == len(r["elements"]), "element count"
        for w, el in zip(want, r["elements"]):
            got = parse_hex(el["exact"])
            if "exact_upper" in el:  # below MPFR's exponent range: only a bound is claimed
                assert w != 0 and abs(w) < parse_hex(el["exact_upper"]), "tiny element out of its bound"
                tiny += 1
                continue
            if w is None:
                assert mpmath.isnan(got), "undefined element reported as %s" % el["exact"]
                continue
            if w == 0:
                assert got == 0, "exact zero reported as %s" % el["exact"]
                continue
            rel = abs(got - w) / abs(w)
            worst = max(worst, rel)
            checked += 1
    return checked, tiny, worst


def log2(worst):
    return mpmath.nstr(mpmath.log(worst, 2), 6) if worst else "-inf"


def main():
    precfuzz, args = sys.argv[1], sys.argv[3:]
    res = json.loads(subprocess.run([precfuzz, "run"] + args + ["--json"], capture_output=True, text=True).stdout)
    checked, tiny, worst = compare(res)
    print("checked %d elements (and %d below MPFR's range, within their bound); worst relative difference 2^%s (bound 2^-150)" %
          (checked, tiny, log2(worst)))
    if checked == 0 or worst >= BOUND:
        sys.exit(1)


if __name__ == "__main__":
    main()
