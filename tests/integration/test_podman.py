"""Podman for real (tests/infra/podman-up.sh): `hpcai build --builder podman` and the podman runtime.

The image is pytorch-cpu with sanity, mpi-allreduce and ddp-bench only: without hf-clm nothing
else brings numpy in, so its default suite passing also shows the framework install is whole.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.podman, pytest.mark.slow]
PAYLOADS = ("sanity", "mpi-allreduce", "ddp-bench")  # conftest.PODMAN_PAYLOADS


def _podman(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.timeout(1800)
def test_podman_build_runs_the_default_suite(podman_pytorch_image):
    labels = json.loads(_podman("image", "inspect", podman_pytorch_image).stdout)[0]["Config"]["Labels"]
    assert labels["hpcai.payloads"] == ",".join(PAYLOADS)
    res = _podman("run", "--rm", podman_pytorch_image)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    table = [ln.split() for ln in res.stdout.splitlines() if ln.split()[:1] and ln.split()[0] in PAYLOADS]
    assert [(row[0], row[1]) for row in table] == [(p, "PASS") for p in PAYLOADS], res.stdout[-2000:]


def _launch(hpcai_exe, image: str, run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*hpcai_exe, "launch", "--image", image, "--runtime", "podman", "-o", str(run_dir), *args],
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.timeout(900)
def test_podman_runtime_two_local_ranks(podman_pytorch_image, hpcai_exe, tmp_path):
    run_dir = tmp_path / "ddp"
    res = _launch(hpcai_exe, podman_pytorch_image, run_dir, "--site", "local", "--ntasks-per-node", "2",
                  "ddp-bench", "model=convnet", "image_size=32", "iters=3", "warmup=1", "batch_size=8")
    assert res.returncode == 0, res.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    head = next(m for m in metrics["metrics"] if m["headline"])
    assert head["name"] == "ex_per_sec_total" and head["value"] > 0
    assert _podman("ps", "-aq", "--filter", f"label=hpcai.run={run_dir.name}").stdout.strip() == ""


@pytest.mark.slurm
@pytest.mark.timeout(900)
def test_podman_runtime_under_srun_two_nodes(podman_pytorch_image, hpcai_exe, tmp_path):
    run_dir = tmp_path / "sanity"
    res = _launch(hpcai_exe, podman_pytorch_image, run_dir, "--site", "generic-slurm", "-N", "2", "--ntasks-per-node", "1",
                  "--cmd", "--", "sh", "-c", 'echo "rank $RANK of $WORLD_SIZE on $SLURMD_NODENAME"')
    assert res.returncode == 0, res.stderr[-3000:]
    logs = sorted((run_dir / "logs").glob("rank-*.out"))
    assert [p.read_text() for p in logs] == ["rank 0 of 2 on nid001\n", "rank 1 of 2 on nid002\n"]
    assert _podman("ps", "-aq", "--filter", f"label=hpcai.run={run_dir.name}").stdout.strip() == ""
