"""A benchmark script's version: the sha256 of its content (Mila's report keeps 10 characters)."""

from __future__ import annotations

import hashlib


def get_file_version(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
