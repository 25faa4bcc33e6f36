"""Build inputs for real image builds in tests, read from this machine's pip settings at run time.

A module of its own (not conftest.py) so test modules can import it by a unique name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def pip_build_inputs() -> list[str]:
    """`--wheelhouse DIR --ca-bundle FILE` options from the host's pip settings, when present."""
    settings: dict[str, str] = {}
    try:
        listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                                 text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        listing = ""
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        settings.setdefault(key.split(".", 1)[-1], value.strip().strip("'\""))
    opts: list[str] = []
    links = os.environ.get("PIP_FIND_LINKS") or settings.get("find-links", "")
    wheelhouse = next((p for p in links.split() if Path(p).is_dir()), None)
    if wheelhouse:
        opts += ["--wheelhouse", wheelhouse]
    cert = os.environ.get("PIP_CERT") or settings.get("cert", "")
    if cert and Path(cert).is_file():
        opts += ["--ca-bundle", cert]
    return opts
