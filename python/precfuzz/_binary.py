"""Where the precfuzz executable is, and running it."""

import os
import shutil
import subprocess
from pathlib import Path


class PrecfuzzError(Exception):
    """precfuzz refused what it was asked (its exit status 2, with its one line), or could not
    be found or run."""


class PrecfuzzNotFound(PrecfuzzError):
    pass


def _candidates():
    env = os.environ.get("PRECFUZZ_BIN")
    if env:
        yield "PRECFUZZ_BIN", env
        return
    try:  # written by cmake --install beside the package
        from precfuzz import _install_paths

        yield "the installation", os.path.join(_install_paths.BINDIR, "precfuzz")
    except ImportError:
        pass
    try:  # written by pip install from a checkout: that checkout's build
        from precfuzz import _checkout_paths

        yield "the checkout it was installed from", os.path.join(_checkout_paths.BINDIR, "precfuzz")
    except ImportError:
        pass
    here = Path(__file__).resolve().parent  # run from a checkout's python/ directory
    yield "this checkout", str(here.parent.parent / "build" / "bin" / "precfuzz")
    found = shutil.which("precfuzz")
    if found:
        yield "PATH", found


def binary():
    """The absolute path of the precfuzz executable: $PRECFUZZ_BIN if set (and nothing else),
    else the one cmake --install put beside this package, the build of the checkout it came
    from (build/bin/precfuzz), or precfuzz on PATH."""
    tried = []
    for where, path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
        tried.append(f"{path} ({where})")
        if where == "PRECFUZZ_BIN":
            raise PrecfuzzNotFound(f"PRECFUZZ_BIN={path}: not an executable file")
    raise PrecfuzzNotFound(
        "precfuzz executable not found (build it with `make all` in the checkout, install it with "
        "cmake --install, or set PRECFUZZ_BIN); tried: " + "; ".join(tried)
    )


def run(args, kernels=(), env=None, cwd=None, check_status=(0, 1)):
    """precfuzz [--kernels K]... ARGS; returns the CompletedProcess (text). An exit status not in
    check_status raises PrecfuzzError with precfuzz's own line (exit 2: what it refused)."""
    cmd = [binary()]
    for k in kernels:
        cmd += ["--kernels", k]
    cmd += [str(a) for a in args]
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=cwd)
    if p.returncode not in check_status:
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        why = lines[-1] if lines else f"exit status {p.returncode}"
        why = why[len("precfuzz: "):] if why.startswith("precfuzz: ") else why
        raise PrecfuzzError(f"precfuzz {' '.join(str(a) for a in args[:1])}: {why}")
    return p
