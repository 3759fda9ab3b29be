#!/bin/bash
# The framework-kernel targets the examples declare (scripts/targets.py): every line parses, and
# each target registers exactly the variants its line says (PyTorch's; DeepSpeed's and
# Megatron's where installed). A malformed line is refused with its file named (exit 2).
# usage: tests/targets.sh PRECFUZZ PYTHON
P=$(realpath "$1")
PY=$2
. "$(dirname "$0")/check.sh"
need_python "torch, numpy" "scripts/python-env.sh --torch installs it"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=$((n + 1))
python3 scripts/targets.py >"$T/list" && [ "$(grep -c . "$T/list")" -ge 9 ] || fail "scripts/targets.py: $(cat "$T/list")"
needs=(--needs torch)
"$PY" -c "import deepspeed, megatron.core" >/dev/null 2>&1 && needs+=(--needs frameworks)
n=$((n + 1))
out=$(python3 scripts/targets.py --check "$P" "$PY" "${needs[@]}" 2>&1) || fail "$out"
echo "$out" | tail -1
# a malformed line: a copy of the examples with one line broken
mkdir -p "$T/r/examples" "$T/r/scripts" && cp scripts/targets.py "$T/r/scripts/"
printf '"""x"""\n# precfuzz-target: kernel=softmax start=exec needs=torch cases=0 variants=a\n' >"$T/r/examples/bad.py"
n=$((n + 1))
out=$(python3 "$T/r/scripts/targets.py" 2>&1)
[ $? -eq 2 ] && [ "$out" = "targets: examples/bad.py: cases=0: a positive integer" ] || fail "malformed line: $out"
# a PRECFUZZ that is not there: one line, exit 2, not a traceback
n=$((n + 1))
out=$(python3 scripts/targets.py --check "$T/no-precfuzz" "$PY" 2>&1)
[ $? -eq 2 ] && [ "$out" = "targets: --check PRECFUZZ: $T/no-precfuzz is not an executable file" ] || fail "missing PRECFUZZ: $out"
echo "targets: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
