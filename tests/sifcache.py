"""The one cache of SIFs the tests make (HPCAI_APPTAINER_CACHE, default /var/tmp/hpcai-sif, where
tests/infra/apptainer-up.sh keeps its self-check SIF): each under a name that holds a key of what
made it, so a session whose inputs did not change takes the SIF a former one made.

A module of its own (not conftest.py) so test modules can import it by a unique name.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path


def cached_sif(name: str, make: Callable[[Path], None]) -> Path:
    """CACHE/NAME, made by make(PART) unless it is there, then PART renamed: a killed session never
    leaves a bad entry, and a lock lets one session build while another waits for it."""
    cache = Path(os.environ.get("HPCAI_APPTAINER_CACHE", "/var/tmp/hpcai-sif"))
    cache.mkdir(parents=True, exist_ok=True)
    sif = cache / name
    with open(cache / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not sif.is_file():
            part = cache / f"{sif.stem}.part.sif"  # a .sif name: `hpcai sif -o` and `build -o` take it
            make(part)
            part.rename(sif)
    return sif
