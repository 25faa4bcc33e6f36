"""tests/infra/sources.py and tests/infra/mirror/: the pinned sources the GPU-recipe build takes
from the GitHub mirror copies are the bytes components.toml pins (run for real on the copies)."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "tests" / "infra"


def _sources():
    spec = importlib.util.spec_from_file_location("hpcai_infra_sources", INFRA / "sources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recipe_sets() -> list[str]:
    """The COMPONENT=VERSION words gpu-recipe.sh selects (both MPI configurations)."""
    text = (INFRA / "gpu-recipe.sh").read_text()
    return sorted(set(re.findall(r"\b([a-z][a-z-]*=[0-9][0-9A-Za-z.+-]*)", text)))


def test_the_mirror_matches_its_sha256sums():
    res = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=INFRA / "mirror",
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_mirror_source_of_the_recipe_is_the_pinned_file(tmp_path):
    sources = _sources()
    from_mirror = []
    for selection in recipe_sets():
        url, sha = sources.pinned(selection)
        if url.startswith("debian:"):
            continue  # fetched from Debian's archive at build time; pinned by its .dsc sha256
        sources.main([str(tmp_path), selection])  # copies from the mirror and checks the sha256
        name = url.partition("#")[2] or url.rsplit("/", 1)[-1]
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == sha
        from_mirror.append(selection.partition("=")[0])
    assert {"aws-ofi-nccl", "nccl-tests", "libcxi", "cassini-headers", "cxi-driver"} <= set(from_mirror)


def test_an_unpinned_version_is_refused_naming_the_pinned_ones(tmp_path):
    with pytest.raises(SystemExit, match=r"libfabric 9\.9\.9 is not pinned in components\.toml; pinned: 2\.5\.1, "):
        _sources().main([str(tmp_path), "libfabric=9.9.9"])
