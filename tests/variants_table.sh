#!/bin/bash
# docs/variants.md is what scripts/variants-table.py writes from this build's registry: a family,
# variant or fault added without regenerating the page fails here. The page's CUDA column is a
# CUDA build's: skipped (77) in a build without the CUDA module.
# usage: tests/variants_table.sh PRECFUZZ
P=$(realpath "$1")
cd "$(dirname "$0")/.." || exit 1
[ -f "$(dirname "$P")/../lib/precfuzz-cuda.so" ] ||
  { echo "skipped: built without CUDA (the page lists the CUDA implementations of a CUDA build)"; exit 77; }
T=$(mktemp)
trap 'rm -f "$T"' EXIT
python3 scripts/variants-table.py "$P" "$T" || { echo "FAIL: scripts/variants-table.py"; exit 1; }
if ! cmp -s "$T" docs/variants.md; then
  diff docs/variants.md "$T" | head -20
  echo "FAIL: docs/variants.md is not the registry's (scripts/variants-table.py $1 docs/variants.md writes it)"
  exit 1
fi
# a PRECFUZZ that cannot run: one line naming it, exit 2 (it was a traceback)
out=$(python3 scripts/variants-table.py "$T.none" 2>&1)
[ $? -eq 2 ] && [ "$out" = "variants-table.py: $T.none: No such file or directory" ] ||
  { echo "FAIL: variants-table.py with a missing PRECFUZZ: $out"; exit 1; }
echo "variants_table: docs/variants.md is current ($(tail -1 docs/variants.md))"
