"""The test engines themselves: the Slurm cluster from tests/infra/slurm-up.sh and the
Charliecloud conversion helper tests/infra/ch-image.sh.

These check what the launch tests rely on (four fake nodes that srun spreads tasks over, node
names that resolve, the PMIx plugin, a SquashFS that ch-run can run with binds), so a broken
cluster fails here with a clear message instead of deep inside a launch test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NODES = [f"nid{i:03d}" for i in range(1, 5)]
BASE_IMAGE = os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim")
ENV = {**os.environ, "USER": os.environ.get("USER") or "root"}  # ch-run refuses to run without USER


def run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=ENV, check=False)


@pytest.mark.slurm
def test_four_nodes_are_up():
    res = run(["sinfo", "-h", "-N", "-o", "%N %t"])
    assert res.returncode == 0, res.stderr
    states = dict(line.split() for line in res.stdout.splitlines())
    assert sorted(states) == NODES
    assert all(s.rstrip("*") in ("idle", "mix", "alloc") for s in states.values()), states


@pytest.mark.slurm
def test_srun_spreads_tasks_over_fake_nodes():
    res = run(["srun", "-N4", "--ntasks-per-node=1", "printenv", "SLURMD_NODENAME"])
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.split()) == NODES

    # 2 nodes x 2 tasks: global and local ranks as a multi-node job sees them.
    res = run(["srun", "-N2", "--ntasks-per-node=2", "sh", "-c",
               'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURMD_NODENAME"'])
    assert res.returncode == 0, res.stderr
    rows = sorted(tuple(line.split()) for line in res.stdout.splitlines())
    assert [r[:3] for r in rows] == [("0", "0", "0"), ("1", "1", "0"), ("2", "0", "1"), ("3", "1", "1")]
    assert rows[0][3] == rows[1][3] != rows[2][3] == rows[3][3]


@pytest.mark.slurm
@pytest.mark.parametrize("name", ["nid001", "nid004", "nid001i"])
def test_node_names_resolve(name):
    # MASTER_ADDR=nid001 must resolve in every rank; nid001i is the JSC-style suffixed name.
    assert socket.gethostbyname(name) == "127.0.0.1"


@pytest.mark.slurm
def test_mpi_plugins_include_pmix_and_pmi2():
    res = run(["srun", "--mpi=list"])
    plugins = res.stdout + res.stderr
    assert res.returncode == 0, plugins
    assert "pmix" in plugins and "pmi2" in plugins, plugins


@pytest.mark.docker
@pytest.mark.charliecloud
@pytest.mark.timeout(600)
def test_ch_image_converts_once_and_runs(tmp_path):
    # tests/infra/docker-up.sh (run by `make test`) makes the base; without it this test must fail.
    assert run(["docker", "image", "inspect", BASE_IMAGE]).returncode == 0, \
        f"{BASE_IMAGE} not present: run tests/infra/docker-up.sh"
    script = str(REPO / "tests" / "infra" / "ch-image.sh")
    first = run(["bash", script, BASE_IMAGE, str(tmp_path)], timeout=540)
    assert first.returncode == 0, first.stderr
    sqfs = Path(first.stdout.strip())
    image_id = run(["docker", "image", "inspect", "-f", "{{.Id}}", BASE_IMAGE]).stdout.strip()
    assert sqfs.is_file() and sqfs.parent == tmp_path
    assert sqfs.name.endswith(image_id.removeprefix("sha256:")[:12] + ".sqfs")

    start = time.monotonic()
    again = run(["bash", script, BASE_IMAGE, str(tmp_path)])
    assert again.returncode == 0 and again.stdout.strip() == str(sqfs)
    assert time.monotonic() - start < 5, "an unchanged image must reuse its SquashFS"
    assert "exporting" not in again.stderr

    # ch-run as root: a bind onto a mount point the helper added, and --set-env.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "hello").write_text("from the host\n")
    res = run(["ch-run", "-b", f"{tmp_path / 'data'}:/var/spool/slurmd", "--set-env=HPCAI_T=x y",
               str(sqfs), "--", "sh", "-c", 'cat /var/spool/slurmd/hello; echo "$HPCAI_T"'])
    assert res.returncode == 0, res.stderr
    assert res.stdout == "from the host\nx y\n"


@pytest.mark.slurm
def test_bring_up_restarts_daemons_whose_packages_changed():
    """slurmd keeps a plugin load that failed (libpmix.so missing) until it restarts: slurm-up.sh
    compares what the daemons were started with against the installed Slurm/PMIx packages."""
    started = Path("/run/hpcai-slurm/started-with")
    pid = Path("/run/hpcai-slurm/slurmctld.pid").read_text().strip()
    # as if libpmix-dev had been installed after the daemons started
    started.write_text("\n".join(line for line in started.read_text().splitlines()
                                 if not line.startswith("libpmix-dev ")) + "\n")
    res = run(["bash", str(REPO / "tests" / "infra" / "slurm-up.sh")], timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "packages changed since the daemons started: restarting the cluster" in res.stderr
    assert "srun --mpi=pmix|pmi2|none runs" in res.stderr  # its self-check ran
    assert Path("/run/hpcai-slurm/slurmctld.pid").read_text().strip() != pid
    again = run(["bash", str(REPO / "tests" / "infra" / "slurm-up.sh")], timeout=600)
    assert again.returncode == 0 and "restarting" not in again.stderr  # nothing changed: left alone


@pytest.mark.slurm
def test_bring_up_self_check_fails_loudly_with_srun_s_reason():
    res = subprocess.run(["bash", str(REPO / "tests" / "infra" / "slurm-up.sh")], capture_output=True, text=True,
                         timeout=600, env={**ENV, "HPCAI_SLURM_MPI_TYPES": "pmix nosuchpmi"}, check=False)
    assert res.returncode == 1
    first = res.stderr.splitlines()[0]
    assert first.startswith("slurm-up: self-check failed: srun -N2 --mpi=nosuchpmi true: ")
    assert "Invalid MPI type 'nosuchpmi'" in res.stderr  # srun's own words, then the daemons' logs
