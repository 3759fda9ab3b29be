"""pip install ./python: also records the checkout's build directory (build/bin) in
precfuzz/_checkout_paths.py, so that the installed package finds the executables built there
(precfuzz.binary(); $PRECFUZZ_BIN and an installed precfuzz come first)."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPy(build_py):
    def run(self):
        super().run()
        bindir = os.path.join(os.path.dirname(HERE), "build", "bin")
        target = os.path.join(self.build_lib, "precfuzz", "_checkout_paths.py")
        with open(target, "w") as f:
            f.write(f'"""Written by pip install from a checkout."""\nBINDIR = {bindir!r}\n')


setup(cmdclass={"build_py": BuildPy})
