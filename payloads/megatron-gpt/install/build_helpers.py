"""Build Megatron-LM's C++ data helper (megatron/data/helpers.cpp) at bake time, and call it once.

Usage: build_helpers.py TREE   (the baked, ported Megatron-LM tree; run with the image's Python)

Why at bake time: pretrain_gpt.py builds the helper on rank 0 with `make -C megatron/data` unless
the module is there and newer than its source. In a read-only image (a SIF run by `apptainer
run`) that make cannot write, and every run would stop with "Making C++ dataset helpers module
failed". Built here, the run's make finds it up to date.

Why it is called: on the lent H100 of 2026-11-27 a helper built by a GCC 13 that linked libstdc++
into it statically (that machine's CXX=/opt/gcc/bin/g++ finds only libstdc++.a; -static-libstdc++
does the same) died with SIGSEGV at the first number it printed through std::cout, inside a
Python that had loaded torch and with it the shared libstdc++. GCC 13 initialises the standard
streams inside libstdc++ itself, and the copy linked into the helper never was. So the build is
called as pretrain_gpt.py calls it (torch imported first, in a fresh Python), and the compilers
are tried in turn: $CXX (make's default, g++, when unset), then g++ and /usr/bin/g++ where they
are other programs. The first whose helper answers is kept; when none does, exit 1 naming each
one's failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

# The call pretrain_gpt.py's _build_index_mappings makes, on 200 documents of 24 tokens a round.
CHECK = """
try:
    import torch  # first, as in pretrain_gpt.py: the process's libstdc++ is then torch's
except ImportError:
    pass
import numpy as np
import helpers
sizes = np.array([5, 7, 3, 9] * 50, dtype=np.int32)
index = helpers.build_sample_idx(sizes, np.arange(200, dtype=np.int32), 8, 1, int(sizes.sum()))
assert index.shape == (150, 2), index.shape
"""


def compilers() -> list[str]:
    """$CXX (or make's default, g++), then g++ and /usr/bin/g++ where they are other programs."""
    found, seen = [], set()
    for name in (os.environ.get("CXX") or "g++", "g++", "/usr/bin/g++"):
        path = shutil.which(name)
        if path and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            found.append(name)
    return found


def describe(code: int) -> str:
    if code < 0:
        try:
            return f"died with {signal.Signals(-code).name}"
        except ValueError:
            return f"died with signal {-code}"
    return f"exited {code}"


def tail(text: str) -> str:
    return " | ".join(text.strip().splitlines()[-3:])


def build_with(data: Path, cxx: str) -> str | None:
    """Build the helper in DATA with CXX and call it: None when it answers, else why not."""
    for old in data.glob("helpers*.so"):
        old.unlink()
    # the Makefile asks `python3` for pybind11's includes and the module suffix: this Python's
    env = dict(os.environ, CXX=cxx, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    made = subprocess.run(["make", "-C", str(data)], env=env, capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return f"make {describe(made.returncode)}: {tail(made.stdout + made.stderr)}"
    called = subprocess.run([sys.executable, "-c", CHECK], cwd=data, capture_output=True, text=True, check=False,
                            timeout=300)
    if called.returncode != 0:
        said = tail(called.stderr)
        return f"its helper {describe(called.returncode)} on a test call" + (f": {said}" if said else "")
    return None


def build(tree: Path, candidates: list[str]) -> tuple[str | None, list[str]]:
    """(the compiler kept or None, one line per compiler that failed)."""
    data = tree / "megatron" / "data"
    failed = []
    for cxx in candidates:
        why = build_with(data, cxx)
        if why is None:
            return cxx, failed
        failed.append(f"{cxx}: {why}")
    for old in data.glob("helpers*.so"):  # never leave a helper that crashes for the run to find
        old.unlink()
    return None, failed


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: build_helpers.py TREE", file=sys.stderr)
        return 2
    candidates = compilers()
    kept, failed = build(Path(argv[0]), candidates)
    for line in failed:
        print(f"build_helpers.py: {line}", file=sys.stderr)
    if kept is None:
        print("build_helpers.py: no C++ compiler built a Megatron-LM data helper that answers (tried: "
              f"{', '.join(candidates) or 'none found: install g++'}); set CXX to a g++ that links libstdc++ "
              "as a shared library", file=sys.stderr)
        return 1
    print(f"build_helpers.py: megatron/data helper built with {kept} and called once: it answers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
