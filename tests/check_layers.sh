#!/bin/bash
# scripts/check-layers.py on small trees made here: a clean one passes; an upward include, an
# oracle taking an emulation's header and a cycle of core modules are each named with their
# file and line, and fail it; a family's spec is what an oracle may include.
# usage: tests/check_layers.sh
C="$(cd "$(dirname "$0")/.." && pwd)/scripts/check-layers.py"
. "$(dirname "$0")/check.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mk() { mkdir -p "$(dirname "$T/$1")" && printf '%s\n' "${@:2}" >"$T/$1"; }
mk harness/case.h '#include "harness/status.h"'
mk harness/status.h '/* nothing */'
mk harness/case.c '#include "harness/case.h"' '#include <stdio.h>'
mk kernels/adam/adam_spec.h '#include "harness/case.h"'
mk kernels/adam/adam_cpu.c '#include "kernels/adam/adam_spec.h"'
mk oracles/adam_mpfr.c '#include "kernels/adam/adam_spec.h"' '#include "harness/case.h"'
mk harness/cli/main.c '#include "kernels/adam/adam_spec.h"' '#include "oracles/adam_mpfr.c"'
n=$((n + 1))
out=$(python3 "$C" "$T"); [ $? -eq 0 ] && echo "$out" | grep -q "0 upward includes, 0 oracle includes of an emulation, 0 cycles" || fail "clean tree: $out"
mk harness/runner.c '#include "harness/case.h"' '#include "kernels/kernel.h"'
mk kernels/kernel.h '#include "harness/status.h"'
mk oracles/adam_fast.c '#include "kernels/adam/adam_math.h"'
mk kernels/adam/adam_math.h '/* the emulation'"'"'s arithmetic */'
mk harness/tensor.h '#include "harness/case.h"'
mk harness/case.c '#include "harness/case.h"' '#include "harness/tensor.h"'
mk harness/tensor.c '#include "harness/tensor.h"' '#include "harness/case.h"'
mk harness/case.h '#include "harness/status.h"' '#include "harness/tensor.h"'
n=$((n + 1))
out=$(python3 "$C" "$T"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -qx "harness/runner.c:2: up: includes kernels/kernel.h (floor 1, above its floor 0)" &&
  echo "$out" | grep -qx "oracles/adam_fast.c:1: judge: the oracle includes kernels/adam/adam_math.h, not a family's spec" &&
  echo "$out" | grep -qx "harness/case: cycle: harness/case <-> harness/tensor include each other" &&
  echo "$out" | grep -q "1 upward includes, 1 oracle includes of an emulation, 1 cycles" || fail "broken tree (exit $rc): $out"
echo "check_layers: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
