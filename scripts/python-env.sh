#!/usr/bin/env bash
# The Python environment of precfuzz's kernel-protocol tests and examples: a virtual
# environment (.venv, or $PRECFUZZ_VENV) with numpy, ml_dtypes, jsonschema, pytest and Hypothesis, and
# precfuzz's own Python package (python/, installed editable: the checkout's code, its pytest
# plugin registered); with --torch PyTorch too.
#   scripts/python-env.sh            make it (or check it is there); prints its python
#   scripts/python-env.sh --torch    also PyTorch (tests labelled torch, examples/torch_*.py)
#   scripts/python-env.sh --frameworks   PyTorch, DeepSpeed 0.19.8 without its CUDA ops
#                                    (DS_BUILD_OPS=0: examples/deepspeed_loss_scaler.py) and
#                                    megatron-core 0.16.1 (examples/megatron_grad_scaler.py)
#   scripts/python-env.sh --check [--torch|--frameworks]   exit 0 if it is there, else 1
#
# PyTorch comes from PyPI. Its wheel's dependencies include several GB of NVIDIA libraries; on
# a machine with the CUDA toolkit's libraries on the loader's path (/usr/local/cuda/lib64 in
# ld.so.conf, as here) the wheel is installed without them and with the few small ones it
# cannot load without; if torch then does not import, the full dependency set is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${PRECFUZZ_VENV:-.venv}
TORCH_VERSION=2.15.0
DEEPSPEED_VERSION=0.19.8
MEGATRON_CORE_VERSION=0.16.1 # its dependencies (numpy, packaging, torch) are installed already
# DeepSpeed's own dependencies (pure Python) but torch, which is installed as above
DEEPSPEED_DEPS=(wheel einops hjson msgpack ninja packaging psutil py-cpuinfo "pydantic>=2.0.0" tqdm)
BASE=(numpy ml_dtypes jsonschema "pytest==9.2.0" "hypothesis==6.170.17" "pyyaml==6.0.3")
# jsonschema: tests/schemas.sh; pytest, hypothesis: tests/python; pyyaml: tests/ci_examples.py
# what torch 2.15's wheel needs besides the NVIDIA libraries the toolkit provides
TORCH_SMALL=(filelock typing_extensions sympy networkx jinja2 fsspec
  "nvidia-cufile==1.17.1.22.*" "nvidia-cusparselt-cu13==0.8.1" "nvidia-nvshmem-cu13==3.7.2" "nvidia-nccl-cu13==2.30.7")

torch=0 check=0 frameworks=0
for a in "$@"; do
  case "$a" in
    --torch) torch=1 ;;
    --frameworks) torch=1 frameworks=1 ;;
    --check) check=1 ;;
    *) echo "python-env.sh: unknown option '$a' (--torch, --frameworks, --check)" >&2; exit 2 ;;
  esac
done

py="$VENV/bin/python"
have() { [ -x "$py" ] && "$py" -c "$1" >/dev/null 2>&1; }
base_ok() { have "import numpy, ml_dtypes, jsonschema, pytest, hypothesis, yaml"; }
# the package, editable, from this checkout (a .venv moved with its checkout is made again)
package_ok() { have "import precfuzz, sys; sys.exit(precfuzz.__file__ != '$PWD/python/precfuzz/__init__.py')"; }
torch_ok() { have "import torch; torch.softmax(torch.ones(2, dtype=torch.float16), 0)"; }
deepspeed_ok() { have "import deepspeed.runtime.fp16.loss_scaler"; }
megatron_ok() { have "import megatron.core.optimizer.grad_scaler"; }

if [ $check = 1 ]; then
  base_ok && package_ok && { [ $torch = 0 ] || torch_ok; } && { [ $frameworks = 0 ] || { deepspeed_ok && megatron_ok; }; } && exit 0
  exit 1
fi

if ! base_ok; then
  if [ ! -x "$py" ]; then
    python3 -m venv "$VENV" || { echo "python-env.sh: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  fi
  "$py" -m pip install -q --disable-pip-version-check "${BASE[@]}" >&2
fi
if ! package_ok; then
  # setuptools and wheel from PyPI unless the environment has them (no build isolation then)
  iso=--no-build-isolation
  have "import setuptools, wheel, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 64)" || iso=
  "$py" -m pip install -q --disable-pip-version-check --no-deps $iso -e python >&2
  package_ok || { echo "python-env.sh: the precfuzz package (python/) does not import from $VENV" >&2; exit 1; }
fi
if [ $torch = 1 ] && ! torch_ok; then
  echo "python-env.sh: installing torch $TORCH_VERSION from PyPI into $VENV" >&2
  "$py" -m pip install -q --disable-pip-version-check --no-deps "torch==$TORCH_VERSION" >&2
  "$py" -m pip install -q --disable-pip-version-check "${TORCH_SMALL[@]}" >&2
  if ! torch_ok; then
    echo "python-env.sh: torch does not load with the system's CUDA libraries; installing its full dependencies" >&2
    "$py" -m pip install -q --disable-pip-version-check "torch==$TORCH_VERSION" >&2
  fi
  torch_ok || { echo "python-env.sh: torch $TORCH_VERSION does not import in $VENV" >&2; exit 1; }
fi
if [ $frameworks = 1 ] && ! deepspeed_ok; then
  echo "python-env.sh: installing deepspeed $DEEPSPEED_VERSION (DS_BUILD_OPS=0: no CUDA ops) into $VENV" >&2
  "$py" -m pip install -q --disable-pip-version-check "${DEEPSPEED_DEPS[@]}" >&2
  DS_BUILD_OPS=0 "$py" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
    "deepspeed==$DEEPSPEED_VERSION" >&2
  deepspeed_ok || { echo "python-env.sh: deepspeed $DEEPSPEED_VERSION does not import in $VENV" >&2; exit 1; }
fi
if [ $frameworks = 1 ] && ! megatron_ok; then
  echo "python-env.sh: installing megatron-core $MEGATRON_CORE_VERSION into $VENV" >&2
  "$py" -m pip install -q --disable-pip-version-check --no-deps "megatron-core==$MEGATRON_CORE_VERSION" >&2
  megatron_ok || { echo "python-env.sh: megatron-core $MEGATRON_CORE_VERSION does not import in $VENV" >&2; exit 1; }
fi
echo "$py"
