#!/usr/bin/env bash
# The one command a GPU machine runs: build with CUDA (sm_80 and sm_90), run the tests
# labelled gpu, compare the CPU emulation with the GPU (precfuzz diff-backend: bitwise-equal
# fraction, largest ulp difference, findings per variant), fuzz each driver on the CUDA backend
# (PF_FUZZ_BACKEND=cuda; a gcc build has no libFuzzer, so each replays its corpus and then
# mutates blindly for PF_GPU_FUZZ_SECONDS, default 20, with the standalone main), run
# PyTorch's own CUDA kernels through the kernel protocol (examples/torch_*.py: SDPA's flash
# attention and its backward, fused AdamW, F.cross_entropy judged by logsoftmax's contract,
# ...), the rest of the suite but the exhaustive tests, print a summary, and write the full
# log to build-gpu/gpu-check.log. Without a usable device it stops after the build with one line
# (exit 1); a gpu test skipped although the device answered counts as a failure.
#
# A machine without Debian's -dev packages (the lent GPU machines have no package registry)
# can bring them as .deb files in .gpudeps/ (apt-get download libmpfr-dev libmpfr6
# libgmp-dev libgmp10 libgmpxx4ldbl libcjson-dev libcjson1 libcmocka-dev libcmocka0):
# they are unpacked under /tmp/pf-deps and used through pkg-config's sysroot.
# To spend no GPU-machine time compiling, build the folder elsewhere (same paths, same nvcc,
# an older glibc) and set PF_GPU_PREBUILT=1: the build step is skipped and only the runtime
# libraries (libmpfr6 libgmp10 libcjson1 libcmocka0 libnettle8) need to come in .gpudeps/.
# PF_GPU_PARTS picks and orders the checks (default: "tests diff torch drivers report rest"),
# PF_GPU_TORCH_KERNELS limits the PyTorch rows to those kernels, PF_GPU_TEST_TIMEOUT (s) each gpu test.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${PF_GPU_BUILD:-build-gpu}
mkdir -p "$B"
LOG=$B/gpu-check.log
exec > >(tee "$LOG") 2>&1

if [ -d .gpudeps ] && ls .gpudeps/*.deb >/dev/null 2>&1; then
  R=/tmp/pf-deps
  mkdir -p $R
  for f in .gpudeps/*.deb; do dpkg-deb -x "$f" $R 2>/dev/null || dpkg -x "$f" $R; done
  export PKG_CONFIG_SYSROOT_DIR=$R PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
  export PKG_CONFIG_PATH=$R/usr/lib/x86_64-linux-gnu/pkgconfig:$R/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CPATH=$R/usr/include:$R/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}
  export LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
  echo "gpu-check: using the libraries unpacked from .gpudeps/ under $R"
fi

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi failed"
nvcc --version | tail -2
if [ "${PF_GPU_PREBUILT:-0}" = 1 ]; then
  echo "== build: prebuilt ($B)"
  [ -x "$B/bin/precfuzz" ] || { echo "gpu-check: PF_GPU_PREBUILT=1 but $B/bin/precfuzz is missing"; exit 1; }
else
  echo "== build"
  cmake -S . -B "$B" -DPF_ENABLE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$B/configure.log" 2>&1 || { cat "$B/configure.log"; exit 1; }
  grep "precfuzz:" "$B/configure.log"
  cmake --build "$B" -j "$(nproc)" >"$B/build.log" 2>&1 || { tail -40 "$B/build.log"; exit 1; }
fi
# Without a usable device every check below would only say so: stop here with that line.
# (exit 2 is "cannot run"; a finding, exit 1, is for the checks below to report)
"$B/bin/precfuzz" run -k softmax -v safe --cases 1 --backend cuda >"$B/device.log" 2>&1
if [ $? -eq 2 ]; then
  echo "gpu-check: no usable CUDA device: $(tail -1 "$B/device.log")"
  exit 1
fi
# Each check sets its NAME_rc; one that PF_GPU_PARTS leaves out reads "not run" in the summary.
check_tests() {
  echo "== gpu tests"
  (cd "$B" && ctest -L gpu -V --output-on-failure --timeout "${PF_GPU_TEST_TIMEOUT:-600}") | grep -vE '^[0-9]+: (Test command|Working Directory|Environment)' |
    tee "$B/gpu-tests.log"
  tests_rc=${PIPESTATUS[0]}
  # a gpu test skipped on a machine with a device is a failure here, not a pass
  if grep -q '\*\*\*Skipped' "$B/gpu-tests.log"; then
    echo "gpu-check: gpu tests were skipped although a device answered"
    tests_rc=1
  fi
}
check_diff() {
  echo "== CPU emulation against the GPU (precfuzz diff-backend, every variant with a CUDA implementation)"
  "$B/bin/precfuzz" diff-backend --cases 20 --seed 1
  diff_rc=$?
}
# Each driver replays its corpus and then fuzzes by blind mutation (the gcc build's standalone
# main: libFuzzer's flags, no coverage feedback) for PF_GPU_FUZZ_SECONDS on the GPU backend.
check_drivers() {
  local fs=${PF_GPU_FUZZ_SECONDS:-20}
  echo "== the fuzz drivers on the CUDA backend: corpus, then ${fs} s of mutation each (inputs/s; per judged case, in"
  echo "   microseconds: all, kernel = copies + launches + synchronisation, oracle: launch-bound where kernel ~ all)"
  scripts/fuzz-drivers.sh "$B/bin" "$B/fuzz-cuda" "$fs" cuda
  drivers_rc=$?
}
check_report() {
  echo "== the precision report on the GPU (precision-report --backend cuda)"
  # the markdown goes to a file first: head closing the pipe early would fail the writer
  "$B/bin/precision-report" --backend cuda -o "$B/precision-report-cuda.html" --save-results "$B/results-cuda.json" &&
    "$B/bin/precision-report" -i "$B/results-cuda.json" --format md -o "$B/precision-report-cuda.md"
  report_rc=$?
  [ -f "$B/precision-report-cuda.md" ] && head -60 "$B/precision-report-cuda.md"
}
# PF_GPU_TORCH_KERNELS limits the rows to those kernels (default: all).
check_torch() {
  echo "== PyTorch's CUDA kernels (examples/torch_*.py, PRECFUZZ_DEVICE=cuda): cases, verdicts, agreement with the emulation"
  # the project's .venv where it has torch, else the machine's python3 (the lent machines have one)
  local py tpy="" row t
  for py in "${PRECFUZZ_VENV:-.venv}/bin/python" python3; do
    if "$py" -c "import torch, numpy; assert torch.cuda.is_available()" >/dev/null 2>&1; then tpy=$py; break; fi
  done
  torch_rc=0
  if [ -z "$tpy" ]; then
    echo "no python with torch and a CUDA device: PyTorch's kernels not checked"
    return
  fi
  "$tpy" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())"
  # every variant of the PyTorch kernel processes the examples declare (scripts/targets.py)
  local rows
  mapfile -t rows < <(python3 scripts/targets.py --needs torch --variants)
  for row in "${rows[@]}"; do
    set -- $row
    if [ -n "${PF_GPU_TORCH_KERNELS:-}" ] && ! [[ " $PF_GPU_TORCH_KERNELS " == *" $1 "* ]]; then continue; fi
    for t in fp32 fp16 bf16; do
      PRECFUZZ_DEVICE=cuda "$B/bin/precfuzz" --kernels "exec:$tpy examples/$3.py" run -k $1 -v $2 -t $t --cases $4 --max-print 2 2>&1 |
        grep -E "^FINDING|^  reproduce|cases \(seeds|^  findings"
      [ "${PIPESTATUS[0]}" = 2 ] && torch_rc=1
    done
    PRECFUZZ_DEVICE=cuda "$B/bin/precfuzz" --kernels "exec:$tpy examples/$3.py" diff-variant -k $1 -v $2 --cases 20 || true
  done
}
check_rest() {
  echo "== the rest of the suite (not exhaustive, not gpu) on this machine"
  (cd "$B" && ctest -LE 'exhaustive|gpu' --output-on-failure -j "$(nproc)") | tail -20
  rest_rc=${PIPESTATUS[0]}
}
PARTS=${PF_GPU_PARTS:-tests diff torch drivers report rest}
for part in $PARTS; do
  case $part in
    tests|diff|drivers|report|torch|rest) "check_$part" ;;
    *) echo "gpu-check: PF_GPU_PARTS: unknown part '$part' (tests diff torch drivers report rest)"; exit 2 ;;
  esac
done
said() { local v=${1}_rc; if [ -z "${!v:-}" ]; then echo "not run"; elif [ "${!v}" = 0 ]; then echo "$2"; else echo FAILED; fi; }
echo "== summary: gpu tests $(said tests passed), diff-backend $(said diff passed), drivers on cuda $(said drivers passed), report $(said report written), torch on cuda $(said torch ran), other tests $(said rest passed); log $LOG"
for part in $PARTS; do v=${part}_rc; [ "${!v}" = 0 ] || exit 1; done
