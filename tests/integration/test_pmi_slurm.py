"""hpcai.run.pmi's table proven on the real Slurm cluster, then the launcher using it.

1. Each (MPI, srun --mpi type) pair, with Debian's Open MPI 4.1 (the MPI of the CPU image, through
   python3-mpi4py) and Debian's MPICH 4.0 (a C program built with mpicc.mpich), on 2 nodes: the
   ranks form one world of 2 exactly when the table says the type serves that MPI; otherwise they
   start as singletons or die in MPI_Init.
2. `hpcai launch` with the real pytorch-cpu image (label hpcai.mpi=ompi) on a Cray-like site whose
   default is pmi2: mpi-allreduce runs under --mpi=pmix as one world of 4; `--mpi pmi2` given by
   hand is refused before anything starts.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from engines import CLUSTER_MPI_ENV

from hpcai.run.pmi import PMI_FOR_MPI

pytestmark = pytest.mark.slurm
ENV = {**os.environ, "USER": os.environ.get("USER") or "root"}
TYPES = ("pmix", "pmi2", "cray_shasta")
SIZE_C = r"""#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("rank %d size %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
"""
MPI4PY = "from mpi4py import MPI; c = MPI.COMM_WORLD; print('rank', c.Get_rank(), 'size', c.Get_size())"


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, list[str]]:
    folder = tmp_path_factory.mktemp("pmi")
    (folder / "size.c").write_text(SIZE_C)
    subprocess.run(["mpicc.mpich", "-o", str(folder / "size-mpich"), str(folder / "size.c")], check=True)
    return {"ompi": ["/usr/bin/python3", "-c", MPI4PY], "mpich": [str(folder / "size-mpich")]}


@pytest.mark.parametrize("mpi", sorted(PMI_FOR_MPI))
@pytest.mark.parametrize("pmi", TYPES)
def test_the_table_says_which_types_give_one_world(programs, mpi, pmi, tmp_path):
    res = subprocess.run(["srun", "-N2", "-n2", f"--mpi={pmi}", *programs[mpi]], capture_output=True, text=True,
                         timeout=120, env=ENV, cwd=tmp_path)
    worlds = sorted(line for line in res.stdout.splitlines() if line.startswith("rank "))
    if pmi in PMI_FOR_MPI[mpi]:
        assert res.returncode == 0 and worlds == ["rank 0 size 2", "rank 1 size 2"], res.stdout + res.stderr
    else:  # singletons (two rank 0 of 1) or a failed MPI_Init: never one world
        assert worlds in (["rank 0 size 1", "rank 0 size 1"], []), res.stdout + res.stderr
        assert res.returncode != 0 or worlds


CRAY_LIKE = """description = "a Cray EX-like test site: pmi2 by default, PMIx on offer"
backend = "srun"
runtime = "docker"
mpi = "pmi2"
mpi_types = ["pmix", "pmi2", "cray_shasta"]
binds = ["/var/spool/slurmd"]
[env]
""" + "".join(f'{name} = "{value}"\n' for name, _, value in (env.partition("=") for env in CLUSTER_MPI_ENV))


@pytest.mark.docker
@pytest.mark.slow
def test_launch_picks_pmix_for_the_open_mpi_image(pytorch_cpu_image, hpcai_exe, tmp_path, site_path):
    env = {**ENV, "HPCAI_SITE_PATH": site_path("cray-like", CRAY_LIKE)}
    base = [*hpcai_exe, "launch", "--image", pytorch_cpu_image, "--site", "cray-like", "-N", "2",
            "--ntasks-per-node", "2"]
    refused = tmp_path / "refused"
    res = subprocess.run([*base, "--mpi", "pmi2", "-o", str(refused), "mpi-allreduce"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert res.returncode == 2 and not refused.exists()
    assert res.stderr.strip().splitlines() == [
        "error: --mpi pmi2 cannot start one MPI world for this image's Open MPI (PMIx only): its ranks would "
        "start as singletons; use --mpi pmix or --mpi pspmix"]

    run = tmp_path / tmp_path.name  # unique: names the docker label hpcai.run
    res = subprocess.run([*base, "-o", str(run), "mpi-allreduce", "max_bytes=65536", "iters=5", "warmup=1"],
                         capture_output=True, text=True, env=env, timeout=600)
    rank0 = (run / "logs" / "rank-0.out").read_text(errors="replace") if (run / "logs").is_dir() else ""
    assert res.returncode == 0, res.stderr[-3000:] + rank0[-3000:]
    assert json.loads((run / "plan.json").read_text())["geometry"]["mpi"] == "pmix"
    assert "# ranks 4 iters 5" in rank0
