"""Where hpcai's data lives: the wheel's `_data` folder, or the repository root in a checkout."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

_PKG = Path(__file__).resolve().parent


@functools.cache
def data_root() -> Path:
    """Folder holding dockerfiles/, apptainer/, entrypoints/ and payloads/."""
    packaged = _PKG / "_data"
    if (packaged / "dockerfiles").is_dir():
        return packaged
    repo = _PKG.parents[1]
    if (repo / "dockerfiles").is_dir():
        return repo
    raise RuntimeError(f"hpcai data not found under {packaged} or {repo}")


def data_path(*parts: str) -> Path:
    return data_root().joinpath(*parts)


def package_file(name: str) -> Path:
    """A data file shipped inside the package itself (flavors.toml, components.toml, sites/…)."""
    return _PKG / name


@functools.cache
def git_sha() -> str:
    """Short git sha of the checkout hpcai runs from, or 'unknown' for an installed wheel."""
    repo = _PKG.parents[1]
    if not (repo / ".git").exists():
        return "unknown"
    try:
        res = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return res.stdout.strip() or "unknown"
