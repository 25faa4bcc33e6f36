"""Hatchling build hook: stamp the checkout's commit into the package, so that an installed wheel
tags and labels its images with it (hpcai.resources.git_sha) instead of `unknown`.

Built from a checkout, the hook writes the short sha to launcher/hpcai/_commit.txt (git-ignored)
and ships it: as hpcai/_commit.txt in a wheel, at the same path in an sdist. A wheel built from
that sdist has no .git, so the hook ships the stamp the sdist carried. Editable installs read
.git at run time and get no stamp.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

STAMP = "launcher/hpcai/_commit.txt"  # hpcai.resources.COMMIT_STAMP, inside the package


class CommitStampHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if version == "editable":
            return
        stamp = Path(self.root, STAMP)
        sha = _checkout_sha(Path(self.root))
        if sha:
            stamp.write_text(sha + "\n")
        elif not stamp.is_file():  # neither a checkout nor an sdist made from one: git_sha() says unknown
            return
        # Forced, because .gitignore (shipped in the sdist too) excludes the generated file.
        build_data["force_include"][str(stamp)] = "hpcai/_commit.txt" if self.target_name == "wheel" else STAMP


def _checkout_sha(root: Path) -> str | None:
    """HEAD as hpcai.resources._head_from_git reads it; only at the checkout's own top, so an
    unpacked sdist inside some other repository never takes that repository's commit."""
    if not (root / ".git").exists():
        return None
    try:
        res = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None
