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


def package_file(*parts: str) -> Path:
    """A data file shipped inside the package itself (image/flavors.toml, run/sites/…)."""
    return _PKG.joinpath(*parts)


# Written by hatch_build.py when a wheel or sdist is built from a checkout (git-ignored there).
COMMIT_STAMP = "_commit.txt"


@functools.cache
def git_sha() -> str:
    """Short git sha (12 hex) of the checkout hpcai runs from; in an installed wheel, the commit
    its build stamped; 'unknown' when neither says."""
    repo = _PKG.parents[1]
    if (repo / ".git").exists():  # a checkout's HEAD wins over a stamp left there by an old build
        return _head_from_files(repo / ".git") or _head_from_git(repo)
    return _stamped_sha() or "unknown"


def _stamped_sha() -> str | None:
    try:
        sha = (_PKG / COMMIT_STAMP).read_text().strip()
    except OSError:
        return None
    is_sha = 7 <= len(sha) <= 40 and all(c in "0123456789abcdef" for c in sha)
    return sha if is_sha else None


def _head_from_files(git_dir: Path) -> str | None:
    """HEAD's commit read from .git itself (a branch ref file or a detached HEAD): every launch
    records the sha, and a `git` process costs more than the rest of writing the record. Packed
    refs, worktrees (.git is a file) and anything unusual are left to git."""
    try:
        head = (git_dir / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            head = (git_dir / head[5:]).read_text().strip()
    except OSError:
        return None
    is_sha = len(head) == 40 and all(c in "0123456789abcdef" for c in head)
    return head[:12] if is_sha else None


def _head_from_git(repo: Path) -> str:
    try:
        res = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return res.stdout.strip() or "unknown"
