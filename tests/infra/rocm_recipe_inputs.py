#!/usr/bin/env python3
"""The ROCm recipe's inputs as one digest, and whether the recipe was proven on them.

Usage: rocm_recipe_inputs.py [--write]

The ROCm recipe (tests/infra/rocm-recipe.sh: Open MPI, PMIx and libfabric compiled from source on
the trixie stand-in) takes about 13 minutes from a cold Docker cache on the 2-core CI machine, on
top of the CUDA recipe's 16: together they do not fit CI's 60 minutes cold. So CI runs
tests/integration/test_rocm_recipe.py only when its inputs changed since the recipe was last
proven: `make rocm-recipe` builds the image, runs those tests and, when they pass, writes the
digest of the files below to tests/infra/rocm-recipe.proven (committed with them). CI compares
and says which it did (tests/conftest.py). --write records the current digest; without it this
prints the digest and whether it is the proven one.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STAMP = REPO / "tests/infra/rocm-recipe.proven"
# Everything the build and its tests read: the stand-in, the scripts, what the image is rendered
# from, the payloads it bakes, and the tests themselves.
INPUTS = ("tests/infra/base-rocm", "tests/infra/base-rocm.sh", "tests/infra/rocm-recipe.sh", "tests/infra/sources.py",
          "tests/infra/docker-up.sh", "tests/infra/mirror/github/ROCm", "tests/infra/mirror/github/aws", "dockerfiles",
          "entrypoints", "payloads/_runner", "payloads/sanity", "payloads/mpi-allreduce", "payloads/rccl-tests",
          "launcher/hpcai/image", "launcher/hpcai/cli/build.py", "tests/integration/test_rocm_recipe.py",
          "tests/imagebuild.py")


def files() -> list[Path]:
    out = []
    for entry in INPUTS:
        path = REPO / entry
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        out += [p for p in found if "__pycache__" not in p.parts]
    return out


def digest() -> str:
    h = hashlib.sha256()
    for path in files():
        h.update(path.relative_to(REPO).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def proven() -> bool:
    return STAMP.is_file() and STAMP.read_text().split()[:1] == [digest()]


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        STAMP.write_text(digest() + "\n")
        print(f"rocm-recipe: proven on inputs {digest()[:12]} ({STAMP.relative_to(REPO)})")
    elif sys.argv[1:]:
        sys.exit("usage: rocm_recipe_inputs.py [--write]")
    else:
        print(digest(), "proven" if proven() else "not proven")
