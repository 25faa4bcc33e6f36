"""Which engines this machine has: the one rule tests/conftest.py and the tests themselves use.

A module of its own (not conftest.py) so test modules can import it by a unique name.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

# Open MPI on the Slurm test cluster: its "nodes" share this machine's host name and /dev/shm, so
# ranks talk TCP, as ranks on different real nodes do; and its 4 ranks share 2 cores, which Open
# MPI cannot see under srun, so they must yield while they wait: busy-polling ranks made each
# message wait for a scheduler time slice (a 256 KiB all-reduce ran for minutes under load).
CLUSTER_MPI_ENV = ("OMPI_MCA_btl=tcp,self", "OMPI_MCA_mpi_yield_when_idle=1")
CLUSTER_MPI_OPTIONS = [arg for env in CLUSTER_MPI_ENV for arg in ("--env", env)]


# The two clusters of tests/infra/slurm-multi-up.sh, joined by one slurmdbd: a client names either
# one's config, and reaches both through the database (-M).
MULTI_CLUSTERS = ("alpha", "beta")


def multi_env(cluster: str) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": f"/etc/slurm-multi/{cluster}/slurm.conf"}


def _up(env: dict[str, str]) -> bool:
    try:
        res = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0 and "UP" in res.stdout


def _ok(argv: list[str], timeout: float = 20) -> bool:
    if not shutil.which(argv[0]):
        return False
    try:
        return subprocess.run(argv, capture_output=True, timeout=timeout, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def engine_available(name: str) -> bool:
    if name == "docker":
        return _ok(["docker", "info"])
    if name == "podman":
        return _ok(["podman", "info"])
    if name == "slurm":
        return _ok(["sinfo", "-h", "-N"]) and _ok(["scontrol", "ping"])
    if name == "multicluster":  # both clusters answer, each through its own config
        return all(_up(multi_env(c)) for c in MULTI_CLUSTERS)
    if name == "charliecloud":
        return bool(shutil.which("ch-run") and shutil.which("ch-convert"))
    if name == "apptainer":
        return bool(shutil.which("apptainer") or shutil.which("singularity"))
    if name == "gpu":
        return _ok(["nvidia-smi", "-L"]) or _ok(["rocm-smi"])
    if name == "registry":
        return registry_answers()
    if name == "browser":  # headless Chromium and the driver selenium speaks to it through
        return bool(shutil.which("chromedriver") and (shutil.which("chromium") or shutil.which("chromium-browser")))
    return True


# The test registry (tests/infra/registry-up.sh): where it serves, its files, its one user.
REGISTRY = os.environ.get("HPCAI_TEST_REGISTRY", "localhost:5443")
REGISTRY_STATE = Path(os.environ.get("HPCAI_TEST_REGISTRY_STATE", "/var/lib/hpcai-test-registry"))
REGISTRY_USER = "hpcai"

# The test cluster's node-local folder: one path, each slurmd's own folder behind it (slurm-up.sh)
NODE_LOCAL = os.environ.get("HPCAI_SLURM_NODE_LOCAL", "/var/cache/hpcai-node")
NODE_LOCAL_STATE = Path("/var/lib/hpcai-slurm/node-local")  # NODE/…: what each node sees at NODE_LOCAL


def registry_answers() -> bool:
    """The test registry is up: it refuses an anonymous request (401) over TLS from its own CA."""
    import ssl
    import urllib.error
    import urllib.request

    ca = REGISTRY_STATE / "ca.crt"
    if not ca.is_file() or not (REGISTRY_STATE / "password").is_file():
        return False
    try:
        urllib.request.urlopen(f"https://{REGISTRY}/v2/", timeout=5, context=ssl.create_default_context(cafile=str(ca)))
    except urllib.error.HTTPError as exc:
        return exc.code == 401
    except OSError:
        return False
    return False
