"""`hpcai launch --runtime apptainer` for real on the 4-node Slurm test cluster, with both SIF origins.

The SIFs are the session's (tests/conftest.py): `pytorch_cpu_sif`, the pytorch-cpu Docker image
converted by `hpcai sif`, and `pytorch_cpu_def_sif`, the same flavor built from its def by `hpcai
build --builder apptainer` (no Docker in the image's making). Both sit in /var/tmp, a path every
fake node sees, as a shared file system would hold them at a site. Apptainer runs in
user-namespace mode (`--userns`, a site's `apptainer_userns`): root on these VMs lacks a
capability its setuid-less root mode needs, which is the situation of sites without setuid
Apptainer.

What is proven here: MPI and DDP payloads over 2 nodes x 2 ranks with the PMI type taken from the
SIF's hpcai.mpi label; the ranks of a node in one instance (the node's peer group: one user, PID
and IPC namespace, one /tmp and /dev/shm), so Open MPI's shared memory and CMA work between them
(measured: tests/integration/test_cma_containers.py and `make bench`'s container parity);
the host libfabric swap by the ranks' /proc/self/maps; the JSC MASTER_ADDR suffix; --bind, --env
and --data reaching every rank; a failing rank named in the record and no instance left behind;
SIGTERM to hpcai ending every rank and instance; every site profile launching both SIFs;
`hpcai submit` of the same job and `hpcai results show` of its record.

The fake nodes share this machine's host name, so Open MPI would take ranks on two fake nodes for
neighbours: runs across nodes select TCP between them (tests/engines.py); shared memory is
measured within one node.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from engines import CLUSTER_MPI_OPTIONS

pytestmark = [pytest.mark.slurm, pytest.mark.docker, pytest.mark.apptainer]

ENV = {**os.environ, "USER": os.environ.get("USER") or "root"}
LAUNCH_TIMEOUT = 180
ORIGINS = ("converted", "def")
SMALL_ALLREDUCE = ("min_bytes=1024", "max_bytes=262144", "iters=5", "warmup=1")
MARK = "hpcai test: the host's libfabric, not the image's"


@pytest.fixture(params=ORIGINS)
def sif(request) -> str:
    """Each test runs with the converted SIF and with the one built from the def."""
    return request.getfixturevalue("pytorch_cpu_sif" if request.param == "converted" else "pytorch_cpu_def_sif")


def launch(hpcai_exe, image: str, run_dir: Path, *options: str, site: str = "generic-slurm",
           env: dict[str, str] | None = None, timeout: float = LAUNCH_TIMEOUT) -> subprocess.CompletedProcess:
    argv = [*hpcai_exe, "launch", "--image", image, "--runtime", "apptainer", "--userns", "--site", site,
            "--output-dir", str(run_dir), *options]
    return subprocess.run(argv, capture_output=True, text=True, env=env or ENV, cwd=run_dir.parent,
                          timeout=timeout, check=False)


def explain(res: subprocess.CompletedProcess, run_dir: Path) -> str:
    parts = [f"exit {res.returncode}\n--- hpcai stderr ---\n{res.stderr[-3000:]}"]
    for log in sorted((run_dir / "logs").glob("rank-*.*")) if (run_dir / "logs").is_dir() else ():
        parts.append(f"--- {log.name} ---\n{log.read_text(errors='replace')[-1500:]}")
    return "\n".join(parts)


def rank_out(run_dir: Path, rank: int) -> str:
    return (run_dir / "logs" / f"rank-{rank}.out").read_text(errors="replace")


def record(run_dir: Path) -> tuple[dict, dict]:
    return (json.loads((run_dir / "plan.json").read_text()), json.loads((run_dir / "status.json").read_text()))


def headline(run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return next(m for m in metrics["metrics"] if m["headline"])


def instances(run_dir: Path) -> list[str]:
    """This run's Apptainer instances still running (a node's peer group is named after the run)."""
    listing = subprocess.run(["apptainer", "instance", "list", "--json"], capture_output=True, text=True,
                             check=True).stdout
    return [i["instance"] for i in json.loads(listing or "{}").get("instances", []) if run_dir.name in i["instance"]]


# --- payloads over 2 nodes x 2 ranks ---------------------------------------------------------------

def test_mpi_allreduce_two_nodes_two_ranks_pmix_from_the_label(sif, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name
    # no --mpi: the SIF's hpcai.mpi label (ompi) chooses pmix over generic-slurm's cluster default
    res = launch(hpcai_exe, sif, run_dir, "-N", "2", "--ntasks-per-node", "2", *CLUSTER_MPI_OPTIONS,
                 "mpi-allreduce", *SMALL_ALLREDUCE)
    assert res.returncode == 0, explain(res, run_dir)
    plan, status = record(run_dir)
    assert status["state"] == "completed", status
    assert "--mpi=pmix" in plan["argv"] and plan["image_labels"]["hpcai.mpi"] == "ompi"
    assert "instance://{group}" in plan["argv"]  # the node's two ranks ran in one instance
    assert "# mpi-allreduce: done, 4 ranks" in rank_out(run_dir, 0)
    head = headline(run_dir)
    assert head["name"] == "busbw_max_size" and head["value"] > 0
    assert instances(run_dir) == []  # the last rank of each node stopped its instance


def test_ddp_bench_two_nodes_two_ranks(sif, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name
    res = launch(hpcai_exe, sif, run_dir, "-N", "2", "--ntasks-per-node", "2", "--profile", "quick",
                 "ddp-bench")
    assert res.returncode == 0, explain(res, run_dir)
    _, status = record(run_dir)
    assert status["state"] == "completed", status
    head = headline(run_dir)
    assert head["value"] > 0, head
    out = rank_out(run_dir, 0)
    assert "* World size: 4 ranks on 2 node(s)" in out and "Benchmark: convnet with batch size 4" in out, out


# --- what reaches the ranks ------------------------------------------------------------------------

def test_bind_env_and_data_reach_every_rank(pytorch_cpu_sif, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name
    shared, data = tmp_path / "shared", tmp_path / "data"
    shared.mkdir()
    data.mkdir()
    (shared / "note.txt").write_text("bound from the host\n")
    (data / "corpus.txt").write_text("a dataset\n")
    script = 'cat /mnt/shared/note.txt; echo "FOO=$FOO"; ls "$HPCAI_DATA"; echo "RANK=$RANK"'
    res = launch(hpcai_exe, pytorch_cpu_sif, run_dir, "-N", "2", "--ntasks-per-node", "2",
                 "--bind", f"{shared}:/mnt/shared:ro", "--env", "FOO=a,b c", "--data", str(data),
                 "--cmd", "--", "sh", "-c", script)
    assert res.returncode == 0, explain(res, run_dir)
    for rank in range(4):
        out = rank_out(run_dir, rank)
        assert "bound from the host" in out and "FOO=a,b c" in out and "corpus.txt" in out, out
        assert f"RANK={rank}" in out, out


LIBFABRIC_SITE = """
description = "the test cluster as a Cray EX site: the host's libfabric swapped in at /host/lib"
backend = "srun"
runtime = "apptainer"
apptainer_userns = true
mpi = ""
gpu = "none"
libfabric = "{root}/*/lib64"
"""


@pytest.fixture(scope="module")
def host_libfabric(tmp_path_factory) -> Path:
    """A Cray-like host libfabric: this machine's libfabric.so.1 copied under VERSION/lib64 and
    marked with an ELF note (objcopy), so the mapped file is told apart from the image's copy of
    the same Debian build by its path and its host inode."""
    root = tmp_path_factory.mktemp("host-fabric")
    lib = root / "1.22.0" / "lib64"
    lib.mkdir(parents=True)
    real = next(Path(p) for p in ("/usr/lib/x86_64-linux-gnu/libfabric.so.1", "/lib/x86_64-linux-gnu/libfabric.so.1")
                if Path(p).exists()).resolve()
    note = root / "note.txt"
    note.write_text(MARK)
    res = subprocess.run(["objcopy", "--add-section", f".note.hpcai-host={note}", str(real), str(lib / real.name)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    (lib / "libfabric.so.1").symlink_to(real.name)
    return lib / real.name


def test_host_libfabric_is_mapped_in_every_rank(sif, host_libfabric, hpcai_exe, tmp_path, site_path):
    sites = site_path("fabric-test", LIBFABRIC_SITE.format(root=host_libfabric.parents[2]))
    run_dir = tmp_path / tmp_path.name
    probe = "LD_PRELOAD=libfabric.so.1 cat /proc/self/maps | grep libfabric"
    res = launch(hpcai_exe, sif, run_dir, "-N", "2", "--ntasks-per-node", "1", "--cmd", "--", "sh", "-c", probe,
                 site="fabric-test", env={**ENV, "HPCAI_SITE_PATH": sites})
    assert res.returncode == 0, explain(res, run_dir)
    plan, _ = record(run_dir)
    assert f"{host_libfabric.parent}:/host/lib" in plan["argv"]
    for rank in range(2):
        maps = {line.split()[-1]: int(line.split()[4]) for line in rank_out(run_dir, rank).splitlines()
                if "libfabric" in line}
        # the loader mapped the bound host file (its path and host inode), not the image's copy
        assert list(maps) == [f"/host/lib/{host_libfabric.name}"], maps
        assert maps[f"/host/lib/{host_libfabric.name}"] == host_libfabric.stat().st_ino


JSC_SITE = """
description = "the test cluster as a JSC-style site: MASTER_ADDR is the first host plus an 'i'"
backend = "srun"
runtime = "apptainer"
apptainer_userns = true
mpi = ""
gpu = "none"
master_addr_suffix = "i"
master_port = 7011
"""

GLOO = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("GLOO", os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], dist.get_rank(), int(t.item()), flush=True)
"""


def test_jsc_suffix_master_addr_reaches_torch(pytorch_cpu_def_sif, hpcai_exe, tmp_path, site_path):
    sites = site_path("jsc-apptainer", JSC_SITE)
    run_dir = tmp_path / tmp_path.name
    res = launch(hpcai_exe, pytorch_cpu_def_sif, run_dir, "-N", "2", "--ntasks-per-node", "1",
                 "--cmd", "--", "python3", "-c", GLOO, site="jsc-apptainer", env={**ENV, "HPCAI_SITE_PATH": sites})
    assert res.returncode == 0, explain(res, run_dir)
    expected = socket.gethostbyname("nid001i")  # slurm-up.sh maps nid00Xi for exactly this
    for rank in range(2):
        line = next((ln for ln in rank_out(run_dir, rank).splitlines() if ln.startswith("GLOO ")), "")
        assert line.split()[1:] == [expected, "7011", str(rank), "3"], rank_out(run_dir, rank)


# --- faults ----------------------------------------------------------------------------------------

def test_failing_rank_of_a_peer_group_is_named_and_no_instance_is_left(pytorch_cpu_sif, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name
    script = 'if [ "$RANK" = 1 ]; then echo "rank one gives up" >&2; exit 3; fi; sleep 120'
    start = time.monotonic()
    # --mpi pmix makes the command one MPI world: each node's two ranks share an instance
    res = launch(hpcai_exe, pytorch_cpu_sif, run_dir, "-N", "2", "--ntasks-per-node", "2", "--mpi", "pmix",
                 "--cmd", "--", "sh", "-c", script)
    assert res.returncode != 0
    assert time.monotonic() - start < 60, "the other ranks were not ended by --kill-on-bad-exit"
    plan, status = record(run_dir)
    assert "instance://{group}" in plan["argv"]
    assert status["state"] == "failed" and status["failed_ranks"] == [1], status
    assert "rank one gives up" in (run_dir / "logs" / "rank-1.err").read_text()
    assert "rank 1" in res.stderr
    assert instances(run_dir) == []


def test_sigterm_ends_every_rank_and_instance(pytorch_cpu_sif, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name
    marks = tmp_path / "started"
    marks.mkdir()
    nap = f"300.{os.getpid()}7"  # a unique `sleep` argument to look for afterwards
    argv = [*hpcai_exe, "launch", "--image", pytorch_cpu_sif, "--runtime", "apptainer", "--userns",
            "--site", "generic-slurm", "-N", "2", "--ntasks-per-node", "2", "--mpi", "pmix",
            "--output-dir", str(run_dir), "--bind", str(marks),
            "--cmd", "--", "sh", "-c", f"touch {marks}/rank-$RANK && exec sleep {nap}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while len(list(marks.iterdir())) < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(list(marks.iterdir())) == 4, f"ranks did not start: {sorted(marks.iterdir())}"
        assert len(instances(run_dir)) == 2  # one per node
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, err
    _, status = record(run_dir)
    assert status["state"] == "cancelled", status
    time.sleep(1)  # Slurm reaps the step's processes asynchronously
    left = subprocess.run(["pgrep", "-f", f"sleep {nap}"], capture_output=True, text=True).stdout.split()
    assert left == [], f"rank processes left behind: {left}"
    assert instances(run_dir) == []


# --- every site profile, both SIF origins ----------------------------------------------------------

SITES = ("cray-ex-nvidia", "cray-ex-amd", "cscs-alps", "generic-ib", "generic-slurm", "jsc-ib", "local")


@pytest.mark.parametrize("site", SITES)
def test_every_site_profile_runs_the_sanity_payload(site, sif, hpcai_exe, tmp_path):
    """Each site's own Apptainer command line (exec, or `run` with the image's %runscript on the
    Cray EX profiles), binds and GPU flags (--nv/--rocm exit 0 without a GPU), on this cluster:
    one rank on one CPU, no GPU asked of Slurm (it has no GRES), PMI none (the sites' own types, such as
    JSC's pspmix, are not offered here)."""
    run_dir = tmp_path / tmp_path.name
    res = launch(hpcai_exe, sif, run_dir, "-N", "1", "--ntasks-per-node", "1", "--gpus-per-node", "0", "-c", "1",
                 *(("--mpi", "none") if site != "local" else ()), "sanity", site=site)
    assert res.returncode == 0, explain(res, run_dir)
    plan, status = record(run_dir)
    assert status["state"] == "completed" and plan["site"] == site, status
    assert "hpcai-sanity: rank=0" in rank_out(run_dir, 0)
    assert headline(run_dir)["value"] == 1


# --- batch ---------------------------------------------------------------------------------------

def test_submit_the_same_job_then_show_its_record(pytorch_cpu_sif, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name
    res = subprocess.run([*hpcai_exe, "submit", "--wait", "--wait-timeout", "240", "--image", pytorch_cpu_sif,
                          "--runtime", "apptainer", "--userns", "--site", "generic-slurm", "-N", "2",
                          "--ntasks-per-node", "2", *CLUSTER_MPI_OPTIONS, "--output-dir", str(run_dir),
                          "mpi-allreduce", *SMALL_ALLREDUCE],
                         capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300, check=False)
    assert res.returncode == 0, explain(res, run_dir)
    assert "--userns" in (run_dir / "submit.sbatch").read_text()
    _, status = record(run_dir)
    assert status["state"] == "completed", status
    show = subprocess.run([*hpcai_exe, "results", "show", str(run_dir)], capture_output=True, text=True,
                          env=ENV, check=False)
    assert show.returncode == 0 and "mpi-allreduce" in show.stdout and "busbw_max_size" in show.stdout, show.stdout
    assert instances(run_dir) == []
