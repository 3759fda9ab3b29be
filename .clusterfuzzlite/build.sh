#!/bin/bash -eu
# Builds precfuzz's fuzz drivers the way OSS-Fuzz and ClusterFuzzLite do: with their $CC, $CFLAGS
# (sanitizers, coverage) and $LIB_FUZZING_ENGINE, the libraries linked statically where their
# archives exist; every driver goes to $OUT with its seed corpus (<driver>_seed_corpus.zip), its
# .options and its dictionary.
# Locally: SRC=$PWD/.. OUT=/tmp/out CC=clang CFLAGS='-fsanitize=address,fuzzer-no-link'
#          LIB_FUZZING_ENGINE=-fsanitize=fuzzer .clusterfuzzlite/build.sh
src=$SRC/precfuzz
[ -d "$src" ] || src=$(cd "$(dirname "$0")/.." && pwd)
build=${WORK:-/tmp}/precfuzz-cflite
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPF_ENABLE_FUZZING=ON -DPF_FUZZ_OWN_FLAGS=OFF \
  -DPF_LIB_FUZZING_ENGINE="$LIB_FUZZING_ENGINE" -DPF_STATIC_DEPS=ON
# the operations' drivers (kernels/<op>/<op>_fuzzer.c) and the parsers' (fuzz/)
drivers=$(cd "$src" && ls kernels/*/*_fuzzer.c fuzz/*_fuzzer.c | sed 's|.*/||; s/\.c$//')
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $drivers
for d in $drivers; do
  cp "$build/bin/$d" "$OUT/"
  if [ -d "$src/corpora/$d" ]; then
    python3 - "$src/corpora/$d" "$OUT/${d}_seed_corpus.zip" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as z:
    for f in sorted(os.listdir(sys.argv[1])):
        z.write(os.path.join(sys.argv[1], f), f)
PY
  fi
  for extra in "$src/corpora/$d.options" "$src/corpora/$d.dict"; do
    if [ -f "$extra" ]; then cp "$extra" "$OUT/"; fi
  done
done
