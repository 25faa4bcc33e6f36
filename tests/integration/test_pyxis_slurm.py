"""`hpcai launch --runtime pyxis` on the real Slurm test cluster, and `--runtime enroot` under the
local backend: enroot 4.1.2 and pyxis 0.24.0 built from their tag archives and installed into the
cluster's plugin stack by tests/infra/enroot-pyxis-up.sh.

The image is the session's pytorch-cpu image (tests/conftest.py) made into an enroot SquashFS by
the real `hpcai sqsh` (`enroot import dockerd://…`), kept per image Id in HPCAI_SQSH_CACHE. Every
launch is the CLI as a subprocess; what is checked comes from inside the containers (their
environment, /proc/self/maps) and from the run record. Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SQSH_CACHE = Path(os.environ.get("HPCAI_SQSH_CACHE", "/var/tmp/hpcai-sqsh"))
ENROOT_STATE = Path(os.environ.get("HPCAI_ENROOT_STATE", "/var/lib/hpcai-enroot"))  # as enroot-pyxis-up.sh
LAUNCH_TIMEOUT = 180
HPCAI = [sys.executable, "-m", "hpcai"]
# The loader's own record of which libfabric it maps, and whether that copy works.
PROBE = ('fi_info -l >/dev/null 2>&1 && echo FI_INFO_OK; '
         'LD_PRELOAD=libfabric.so.1 cat /proc/self/maps | grep libfabric; echo "RANK=$RANK"')

pytestmark = [pytest.mark.slurm, pytest.mark.docker]


@pytest.fixture(scope="module")
def pyxis() -> None:
    """pyxis in srun's plugin stack (its --container-* options) and enroot on PATH."""
    res = subprocess.run(["srun", "--help"], capture_output=True, text=True, check=False)
    if "--container-image" not in res.stdout + res.stderr or not subprocess.run(
            ["enroot", "version"], capture_output=True, check=False).returncode == 0:
        pytest.skip("pyxis/enroot not installed in the Slurm test cluster (tests/infra/enroot-pyxis-up.sh)")


@pytest.fixture(scope="module")
def sqsh(pyxis, pytorch_cpu_image) -> str:
    """The pytorch-cpu image as an enroot SquashFS, made once per image Id by `hpcai sqsh`."""
    from hpcai.image.sqsh import sqsh_name

    image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", pytorch_cpu_image],
                              capture_output=True, text=True, check=True).stdout.strip()
    SQSH_CACHE.mkdir(parents=True, exist_ok=True)
    out = SQSH_CACHE / sqsh_name(f"{pytorch_cpu_image}-{image_id.removeprefix('sha256:')[:12]}")
    if not out.is_file():
        res = subprocess.run([*HPCAI, "sqsh", pytorch_cpu_image, "-o", str(out)], capture_output=True,
                             text=True, timeout=1800, check=False)
        assert res.returncode == 0, res.stderr[-4000:]
        assert res.stdout.strip() == str(out)
    return str(out)


def launch(image: str, run_dir: Path, *options: str, cmd: list[str], runtime: str = "pyxis",
           env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    argv = [*HPCAI, "launch", "--image", image, "--runtime", runtime, "--output-dir", str(run_dir),
            *options, "--cmd", "--", *cmd]
    start = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, cwd=run_dir.parent, timeout=LAUNCH_TIMEOUT,
                         env={**os.environ, **(env or {})})
    return res, time.monotonic() - start


def explain(res: subprocess.CompletedProcess, run_dir: Path) -> str:
    parts = [f"exit {res.returncode}\n--- hpcai stderr ---\n{res.stderr[-3000:]}"]
    for err in sorted((run_dir / "logs").glob("rank-*.err")):
        parts.append(f"--- {err.name} ---\n{err.read_text(errors='replace')[-1500:]}")
    return "\n".join(parts)


def rank_env(run_dir: Path, ranks: int) -> list[dict[str, str]]:
    out = []
    for r in range(ranks):
        text = (run_dir / "logs" / f"rank-{r}.out").read_text(errors="replace")
        out.append(dict(line.split("=", 1) for line in text.splitlines() if "=" in line))
    return out


def processes() -> list[str]:
    """Every process's command line (the rank's sleep, enroot and its mounts hold the image path)."""
    res = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True, check=True)
    return [line for line in res.stdout.splitlines() if "pytest" not in line]


def pyxis_containers() -> set[str]:
    """The step containers pyxis has made on every fake node (each node's enroot data folder)."""
    return {str(p) for p in ENROOT_STATE.glob("nid*/*/data/pyxis_*")}


def test_two_nodes_two_ranks_each_rank_is_its_slurm_task(sqsh, tmp_path):
    run_dir = tmp_path / "run"
    res, _ = launch(sqsh, run_dir, "--site", "generic-slurm", "-N", "2", "--ntasks-per-node", "2",
                    "--env", "HPCAI_TEST_VALUE=a,b c", cmd=["env"])
    assert res.returncode == 0, explain(res, run_dir)
    seen = rank_env(run_dir, 4)
    assert [(e["RANK"], e["SLURM_PROCID"], e["LOCAL_RANK"], e["WORLD_SIZE"]) for e in seen] == [
        ("0", "0", "0", "4"), ("1", "1", "1", "4"), ("2", "2", "0", "4"), ("3", "3", "1", "4")], seen
    assert all(e["RANK"] == e["SLURM_PROCID"] for e in seen)
    nodes = [e["SLURMD_NODENAME"] for e in seen]
    assert nodes[0] == nodes[1] != nodes[2] == nodes[3]
    assert {e["MASTER_ADDR"] for e in seen} == {nodes[0]}
    # --env's value came through srun's environment (--container-env names it), comma and space kept,
    # and the image's own PATH is the container's (the host's is not forced on it).
    assert {e["HPCAI_TEST_VALUE"] for e in seen} == {"a,b c"}
    assert all(e["PATH"].startswith("/opt/hpcai/bin:") for e in seen), seen[0]["PATH"]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["argv"][0] == "srun" and f"--container-image={sqsh}" in plan["argv"]
    assert "--container-env=HPCAI_TEST_VALUE" in plan["argv"] and "a,b c" not in " ".join(plan["argv"])
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"


def _host_lib(image: str, tmp_path: Path) -> tuple[Path, str]:
    """A host libfabric folder: a real copy of the image's own libfabric, so it loads, and its
    mapped path (/host/lib/…) tells it apart (as tests/integration/test_entrypoint_containers.py)."""
    probe = subprocess.run(["docker", "run", "--rm", "--entrypoint", "sh", image, "-c",
                            "readlink -f $(ldconfig -p | awk '/libfabric.so.1 /{print $NF; exit}')"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert probe.startswith("/"), probe
    lib = tmp_path / "hostlib"
    lib.mkdir(mode=0o755)
    cid = subprocess.run(["docker", "create", image], capture_output=True, text=True, check=True).stdout.strip()
    try:
        subprocess.run(["docker", "cp", "-L", f"{cid}:{probe}", str(lib / Path(probe).name)], check=True)
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)
    (lib / "libfabric.so.1").symlink_to(Path(probe).name)
    return lib, Path(probe).name


def test_the_sites_host_libfabric_is_mapped_first(sqsh, pytorch_cpu_image, tmp_path, site_path):
    lib, name = _host_lib(pytorch_cpu_image, tmp_path)
    sites = site_path("pyxis-fabric", f'description = "test cluster, pyxis, a host libfabric"\n'
                                     f'runtime = "pyxis"\nlibfabric = "{lib}"\n')
    run_dir = tmp_path / "run"
    res, _ = launch(sqsh, run_dir, "--site", "pyxis-fabric", "-N", "2", "--ntasks-per-node", "1",
                    cmd=["sh", "-c", PROBE], env={"HPCAI_SITE_PATH": sites})
    assert res.returncode == 0, explain(res, run_dir)
    plan = json.loads((run_dir / "plan.json").read_text())
    assert f"--container-mounts={lib}:/host/lib" in plan["argv"]
    for rank in range(2):
        text = (run_dir / "logs" / f"rank-{rank}.out").read_text()
        maps = sorted({line.split()[-1] for line in text.splitlines() if "libfabric" in line})
        assert maps == [f"/host/lib/{name}"], text  # the host's copy, not the image's
        assert "FI_INFO_OK" in text and f"RANK={rank}" in text, text


def test_a_failing_rank_ends_the_step_and_is_named(sqsh, tmp_path):
    run_dir = tmp_path / "run"
    script = 'if [ "$RANK" = 1 ]; then echo "rank one gives up" >&2; exit 3; fi; sleep 120'
    res, elapsed = launch(sqsh, run_dir, "--site", "generic-slurm", "-N", "2", "--ntasks-per-node", "2",
                          cmd=["sh", "-c", script])
    assert res.returncode != 0
    assert elapsed < 60, f"hpcai launch took {elapsed:.1f} s to notice the failed rank"
    assert "rank 1" in res.stderr, res.stderr
    assert "rank one gives up" in (run_dir / "logs" / "rank-1.err").read_text()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and status["failed_ranks"] == [1], status


def test_ctrl_c_stops_every_rank_and_leaves_no_container(sqsh, tmp_path):
    run_dir = tmp_path / "run"
    marks = tmp_path / "started"
    marks.mkdir()
    nap = f"300.{os.getpid()}7"  # a unique `sleep` argument to look for afterwards
    before = pyxis_containers()
    argv = [*HPCAI, "launch", "--image", sqsh, "--runtime", "pyxis", "--site", "generic-slurm", "-N", "2",
            "--ntasks-per-node", "2", "--output-dir", str(run_dir), "--bind", str(marks),
            "--cmd", "--", "sh", "-c", f'touch {marks}/rank-$RANK && exec sleep {nap}']
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while len(list(marks.iterdir())) < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(list(marks.iterdir())) == 4, f"ranks did not start: {sorted(marks.iterdir())}"
        assert len([p for p in processes() if f"sleep {nap}" in p]) == 4  # each rank, in its container
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, err
    assert elapsed < 30, f"{elapsed:.1f} s from Ctrl-C to exit"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "cancelled"
    deadline = time.monotonic() + 30  # Slurm reaps the step's processes asynchronously
    while [p for p in processes() if sqsh in p or f"sleep {nap}" in p] and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [p for p in processes() if sqsh in p or f"sleep {nap}" in p]
    assert left == [], f"container or rank processes left behind: {left}"
    # The test cluster starts SquashFS images in place (use_squashfuse=1): no unpacked container
    # is made, so none can be left; one left by a step would be in a node's enroot data folder.
    assert pyxis_containers() == before


def test_enroot_runtime_under_the_local_backend(sqsh, tmp_path):
    run_dir = tmp_path / "run"
    res, _ = launch(sqsh, run_dir, "--site", "local", "--ntasks-per-node", "2",
                    "--env", "HPCAI_TEST_VALUE=x y", runtime="enroot", cmd=["env"])
    assert res.returncode == 0, explain(res, run_dir)
    seen = rank_env(run_dir, 2)
    assert [(e["RANK"], e["WORLD_SIZE"], e["HPCAI_TEST_VALUE"]) for e in seen] == [("0", "2", "x y"), ("1", "2", "x y")]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["rank_argvs"][0][:3] == ["enroot", "start", "--rw"] and plan["rank_argvs"][0][-2:] == [sqsh, "env"]
