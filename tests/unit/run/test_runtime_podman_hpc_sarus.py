"""podman-hpc (NERSC) and Sarus (CSCS): token lists only. Neither runs here: Sarus has no Debian
or PyPI package (the PyPI `sarus` is an unrelated gateway client), and podman-hpc 1.2.2 is on
PyPI but its modules bind Perlmutter's Cray MPICH, /dev/cxi* and Slurm spool and its migrate
needs its squash store, so nothing of it was run. The flags follow podman-hpc 1.2.2's
modules.d (gpu.yaml, mpich.yaml) and the Sarus user guide (`--mount=type=bind,source=,
destination=[,readonly]`, `--mpi`, `-e/--env`, `--entrypoint` without a value, `sarus pull`)."""

from __future__ import annotations

import pytest
from plan_helpers import CRAY, FakeHost

from hpcai.run.backends import srun
from hpcai.run.plan import LaunchOptions, plan_launch
from hpcai.run.runtimes import ContainerSpec, get_runtime

SPEC = ContainerSpec(image="nersc/pytorch:25.02.01", command=("/opt/hpcai/bin/hpcai-bench", "nccl-tests"),
                     binds=(("/global/cfs", "/cfs"), ("/ds", "/data:ro")), env=(("A", "1 2"),),
                     secret_names=("HF_TOKEN",), gpu="nvidia", mpi="mpich")
FORWARD = ["-e", "SLURM_*", "-e", "SLURMD_NODENAME", "-e", "SLINGSHOT_*", "-e", "PMI*", "-e", "PALS_*",
           "-e", "OMPI_*", "-e", "HPCAI_*", "-e", "CUDA_VISIBLE_DEVICES", "-e", "ROCR_VISIBLE_DEVICES",
           "-e", "HIP_VISIBLE_DEVICES"]


def test_podman_hpc_mpich_gpu_image():
    assert get_runtime("podman-hpc").argv(SPEC) == [
        "podman-hpc", "run", "--rm", "--mpi", "--gpu", *FORWARD, "-v", "/global/cfs:/cfs", "-v", "/ds:/data:ro",
        "-e", "A=1 2", "-e", "HF_TOKEN", "nersc/pytorch:25.02.01", "/opt/hpcai/bin/hpcai-bench", "nccl-tests"]


def test_podman_hpc_without_mpich_keeps_host_network_and_ipc():
    from dataclasses import replace

    argv = get_runtime("podman-hpc").argv(replace(SPEC, mpi="openmpi", gpu="none", entrypoint=""))
    assert argv[:7] == ["podman-hpc", "run", "--rm", "--network", "host", "--ipc", "host"]
    assert "--mpi" not in argv and "--gpu" not in argv
    assert argv[-4:] == ["--entrypoint", "/opt/hpcai/bin/hpcai-bench", "nersc/pytorch:25.02.01", "nccl-tests"]


def test_sarus_mpich_image_and_mounts():
    assert get_runtime("sarus").argv(SPEC) == [
        "sarus", "run", "--mpi", "--mount=type=bind,source=/global/cfs,destination=/cfs",
        "--mount=type=bind,source=/ds,destination=/data,readonly", "--env=A=1 2",
        "nersc/pytorch:25.02.01", "/opt/hpcai/bin/hpcai-bench", "nccl-tests"]


def test_sarus_mpi_hook_only_for_mpich_and_no_entrypoint_is_empty():
    from dataclasses import replace

    argv = get_runtime("sarus").argv(replace(SPEC, mpi="", entrypoint=""))
    assert "--mpi" not in argv and argv[-4:] == ["--entrypoint", "nersc/pytorch:25.02.01",
                                                 "/opt/hpcai/bin/hpcai-bench", "nccl-tests"]


@pytest.mark.parametrize("runtime,prepare", [("podman-hpc", ["podman-hpc", "migrate", "img:1"]),
                                             ("sarus", ["sarus", "pull", "img:1"])])
def test_planned_under_srun_without_a_shim_with_the_image_prepared_first(tmp_path, runtime, prepare):
    plan = plan_launch(LaunchOptions(image="img:1", payload="nccl-tests", site="cray-ex-nvidia", runtime=runtime,
                                     nodes=2, output_dir=str(tmp_path / "run")), host=CRAY, check=False)
    assert plan.prepare == [prepare]
    assert "hpcai-shim" not in " ".join(plan.argv)  # the runtime passes SLURM_* on: no shim
    start = plan.argv.index(runtime)
    assert plan.argv[0] == "srun" and plan.argv[start + 1] == "run"
    tx = "FI_CXI_DEFAULT_TX_SIZE=2048"  # the Slingshot profile, passed as the runtime's own flag
    assert (["-e", tx] == plan.argv[plan.argv.index(tx) - 1:plan.argv.index(tx) + 1] if runtime == "podman-hpc"
            else f"--env={tx}" in plan.argv)
    assert any("may not be installed" in w for w in plan.warnings) == (runtime == "sarus")


def test_sarus_is_not_offered_on_cray_ex_nvidia(tmp_path):
    plan = plan_launch(LaunchOptions(image="img:1", payload="nccl-tests", site="cray-ex-nvidia", runtime="sarus",
                                     output_dir=str(tmp_path / "run")), host=FakeHost(), check=False)
    assert any("cray-ex-nvidia lists the runtimes apptainer, singularity, podman-hpc, charliecloud; sarus" in w
               for w in plan.warnings)


def test_a_failing_prepare_command_is_one_line(tmp_path):
    """Real commands stand in for sarus/podman-hpc: `false` fails, `true` passes."""
    plan = plan_launch(LaunchOptions(image="img:1", payload="nccl-tests", site="cray-ex-nvidia", runtime="sarus",
                                     output_dir=str(tmp_path / "run")), host=FakeHost(), check=False)
    plan.prepare = [["true"], ["sh", "-c", "echo 'pull denied' >&2; exit 3"]]
    assert srun._prepare(plan) == "error: sh -c echo 'pull denied' >&2; exit 3 failed (exit code 3): pull denied"
    plan.prepare = [["true"]]
    assert srun._prepare(plan) == ""
