"""The package's tests run on the checkout's python/ (installed editable by
scripts/python-env.sh, or put on the path here) against the checkout's build (PRECFUZZ_BIN,
set by ctest, or build/bin)."""

import importlib.metadata
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

pytest_plugins = ["pytester"]
if not any(e.name == "precfuzz" for e in importlib.metadata.entry_points(group="pytest11")):
    pytest_plugins.append("precfuzz.pytest_plugin")
