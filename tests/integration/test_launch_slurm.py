"""`hpcai launch` on the real Slurm test cluster (tests/infra/slurm-up.sh: nid[001-004]) with the
real pytorch-cpu image, under the docker, charliecloud and apptainer runtimes.

Every test drives the CLI as a subprocess, exactly as a user would, and reads the run record it
leaves (plan.json, status.json, logs/rank-N.out|err). Nothing is mocked: ranks are Slurm tasks on
different fake nodes, each in its own container; the MPI test goes through Slurm's PMIx plugin and
the image's Open MPI; the gloo test through torch.distributed over TCP.

Apptainer runs the SIF `hpcai sif` made of that image, in user-namespace mode (--userns: root on
these VMs lacks a capability its setuid-less root mode needs); the ranks of an MPI world on a node
share one instance (tests/integration/test_launch_slurm_apptainer.py has the rest).

The fake nodes all live on this one machine and share its host name, so Open MPI's shared-memory
transport would mix up segments of ranks on different fake nodes: the MPI test selects TCP
(`OMPI_MCA_btl=tcp,self`), which is what ranks on different real nodes use anyway.
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

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "USER": os.environ.get("USER") or "root"}  # ch-run refuses to run without USER
# Seconds for one `hpcai launch`; every job here takes well under a minute. (No pytest timeout
# marks: they would also count the one-time image build and SquashFS conversion in the fixtures.)
LAUNCH_TIMEOUT = 120

RUNTIMES = [
    pytest.param("docker", marks=[pytest.mark.slurm, pytest.mark.docker]),
    pytest.param("charliecloud", marks=[pytest.mark.slurm, pytest.mark.docker, pytest.mark.charliecloud]),
    # The SIF `hpcai sif` made of the same image (tests/conftest.py), in user-namespace mode: root
    # on these VMs lacks a capability Apptainer's setuid-less root mode asks for.
    pytest.param("apptainer", marks=[pytest.mark.slurm, pytest.mark.docker, pytest.mark.apptainer]),
]
# Options each runtime needs on this machine (the site profile would carry them at a real site).
RUNTIME_OPTIONS = {"apptainer": ("--userns",)}
PRIVATE_TMP = ("docker", "apptainer")  # their containers see a private /tmp: the marks folder is bound in

GLOO = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("GLOO", dist.get_rank(), dist.get_world_size(), int(t.item()), flush=True)
dist.destroy_process_group()
"""

MPI = """
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
print("MPI", comm.Get_rank(), comm.Get_size(), total, MPI.Get_library_version().split()[0:3], flush=True)
"""


@pytest.fixture
def image_for(request, pytorch_cpu_image):
    def pick(runtime: str) -> str:
        if runtime == "apptainer":
            return request.getfixturevalue("pytorch_cpu_sif")
        return request.getfixturevalue("ch_squashfs")(pytorch_cpu_image) if runtime == "charliecloud" else pytorch_cpu_image
    return pick


def launch(hpcai_exe, image: str, runtime: str, run_dir: Path, *options: str,
           cmd: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    argv = [*hpcai_exe, "launch", "--image", image, "--runtime", runtime, "--site", "generic-slurm",
            "--output-dir", str(run_dir), *RUNTIME_OPTIONS.get(runtime, ()), *options, "--cmd", "--", *cmd]
    start = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=run_dir.parent,
                         timeout=LAUNCH_TIMEOUT)
    return res, time.monotonic() - start


def rank_logs(run_dir: Path, ranks: int) -> list[str]:
    logs = run_dir / "logs"
    return [(logs / f"rank-{r}.out").read_text(errors="replace") for r in range(ranks)]


def explain(res: subprocess.CompletedProcess, run_dir: Path) -> str:
    """stderr of hpcai plus every rank's stderr, for assertion messages."""
    parts = [f"exit {res.returncode}\n--- hpcai stderr ---\n{res.stderr[-3000:]}"]
    for err in sorted((run_dir / "logs").glob("rank-*.err")):
        parts.append(f"--- {err.name} ---\n{err.read_text(errors='replace')[-1500:]}")
    return "\n".join(parts)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_rank_sees_its_rank_variables(runtime, image_for, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res, _ = launch(hpcai_exe, image_for(runtime), runtime, run_dir,
                    "-N", "2", "--ntasks-per-node", "2", cmd=["env"])
    assert res.returncode == 0, explain(res, run_dir)

    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURMD_NODENAME")
    seen = []
    for text in rank_logs(run_dir, 4):
        env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        seen.append({n: env.get(n) for n in names})
    assert [(s["RANK"], s["LOCAL_RANK"], s["WORLD_SIZE"]) for s in seen] == [
        ("0", "0", "4"), ("1", "1", "4"), ("2", "0", "4"), ("3", "1", "4")], seen
    first, second = seen[0]["SLURMD_NODENAME"], seen[2]["SLURMD_NODENAME"]
    assert first != second and seen[1]["SLURMD_NODENAME"] == first and seen[3]["SLURMD_NODENAME"] == second
    # MASTER_ADDR is the allocation's first host, the same for every rank, as is the port.
    assert {s["MASTER_ADDR"] for s in seen} == {first}
    assert len({s["MASTER_PORT"] for s in seen}) == 1 and seen[0]["MASTER_PORT"].isdigit()

    # The run record: the plan with the exact srun line, the final status, one log pair per rank.
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["argv"][0] == "srun" and "--kill-on-bad-exit=1" in plan["argv"]
    assert plan["runtime"] == runtime and plan["nodes"] == 2 and plan["ntasks"] == 4
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "completed" and status["exit_code"] == 0, status
    assert sorted(p.name for p in (run_dir / "logs").glob("rank-*.out")) == [f"rank-{r}.out" for r in range(4)]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_gloo_allreduce_over_two_nodes(runtime, image_for, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res, _ = launch(hpcai_exe, image_for(runtime), runtime, run_dir,
                    "-N", "2", "--ntasks-per-node", "2", cmd=["python3", "-c", GLOO])
    assert res.returncode == 0, explain(res, run_dir)
    if runtime == "charliecloud":  # python3 with torch is the image's: its ENV was applied
        assert "--set-env" in json.loads((run_dir / "plan.json").read_text())["argv"]
    for rank, text in enumerate(rank_logs(run_dir, 4)):
        line = next((ln for ln in text.splitlines() if ln.startswith("GLOO ")), None)
        assert line == f"GLOO {rank} 4 10", (rank, text)  # 1 + 2 + 3 + 4


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_mpi_program_over_two_nodes_through_pmix(runtime, image_for, hpcai_exe, tmp_path):
    # srun --mpi=pmix starts Slurm's PMIx server; the image's Open MPI connects to it through the
    # rendezvous files under the slurmd spool dir, so that dir is bound into the container.
    run_dir = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res, _ = launch(hpcai_exe, image_for(runtime), runtime, run_dir,
                    "-N", "2", "--ntasks-per-node", "2", "--mpi", "pmix",
                    "--bind", "/var/spool/slurmd", *CLUSTER_MPI_OPTIONS,
                    cmd=["python3", "-c", MPI])
    assert res.returncode == 0, explain(res, run_dir)
    plan = json.loads((run_dir / "plan.json").read_text())
    assert "--mpi=pmix" in plan["argv"]
    for rank, text in enumerate(rank_logs(run_dir, 4)):
        line = next((ln for ln in text.splitlines() if ln.startswith("MPI ")), "")
        assert line.startswith(f"MPI {rank} 4 10 "), (rank, text)
        assert "Open MPI" in line.replace("'", "").replace(",", ""), line


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_failing_rank_ends_the_job_and_is_named(runtime, image_for, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    script = 'if [ "$RANK" = 1 ]; then echo "rank one gives up" >&2; exit 3; fi; sleep 120'
    res, elapsed = launch(hpcai_exe, image_for(runtime), runtime, run_dir,
                          "-N", "2", "--ntasks-per-node", "2", cmd=["sh", "-c", script])
    assert res.returncode != 0
    # The others sleep 120 s: ending within seconds means --kill-on-bad-exit worked.
    assert elapsed < 45, f"hpcai launch took {elapsed:.1f} s to notice the failed rank"
    err_log = run_dir / "logs" / "rank-1.err"
    assert "rank 1" in res.stderr and str(err_log) in res.stderr, res.stderr
    assert "rank one gives up" in err_log.read_text()
    status = json.loads((run_dir / "status.json").read_text())
    # Only rank 1: the ranks --kill-on-bad-exit ended are not failures (ch-run 0.31 exits 1 when
    # its child is killed, which must not make them look like failed ranks).
    assert status["state"] == "failed" and status["failed_ranks"] == [1], status
    if runtime == "docker":  # no container outlives the job
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=hpcai.run={run_dir.name}"],
                              capture_output=True, text=True, check=True).stdout.split()
        assert left == [], f"containers left behind: {left}"
    if runtime == "apptainer":
        assert_no_instances(run_dir)


JSC_LIKE_SITE = """
# The test cluster seen as a JSC-style site: MASTER_ADDR is the first host plus an 'i' (the IPoIB
# name), resolved to its address. slurm-up.sh maps nid00Xi in /etc/hosts for exactly this.
description = "test cluster with JSC's MASTER_ADDR suffix"
hostnames = []
backend = "srun"
runtime = "docker"
mpi = ""
gpu = "none"
gpus_per_node = 0
master_addr_suffix = "i"
master_port = 7010
"""

GLOO_ADDR = "import os\n" + GLOO.replace('print("GLOO",', 'print("GLOO", os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"],')


@pytest.mark.slurm
@pytest.mark.docker
def test_jsc_suffix_master_addr_reaches_torch(pytorch_cpu_image, hpcai_exe, tmp_path, site_path):
    sites = site_path("jsc-test", JSC_LIKE_SITE)
    run_dir = tmp_path / tmp_path.name
    argv = [*hpcai_exe, "launch", "--image", pytorch_cpu_image, "--site", "jsc-test", "-N", "2",
            "--ntasks-per-node", "1", "--output-dir", str(run_dir), "--cmd", "--", "python3", "-c", GLOO_ADDR]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT, cwd=tmp_path,
                         env={**ENV, "HPCAI_SITE_PATH": sites})
    assert res.returncode == 0, explain(res, run_dir)
    # Every nid00Xi maps to 127.0.0.1 here; without the suffix MASTER_ADDR would be the bare name.
    expected = socket.gethostbyname("nid001i")
    for rank, text in enumerate(rank_logs(run_dir, 2)):
        line = next((ln for ln in text.splitlines() if ln.startswith("GLOO ")), None)
        # the address of <first node>i, not the bare node name, and the site's fixed port
        assert line is not None and line.split()[1:3] == [expected, "7010"], text
        assert line.split()[3:] == [str(rank), "2", "3"], text  # 1 + 2


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sigterm_stops_every_rank_and_leaves_nothing_behind(runtime, image_for, hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name
    marks = tmp_path / "started"
    marks.mkdir()
    nap = f"300.{os.getpid()}{len(runtime)}"  # a unique `sleep` argument to look for afterwards
    # Each rank leaves a mark (ch-run shares the host /tmp; docker and apptainer get it bound), then sleeps.
    script = f'touch {marks}/rank-$RANK && exec sleep {nap}'
    argv = [*hpcai_exe, "launch", "--image", image_for(runtime), "--runtime", runtime,
            "--site", "generic-slurm", "-N", "2", "--ntasks-per-node", "2", "--output-dir", str(run_dir),
            *RUNTIME_OPTIONS.get(runtime, ()), *(["--bind", str(marks)] if runtime in PRIVATE_TMP else []),
            "--cmd", "--", "sh", "-c", script]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while len(list(marks.iterdir())) < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(list(marks.iterdir())) == 4, f"ranks did not start: {sorted(marks.iterdir())}"
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, err
    assert elapsed < 30, f"{elapsed:.1f} s from SIGTERM to exit"
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "cancelled", status
    time.sleep(1)  # Slurm reaps the step's processes asynchronously
    left = subprocess.run(["pgrep", "-f", f"sleep {nap}"], capture_output=True, text=True).stdout.split()
    assert left == [], f"rank processes left behind: {left}"
    if runtime == "docker":
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=hpcai.run={run_dir.name}"],
                              capture_output=True, text=True, check=True).stdout.split()
        assert left == [], f"containers left behind: {left}"
    if runtime == "apptainer":
        assert_no_instances(run_dir)


def assert_no_instances(run_dir: Path) -> None:
    """No Apptainer instance of the run (a node's peer group, which holds the SIF's FUSE mount) is left."""
    listing = subprocess.run(["apptainer", "instance", "list", "--json"], capture_output=True, text=True,
                             check=True).stdout
    names = [i["instance"] for i in json.loads(listing or "{}").get("instances", [])]
    assert not [n for n in names if run_dir.name in n], f"instances left behind: {names}"
