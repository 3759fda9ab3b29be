#!/usr/bin/env python3
"""The floors of the house, checked over the #include lines of the C and CUDA sources.

Floors, by where a file lives (docs/layout.md): the core library at the bottom, the families
above it, the commands, drivers, report and bench on top:
  0 core      core/
  1 families  kernels/ (specs, emulations, fuzz decoders), oracles/
  2 top       cli/, fuzz/, reports/, bench/, tests/, examples/
Rules, each violation one line (file:line: what), exit 1 when there is any:
  up      a file includes one from a floor above its own;
  judge   an oracle (oracles/) includes from kernels/ anything but a family's spec
          (kernels/<op>/<op>_spec.h): the judge never takes code from what it judges;
  spec    a family's spec includes an emulation's or an oracle's file (anything in kernels/
          or oracles/ but another spec): both include the spec, it includes neither;
  cycle   two modules (a .c and its .h, by folder and name) include each other, directly or
          through others, on the core floor.
usage: scripts/check-layers.py [ROOT]   (default: the repository this script is in)
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
SOURCES = (".c", ".h", ".cu", ".cuh")
TOP_DIRS = ("cli/", "fuzz/", "reports/", "bench/", "tests/", "examples/")
SPEC = re.compile(r"kernels/([^/]+)/\1_spec\.h$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def floor(path):
    """The floor of a file by where it lives, None outside the plan."""
    if path.startswith(TOP_DIRS):
        return 2
    if path.startswith(("kernels/", "oracles/")):
        return 1
    if path.startswith("core/"):
        return 0
    return None


def resolve(src, name, files):
    """The repository path an include names: from the root (the build's include path) or
    beside the including file; None for a system or generated header."""
    for cand in (name, os.path.normpath(os.path.join(os.path.dirname(src), name))):
        if cand in files:
            return cand
    return None


def module(path):
    return os.path.splitext(path)[0]


def main():
    files = set()
    for d, subdirs, names in os.walk(ROOT):
        subdirs[:] = [s for s in subdirs if not s.startswith(".") and s not in ("build", "shared")]
        for n in names:
            if n.endswith(SOURCES):
                files.add(os.path.relpath(os.path.join(d, n), ROOT))
    bad, edges = [], {}
    for src in sorted(files):
        f_src = floor(src)
        with open(os.path.join(ROOT, src), errors="replace") as fh:
            for ln, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                dst = resolve(src, m.group(1), files)
                if dst is None:
                    continue
                f_dst = floor(dst)
                if f_src is not None and f_dst is not None and f_dst > f_src:
                    bad.append(f"{src}:{ln}: up: includes {dst} (floor {f_dst}, above its floor {f_src})")
                if src.startswith("oracles/") and dst.startswith("kernels/") and not SPEC.match(dst):
                    bad.append(f"{src}:{ln}: judge: the oracle includes {dst}, not a family's spec")
                if SPEC.match(src) and dst.startswith(("kernels/", "oracles/")) and not SPEC.match(dst):
                    bad.append(f"{src}:{ln}: spec: the spec includes {dst}, neither core nor a spec")
                if f_src == 0 and f_dst == 0 and module(src) != module(dst):
                    edges.setdefault(module(src), set()).add(module(dst))
    # cycles among the core's modules: each strongly connected component of more than one
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    for comp in comps:
        bad.append(f"{comp[0]}: cycle: {' <-> '.join(comp)} include each other")
    for line in bad:
        print(line)
    kinds = {k: sum(1 for b in bad if f": {k}:" in b) for k in ("up", "judge", "spec", "cycle")}
    print(f"check-layers: {len(files)} files; {kinds['up']} upward includes, {kinds['judge']} oracle includes of "
          f"an emulation, {kinds['spec']} spec includes of an emulation or oracle, {kinds['cycle']} cycles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
