"""Build inputs for real image builds in tests, read from this machine's pip settings at run time.

A module of its own (not conftest.py) so test modules can import it by a unique name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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


def sh(*argv: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False, **kw)


def recipe_image(workdir: Path, script: str, *args: str, prebuilt: str) -> str:
    """The image tests/infra/SCRIPT builds (the tag on its stdout's last line), with this machine's
    pip build inputs; or the one the environment variable PREBUILT names, when set."""
    if os.environ.get(prebuilt):
        return os.environ[prebuilt]
    import pytest

    hpcai = shutil.which("hpcai") or str(Path(sys.executable).with_name("hpcai"))
    env = {**os.environ, "HPCAI": hpcai, "HPCAI_PYTHON": sys.executable, "HPCAI_WORK_DIR": str(workdir)}
    res = sh("bash", str(REPO / "tests/infra" / script), *args, *pip_build_inputs(), timeout=5000, env=env)
    if res.returncode != 0:
        pytest.fail(f"{script} {' '.join(args)} failed (exit {res.returncode}):\n{res.stderr[-6000:]}")
    return res.stdout.strip().splitlines()[-1]


def in_image(image: str, script: str, *docker_args: str) -> subprocess.CompletedProcess:
    """bash -c SCRIPT in a container of IMAGE, started through its entrypoint like a payload."""
    return sh("docker", "run", "--rm", *docker_args, image, "bash", "-c", script)


def plugin_tables(image: str, path: str) -> list[str]:
    """The versioned plugin tables (ncclNetPlugin_vN) the NCCL/RCCL net plugin at PATH exports, by
    dlopen in the image (no nm there: the final stage has no toolchain)."""
    import shlex

    probe = ("import ctypes\n"
             f"lib = ctypes.CDLL({path!r})\n"
             "print(' '.join(f'ncclNetPlugin_v{v}' for v in range(2, 20) if hasattr(lib, f'ncclNetPlugin_v{v}')))\n")
    res = in_image(image, f"python3 -c {shlex.quote(probe)}")
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.split()
