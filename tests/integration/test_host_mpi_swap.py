"""The host MPI swap for real: a site's `mpi_swap` through `hpcai launch`, the 15-host-mpi hook in the
real MPICH image (`mpich_cpu_image`: pytorch-cpu --mpi mpich, Debian's MPICH 4.0.2 packages), under
Docker, Charliecloud and Apptainer (the image as a SIF from `hpcai sif`), and an MPI program across
2 Slurm nodes with the swapped library.

The "host MPI" stands in for Cray MPICH, laid out as cray-mpich-abi is (`lib/libmpi.so.12`, the
upstream name): a copy of this machine's Debian libmpich.so.12 under a test prefix, with an ELF
note section added (objcopy) that marks it as the host's. It is the same upstream build as the
image's library (Debian ships one MPICH), so what this proves is the mechanism: the program in the
container asks for libmpich.so.12 (Debian's name), and the loader maps the host's file, by its bound
path and by the host inode /proc/self/maps records, not the image's, and MPI works with it. A
dependency (the host's libhwloc, reached through a `libhwloc.so.15` link, as Cray's libpmi.so.0
links are) is swapped in the same way.

The MPI program is a small C program built here with mpicc.mpich (Debian's MPICH, as in the image)
and bound into the container: it sums rank+1 over MPI_COMM_WORLD and prints its own /proc/self/maps
lines for the MPI and hwloc libraries. Across Slurm nodes it runs under Charliecloud: ch-run keeps
the PMI_FD socket srun --mpi=pmi2 hands each task, which `docker run` cannot pass into a container,
so under Docker it runs as an MPI world of one (the maps proof is the same).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "USER": os.environ.get("USER") or "root"}  # ch-run refuses to run without USER
MARK = "hpcai test: the host's MPI, not the image's"
# the bind destinations ch-run needs in the read-only SquashFS (tests/infra/ch-image.sh adds them)
CH_MOUNT_POINTS = "/host/usr /host/lib /host/mpi/lib /host/mpi/dep0 /var/spool/slurmd /run/munge /run/cxi"
PROGRAM = r"""#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    int rank, size, mine, total;
    char line[4096];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mine = rank + 1;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("SUM %d %d %d\n", rank, size, total);
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "libmpi") || strstr(line, "libhwloc")) printf("MAP %s", line);
    if (maps) fclose(maps);
    MPI_Finalize();
    return 0;
}
"""


def run(*argv: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                          env=kw.pop("env", ENV), **kw)


def loader_path(soname: str) -> Path:
    """This machine's file for SONAME (ldconfig -p), symlinks resolved."""
    for line in run("ldconfig", "-p").stdout.splitlines():
        if line.strip().startswith(soname + " ") and "=>" in line:
            return Path(line.split("=>", 1)[1].strip()).resolve()
    pytest.fail(f"{soname} is not installed on this machine (tests/infra/packages.txt, group tests)")


@pytest.fixture(scope="module")
def host_mpi(tmp_path_factory) -> dict[str, Path]:
    """A Cray-like host MPI tree under a test prefix: mpich/4.0.2/lib/libmpi.so.12 (a marked copy
    of the host's libmpich.so.12) and deps/libhwloc.so.15 -> the host's libhwloc copy."""
    root = tmp_path_factory.mktemp("host-mpi")
    lib, deps = root / "mpich" / "4.0.2" / "lib", root / "deps"
    lib.mkdir(parents=True)
    deps.mkdir()
    mpich = loader_path("libmpich.so.12")  # .../libmpich.so.12.2.2
    real = lib / mpich.name.replace("libmpich", "libmpi")
    note = root / "note.txt"
    note.write_text(MARK)
    res = run("objcopy", "--add-section", f".note.hpcai-host={note}", str(mpich), str(real))
    assert res.returncode == 0, res.stderr
    (lib / "libmpi.so.12").symlink_to(real.name)
    hwloc = loader_path("libhwloc.so.15")
    shutil.copy(hwloc, deps / hwloc.name)
    (deps / "libhwloc.so.15").symlink_to(hwloc.name)
    for path in (root, *root.rglob("*")):
        if not path.is_symlink():
            path.chmod(0o755)  # ch-run and Slurm's tasks read it as the calling user
    assert MARK.encode() in real.read_bytes() and MARK.encode() not in mpich.read_bytes()
    return {"root": root, "libmpi": real, "hwloc": deps / hwloc.name}


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    """The MPI program, built against Debian's MPICH (its DT_NEEDED is libmpich.so.12)."""
    folder = tmp_path_factory.mktemp("mpi-program")
    folder.chmod(0o755)
    (folder / "allreduce.c").write_text(PROGRAM)
    res = run("mpicc.mpich", "-o", str(folder / "allreduce"), str(folder / "allreduce.c"))
    assert res.returncode == 0, res.stderr
    return folder


@pytest.fixture
def site(host_mpi, site_path) -> dict[str, str]:
    """A site whose mpi_swap is the stand-in: glob over versions, a dep reached through a link."""
    root = host_mpi["root"]
    text = f"""description = "test: Debian's MPICH under a test prefix stands in for Cray MPICH"
backend = "srun"
runtime = "docker"
mpi = "pmix"
mpi_swap = {{ lib = "{root}/mpich/*/lib", deps = ["{root}/deps/libhwloc.so.15"], mpi = "pmi2" }}
[env]
# The fake nodes share this machine and its host name, so MPICH (ch4:ucx, Debian's) takes ranks
# on two of them for neighbours and UCX's shared memory then opens a peer's /proc/PID/fd, which
# the other Slurm task's process may not (permission denied); named segments in /dev/shm work.
UCX_POSIX_USE_PROC_LINK = "n"
# UCX's TCP transport opens every interface it lists: a docker build's veth, made and removed
# while MPI starts, then fails the rank ("init_worker No such device", seen in CI on 2026-11-27
# while another build ran). The one interface of the default route joins the fake nodes.
UCX_NET_DEVICES = "{_route_interface()}"
"""
    return {**ENV, "HPCAI_SITE_PATH": site_path("swap-test", text)}


def _route_interface() -> str:
    """The interface of the default route (/proc/net/route), else the loopback."""
    for line in Path("/proc/net/route").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) > 1 and fields[1] == "00000000":
            return fields[0]
    return "lo"


def launch(hpcai_exe, env, image: str, run_dir: Path, *options: str, cmd: list[str]) -> subprocess.CompletedProcess:
    return run(*hpcai_exe, "launch", "--site", "swap-test", "--image", image, "--output-dir", str(run_dir),
               *options, "--cmd", "--", *cmd, env=env, cwd=run_dir.parent)


# Apptainer across 2 fake nodes: each node's ranks share an instance (--containall: its own IPC
# namespace and /dev/shm), so MPICH (Debian's 4.0.2, ch4:ucx) joins the two instances over UCX's
# TCP transport. Its MPI_Finalize closes those endpoints by flushing them, and now and then (1 run
# in 3 to 7 here) a rank spins in ucp_worker_progress (uct_tcp_iface_progress) under
# PMPI_Finalize for ever while its peers, done with theirs, wait in the PMI barrier, where they
# no longer progress UCX (gdb on a hung run, 2026-11-26). Shared memory cannot join the instances
# (UCX: "shmat … Invalid argument"), and MPICH has no setting for the close. Nothing of hpcai's is
# involved: every rank has printed its sum and maps. So a launch that hangs there, and only
# there, is ended after FINALIZE_DEADLINE (SIGTERM: hpcai cancels the step) and launched again.
FINALIZE_TRIES = 3
FINALIZE_DEADLINE = 150  # seconds; a good run takes 10 to 30 here


def launch_within(deadline: float, hpcai_exe, env, image: str, run_dir: Path, *options: str,
                  cmd: list[str]) -> subprocess.CompletedProcess | None:
    """launch(), or None after DEADLINE seconds, once hpcai has ended the step (SIGTERM)."""
    argv = [*hpcai_exe, "launch", "--site", "swap-test", "--image", image, "--output-dir", str(run_dir),
            *options, "--cmd", "--", *cmd]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=run_dir.parent) as proc:
        try:
            out, err = proc.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.communicate(timeout=120)
            return None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def all_ranks_done_before_finalize(run_dir: Path, ranks: int = 4) -> bool:
    """Every rank printed its sum and its maps (the program's last output before MPI_Finalize)."""
    texts = [(run_dir / "logs" / f"rank-{r}.out") for r in range(ranks)]
    texts = [log.read_text(errors="replace") if log.is_file() else "" for log in texts]
    return all(f"SUM {r} " in text and "libmpi" in text for r, text in enumerate(texts))


def explain_hang(run_dir: Path) -> str:
    return "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-1500:]}"
                     for log in sorted((run_dir / "logs").glob("rank-*"))) if (run_dir / "logs").is_dir() else "no logs"


def maps_of(text: str) -> dict[str, tuple[str, int]]:
    """MAP lines -> {mapped path: (device, inode)}."""
    out = {}
    for line in text.splitlines():
        if line.startswith("MAP "):
            fields = line.split()
            out[fields[-1]] = (fields[4], int(fields[5]))
    return out


def explain(res: subprocess.CompletedProcess, run_dir: Path) -> str:
    parts = [f"exit {res.returncode}\n{res.stderr[-3000:]}"]
    for log in sorted((run_dir / "logs").glob("rank-*")) if (run_dir / "logs").is_dir() else ():
        parts.append(f"--- {log.name} ---\n{log.read_text(errors='replace')[-2000:]}")
    return "\n".join(parts)


def assert_host_mapped(text: str, host_mpi: dict[str, Path]) -> None:
    """The loader mapped the host's marked libmpi (bound path, host inode) and hwloc, and no
    libmpich of the image."""
    maps = maps_of(text)
    libmpi = f"/host/mpi/lib/{host_mpi['libmpi'].name}"
    hwloc = f"/host/mpi/dep0/{host_mpi['hwloc'].name}"
    assert libmpi in maps and hwloc in maps, text
    assert maps[libmpi][1] == host_mpi["libmpi"].stat().st_ino, (maps, text)
    assert maps[hwloc][1] == host_mpi["hwloc"].stat().st_ino, (maps, text)
    assert not [p for p in maps if "libmpich" in p], maps


@pytest.mark.docker
def test_docker_maps_the_host_libmpi_and_its_dependency(mpich_cpu_image, host_mpi, program, site,
                                                        hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res = launch(hpcai_exe, site, mpich_cpu_image, run_dir, "--backend", "local", "--bind", str(program),
                 cmd=[str(program / "allreduce")])
    out = (run_dir / "logs" / "rank-0.out").read_text(errors="replace") if (run_dir / "logs").is_dir() else ""
    assert res.returncode == 0, explain(res, run_dir)
    assert "SUM 0 1 1" in out, out
    assert_host_mapped(out, host_mpi)
    plan = json.loads((run_dir / "plan.json").read_text())
    assert f"{host_mpi['libmpi'].parent}:/host/mpi/lib" in plan["binds"]
    assert plan["env"]["HPCAI_HOST_MPI_DEPS"] == f"libhwloc.so.15=/host/mpi/dep0/{host_mpi['hwloc'].name}"

    # --no-host-mpi: the image's own Debian libmpich, the same program
    own_dir = tmp_path / f"{tmp_path.name}-own"
    res = launch(hpcai_exe, site, mpich_cpu_image, own_dir, "--backend", "local", "--no-host-mpi",
                 "--bind", str(program), cmd=[str(program / "allreduce")])
    own = (own_dir / "logs" / "rank-0.out").read_text(errors="replace")
    assert res.returncode == 0 and "SUM 0 1 1" in own, explain(res, own_dir)
    assert [p for p in maps_of(own) if "libmpi" in p] == [str(loader_path("libmpich.so.12"))], own


@pytest.mark.docker
def test_docker_check_reports_the_host_mpi(mpich_cpu_image, host_mpi):
    lib = host_mpi["libmpi"].parent
    res = run("docker", "run", "--rm", "-v", f"{lib}:/host/mpi/lib:ro", mpich_cpu_image, "--check")
    line = next((x for x in res.stdout.splitlines() if x.startswith("mpi library:")), "")
    assert res.returncode == 0 and res.stdout.splitlines()[-1] == "OK", res.stdout + res.stderr
    assert f"libmpich.so.12 -> /host/mpi/lib/{host_mpi['libmpi'].name}" in line and "(source: host)" in line
    strict = run("docker", "run", "--rm", "-v", f"{host_mpi['root'] / 'deps'}:/host/mpi/lib:ro",
                 "-e", "HPCAI_STRICT_MPI=1", mpich_cpu_image, "--check")
    assert strict.returncode == 1
    assert strict.stdout.splitlines()[-1] == "FAIL: no usable libmpi.so.12 in /host/mpi/lib; using the image's MPI"


@pytest.mark.docker
def test_an_open_mpi_image_is_refused_in_one_line(pytorch_cpu_image, site, hpcai_exe, tmp_path):
    run_dir = tmp_path / "refused"
    res = launch(hpcai_exe, site, pytorch_cpu_image, run_dir, "--backend", "local", "--host-mpi", cmd=["true"])
    assert (res.returncode, res.stdout, not run_dir.exists()) == (2, "", True)
    assert res.stderr.strip().splitlines() == [
        "error: --host-mpi swaps the host's MPICH-ABI libmpi.so.12 into an MPICH image; this image has "
        "Open MPI (hpcai.mpi=ompi): build it with --mpi mpich, or drop --host-mpi"]
    # not asked for: the Open MPI image runs with its own MPI, nothing of the swap in its plan
    plain = launch(hpcai_exe, site, pytorch_cpu_image, tmp_path / "plain", "--backend", "local", "--dry-run",
                   cmd=["true"])
    assert plain.returncode == 0 and "/host/mpi" not in plain.stdout, plain.stdout + plain.stderr


@pytest.fixture(scope="module")
def mpich_squashfs(mpich_cpu_image, ch_squashfs) -> str:
    """The MPICH image as a Charliecloud SquashFS, with /host/mpi/{lib,dep0} as mount points."""
    return ch_squashfs(mpich_cpu_image, CH_MOUNT_POINTS)


@pytest.mark.slurm
@pytest.mark.docker
@pytest.mark.charliecloud
def test_charliecloud_two_nodes_sum_right_with_the_host_mpi(mpich_squashfs, host_mpi, program, site,
                                                            hpcai_exe, tmp_path):
    run_dir = tmp_path / tmp_path.name
    res = launch(hpcai_exe, site, mpich_squashfs, run_dir, "--runtime", "charliecloud", "--host-mpi",
                 "-N", "2", "--ntasks-per-node", "2", "--bind", str(program), cmd=[str(program / "allreduce")])
    try:
        assert res.returncode == 0, explain(res, run_dir)
        plan = json.loads((run_dir / "plan.json").read_text())
        assert "--mpi=pmi2" in plan["argv"]  # the host MPI's own PMI type (mpi_swap.mpi)
        for rank in range(4):
            out = (run_dir / "logs" / f"rank-{rank}.out").read_text(errors="replace")
            assert f"SUM {rank} 4 10" in out, (rank, out)  # 1 + 2 + 3 + 4: one world over both nodes
            assert_host_mapped(out, host_mpi)
        for err in (run_dir / "logs").glob("rank-*.err"):
            assert "warning" not in err.read_text(errors="replace"), err.read_text()
        assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    finally:
        # ch-run shares the host's /tmp: the hook's per-job folders (hpcai-mpi-USER-JOB-STEP-RANK)
        for path in Path("/tmp").glob(f"hpcai-mpi-{ENV['USER']}-[0-9]*"):
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def mpich_sif(mpich_cpu_image, tmp_path_factory) -> str:
    """The MPICH image as a SIF made by `hpcai sif`, kept in HPCAI_APPTAINER_CACHE under its image Id
    (Apptainer makes the bind destinations itself: no mount points needed)."""
    from hpcai.image.engine import image_id

    cache = Path(os.environ.get("HPCAI_APPTAINER_CACHE", "/var/tmp/hpcai-sif"))
    cache.mkdir(parents=True, exist_ok=True)
    sif = cache / f"mpich-cpu-{image_id('docker', mpich_cpu_image).split(':')[-1][:16]}.sif"
    if not sif.is_file():
        res = run(*[sys.executable, "-m", "hpcai"], "sif", mpich_cpu_image, "-o", str(sif), timeout=1800,
                  env={**ENV, "HPCAI_WORK_DIR": str(tmp_path_factory.mktemp("sif-mpich"))})
        assert res.returncode == 0, res.stderr[-4000:]
    return str(sif)


@pytest.mark.slurm
@pytest.mark.docker
@pytest.mark.apptainer
def test_apptainer_two_nodes_sum_right_with_the_host_mpi(mpich_sif, host_mpi, program, site, hpcai_exe, tmp_path):
    for attempt in range(1, FINALIZE_TRIES + 1):
        run_dir = tmp_path / f"{tmp_path.name}-{attempt}"
        res = launch_within(FINALIZE_DEADLINE, hpcai_exe, site, mpich_sif, run_dir, "--runtime", "apptainer",
                            "--userns", "--host-mpi", "-N", "2", "--ntasks-per-node", "2", "--bind", str(program),
                            cmd=[str(program / "allreduce")])
        if res is not None or not all_ranks_done_before_finalize(run_dir):
            break
        warnings.warn(f"attempt {attempt}: MPICH 4.0.2's ch4:ucx MPI_Finalize hung after every rank's output "
                      "(see FINALIZE_TRIES); launching again", stacklevel=1)
    assert res is not None, f"every attempt hung in MPI_Finalize: {explain_hang(run_dir)}"
    assert res.returncode == 0, explain(res, run_dir)
    plan = json.loads((run_dir / "plan.json").read_text())
    assert "--mpi=pmi2" in plan["argv"]  # the host MPI's own PMI type, through Apptainer's inherited PMI_FD
    for rank in range(4):
        out = (run_dir / "logs" / f"rank-{rank}.out").read_text(errors="replace")
        assert f"SUM {rank} 4 10" in out, (rank, out)
        assert_host_mapped(out, host_mpi)
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
