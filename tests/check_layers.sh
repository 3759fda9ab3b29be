#!/bin/bash
# scripts/check-layers.py on small trees made here: a clean one passes; an upward include, an
# oracle taking an emulation's header, a spec taking one, and a cycle of core modules are each
# named with their file and line, and fail it; a family's spec is what an oracle may include.
# usage: tests/check_layers.sh
C="$(cd "$(dirname "$0")/.." && pwd)/scripts/check-layers.py"
. "$(dirname "$0")/check.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mk() { mkdir -p "$(dirname "$T/$1")" && printf '%s\n' "${@:2}" >"$T/$1"; }
mk core/case.h '#include "core/status.h"'
mk core/status.h '/* nothing */'
mk core/case.c '#include "core/case.h"' '#include <stdio.h>'
mk kernels/adam/adam_spec.h '#include "core/case.h"'
mk kernels/adam/adam_cpu.c '#include "kernels/adam/adam_spec.h"'
mk oracles/adam_mpfr.c '#include "kernels/adam/adam_spec.h"' '#include "core/case.h"'
mk cli/main.c '#include "kernels/adam/adam_spec.h"' '#include "oracles/adam_mpfr.c"'
n=$((n + 1))
out=$(python3 "$C" "$T"); [ $? -eq 0 ] && echo "$out" | grep -q "0 upward includes, 0 oracle includes of an emulation, 0 spec includes of an emulation or oracle, 0 cycles" || fail "clean tree: $out"
mk core/runner.c '#include "core/case.h"' '#include "kernels/adam/adam_spec.h"'
mk oracles/adam_fast.c '#include "kernels/adam/adam_math.h"'
mk kernels/adam/adam_math.h '/* the emulation'"'"'s arithmetic */'
mk kernels/clip/clip_spec.h '#include "core/case.h"' '#include "kernels/adam/adam_spec.h"' '#include "kernels/adam/adam_math.h"'
mk core/tensor.h '#include "core/case.h"'
mk core/case.c '#include "core/case.h"' '#include "core/tensor.h"'
mk core/tensor.c '#include "core/tensor.h"' '#include "core/case.h"'
mk core/case.h '#include "core/status.h"' '#include "core/tensor.h"'
n=$((n + 1))
out=$(python3 "$C" "$T"); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -qx "core/runner.c:2: up: includes kernels/adam/adam_spec.h (floor 1, above its floor 0)" &&
  echo "$out" | grep -qx "kernels/clip/clip_spec.h:3: spec: the spec includes kernels/adam/adam_math.h, neither core nor a spec" &&
  echo "$out" | grep -qx "oracles/adam_fast.c:1: judge: the oracle includes kernels/adam/adam_math.h, not a family's spec" &&
  echo "$out" | grep -qx "core/case: cycle: core/case <-> core/tensor include each other" &&
  echo "$out" | grep -q "1 upward includes, 1 oracle includes of an emulation, 1 spec includes of an emulation or oracle, 1 cycles" || fail "broken tree (exit $rc): $out"
echo "check_layers: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
