#!/usr/bin/env bash
# cmake --install: the commands, the CUDA module where it was built, the plugin headers, the
# pkg-config file and the man pages land under the prefix; the example plugin builds outside
# the tree against the installed pkg-config file alone and runs under the installed precfuzz,
# whose replay lines name it by its installed path.
# usage: install.sh BUILD_DIR SOURCE_DIR
B=$1
S=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
ok() { n=$((n + 1)); }

cmake --install "$B" --prefix "$T/p" >"$T/log" 2>&1 || { cat "$T/log"; echo "FAIL: cmake --install"; exit 1; }
for f in bin/precfuzz bin/precision-report share/pkgconfig/precfuzz.pc share/man/man1/precfuzz.1 \
  share/man/man1/precision-report.1 include/precfuzz/core/kernel.h include/precfuzz/core/plugin.h \
  include/precfuzz/kernels/softmax/softmax_math.h include/precfuzz/kernels/adam/adam_math.h \
  share/precfuzz/schemas/case.schema.json share/precfuzz/schemas/run.schema.json; do
  [ -f "$T/p/$f" ] && ok || fail "not installed: $f"
done
if [ -f "$B/lib/precfuzz-cuda.so" ]; then
  [ -f "$T/p/lib/precfuzz-cuda.so" ] && ok || fail "the CUDA module was built but not installed in lib/"
fi
# every installed header compiles on its own (it includes what it needs from the installed tree)
export PKG_CONFIG_PATH="$T/p/share/pkgconfig"
cflags=$(pkg-config --cflags precfuzz) && ok || fail "pkg-config --cflags precfuzz"
for h in $(cd "$T/p/include/precfuzz" && find . -name '*.h' | sort); do
  printf '#include "%s"\n' "${h#./}" >"$T/h.c"
  cc $cflags -std=c11 -fsyntax-only "$T/h.c" 2>"$T/err" && ok || fail "installed header $h alone: $(head -3 "$T/err")"
done
# the example plugin, built from a copy outside the source tree
mkdir "$T/plugin" && cp "$S/examples/softmax_fast_exp/softmax_fast_exp.c" "$T/plugin/"
(cd "$T/plugin" && cc $cflags -std=c11 -O2 -shared -fPIC -o fast_exp.so softmax_fast_exp.c) 2>"$T/err" && ok ||
  fail "building the example plugin with pkg-config: $(head -3 "$T/err")"
"$T/p/bin/precfuzz" --kernels "$T/plugin/fast_exp.so" run -k softmax -v fast-exp -t fp32 --cases 2 >"$T/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q '^FINDING softmax/fast-exp' "$T/out" && ok || fail "the installed precfuzz with the plugin (exit $rc): $(head -3 "$T/out")"
line=$(grep -m1 -o 'reproduce with: .*' "$T/out" | sed 's/^reproduce with: //')
case "$line" in
"$T/p/bin/precfuzz --kernels $T/plugin/fast_exp.so run "*) ok ;;
*) fail "the replay line does not name the installed precfuzz and the plugin: $line" ;;
esac
# the Python package: importable from the prefix's site-packages, finds the installed precfuzz
# (not the checkout's), and pytest finds its plugin through the entry point
py="$(cd "$S" && pwd)/.venv/bin/python"
site=$(cd "$T/p" && ls -d lib/python3*/site-packages 2>/dev/null | head -1)
if [ -z "$site" ]; then
  fail "the Python package was not installed under lib/python3*/site-packages"
elif [ ! -x "$py" ] || ! "$py" -c "import numpy" 2>/dev/null; then
  echo "install: the Python package's import not checked (no $py with numpy: scripts/python-env.sh)"
else
  got=$(cd / && PYTHONPATH="$T/p/$site" PRECFUZZ_BIN= "$py" -c "import precfuzz; print(precfuzz.binary())" 2>&1)
  [ "$got" = "$T/p/bin/precfuzz" ] && ok || fail "the installed package finds $got, not $T/p/bin/precfuzz"
  got=$(cd / && PYTHONPATH="$T/p/$site" "$py" -c "import importlib.metadata as m; print([e.value for e in m.entry_points(group='pytest11') if e.name == 'precfuzz'])" 2>&1)
  [ "$got" = "['precfuzz.pytest_plugin']" ] && ok || fail "the installed pytest plugin's entry point: $got"
fi
# the man pages render without a warning
for m in precfuzz precision-report; do
  out=$(groff -man -ww -z "$T/p/share/man/man1/$m.1" 2>&1) && [ -z "$out" ] && ok || fail "man page $m.1: $out"
done

echo "install: $n checks passed, $failed failed"
[ $failed -eq 0 ]
