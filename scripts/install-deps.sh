#!/usr/bin/env bash
# Installs the Debian packages precfuzz needs to build and test.
#   scripts/install-deps.sh          install what is missing (needs root)
#   scripts/install-deps.sh --check  exit 0 if everything is there, else print the apt-get line, exit 1
#   scripts/install-deps.sh --chromium [--check]
#                                    headless Chromium only (scripts/report-screenshot.sh)
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config make
  libmpfr-dev libgmp-dev        # the oracle
  libcjson-dev                  # case files and --json
  nettle-dev                    # SHA-256 of tensor files
  libcmocka-dev                 # unit tests
  clang libclang-rt-14-dev      # libFuzzer, ASan, UBSan for the fuzz drivers
  python3 python3-mpmath        # independent check of the oracle's values
  python3-venv                  # scripts/python-env.sh: numpy (and PyTorch) for kernel processes
  time                          # tests/report.sh: a run's peak memory (/usr/bin/time)
  groff-base                    # tests/install.sh: the man pages render without a warning
)
if [ "${1:-}" = "--chromium" ]; then
  PACKAGES=(chromium)
  shift
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "${1:-}" = "--check" ]; then
  echo "precfuzz: missing packages; run as root: apt-get update && $line" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "precfuzz: missing packages and not root; run: sudo apt-get update && sudo $line" >&2
  exit 1
fi
echo "precfuzz: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$line
