"""LaunchPlan composition: exact token lists per backend × runtime × site, with a fake host."""

from __future__ import annotations

import pytest
from plan_helpers import CRAY, SHIM_PATH, FakeHost, check_golden

from hpcai.errors import UsageError
from hpcai.run.plan import LaunchOptions, plan_launch
from hpcai.run.runtimes.docker import SECCOMP_PROFILE

SHIM = ["/bin/sh", SHIM_PATH]
PASS = ["--pass", "SLURM_*", "--pass", "SLURMD_NODENAME", "--pass", "SLINGSHOT_*", "--pass", "PMI*",
        "--pass", "PALS_*", "--pass", "OMPI_*", "--pass", "HPCAI_*", "--pass", "CUDA_VISIBLE_DEVICES",
        "--pass", "ROCR_VISIBLE_DEVICES", "--pass", "HIP_VISIBLE_DEVICES"]
SLINGSHOT_ENV = ["APPTAINERENV_NCCL_SOCKET_IFNAME=hsn", "APPTAINERENV_NCCL_NET_GDR_LEVEL=PHB",
                 "APPTAINERENV_NCCL_CROSS_NIC=1", "APPTAINERENV_FI_MR_CACHE_MONITOR=userfaultfd",
                 "APPTAINERENV_FI_CXI_DISABLE_HOST_REGISTER=1", "APPTAINERENV_FI_CXI_DEFAULT_CQ_SIZE=131072",
                 "APPTAINERENV_FI_CXI_DEFAULT_TX_SIZE=2048", "APPTAINERENV_FI_CXI_RX_MATCH_MODE=hybrid",
                 "APPTAINERENV_FI_CXI_RDZV_EAGER_SIZE=0", "APPTAINERENV_FI_CXI_RDZV_THRESHOLD=0",
                 "APPTAINERENV_FI_CXI_RDZV_GET_MIN=0", "APPTAINERENV_FI_HMEM_CUDA_USE_GDRCOPY=1",
                 "APPTAINERENV_MPICH_GPU_SUPPORT_ENABLED=0", "APPTAINERENV_TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
                 "APPTAINERENV_NCCL_PROTO=^LL128"]  # entrypoints/hooks.d/slingshot-env.sh


def runtime_part(argv):
    """The runtime's tokens: what follows the shim's `--`."""
    return argv[argv.index("--", argv.index(SHIM_PATH)) + 1:]


def opts(tmp_path, **kw):
    kw.setdefault("image", "IMG.sif")
    kw.setdefault("output_dir", str(tmp_path / "run"))
    if "cmd" not in kw:
        kw.setdefault("payload", "nccl-tests")
    return LaunchOptions(**kw)


def test_slingshot_line_cray_ex_nvidia(tmp_path):
    """The issue's Cray EX line, planned: srun geometry from the site, newest host libfabric at
    /host/lib, /usr at /host/usr, the Slingshot environment, singularity run --nv."""
    run = tmp_path / "run"
    plan = plan_launch(opts(tmp_path, site="cray-ex-nvidia", runtime="singularity", nodes=2,
                            payload_args=("min_bytes=1M", "max_bytes=8G")), host=CRAY, check=False)
    assert plan.argv == [
        "srun", "--nodes=2", "--ntasks-per-node=4", "--cpus-per-task=72", "--gpus-per-node=4",
        "--mpi=pmi2", "--kill-on-bad-exit=1", "--distribution=*:block", "--cpu-bind=socket",
        f"--output={run}/logs/rank-%t.out", f"--error={run}/logs/rank-%t.err",
        *SHIM, "--forward", "env", "--prefix", "SINGULARITY", "--name", "hpcai-{jobid}-run-{node}",
        # the node's 4 ranks share one instance (its start command, then the ranks' exec into it)
        *[arg for token in ["singularity", "-q", "instance", "start", "--cleanenv", "--nv",
                            "--bind", "/opt/cray/libfabric/1.22.0/lib64:/host/lib", "--bind", "/usr:/host/usr",
                            "--bind", "/var/spool/slurmd", "--bind", "/run/cxi", "IMG.sif"]
          for arg in ("--start", token)],
        *PASS, "--master-addr", "nid001234", "--exit-dir", f"{run}/logs", "--",
        "env", *[e.replace("APPTAINERENV_", "SINGULARITYENV_") for e in SLINGSHOT_ENV],
        "singularity", "run", "--cleanenv", "instance://{group}", "nccl-tests", "min_bytes=1M", "max_bytes=8G"]
    assert plan.master_addr == "nid001234" and plan.master_port == 4242 % 4536 + 61000
    assert plan.job_id == "4242" and plan.geometry.in_allocation


def test_libfabric_falls_back_to_ldconfig(tmp_path):
    host = FakeHost(ldconfig="/usr/lib64")
    plan = plan_launch(opts(tmp_path, site="cray-ex-amd"), host=host, check=False)
    assert ("/usr/lib64", "/host/lib") == plan.binds[0]
    assert "--rocm" in plan.argv and "--gpus-per-node=8" in plan.argv and "--cpus-per-task=7" in plan.argv
    host = FakeHost()
    plan = plan_launch(opts(tmp_path, site="cray-ex-amd"), host=host, check=False)
    assert all(dst != "/host/lib" for _, dst in plan.binds)
    assert any("no host libfabric" in w for w in plan.warnings)


def test_jsc_i_suffix_resolved_and_unresolved(tmp_path):
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_NODELIST": "jwb[0012-0015]"}
    host = FakeHost(env=env, dns={"jwb0012i": "10.13.0.12"})
    plan = plan_launch(opts(tmp_path, site="jsc-ib", nodes=4), host=host, check=False)
    assert plan.master_addr == "10.13.0.12" and plan.master_port == 7010
    assert plan.argv[:9] == ["srun", "--nodes=4", "--ntasks-per-node=4", "--cpus-per-task=12",
                             "--gpus-per-node=4", "--mpi=pspmix", "--kill-on-bad-exit=1",
                             "--cpu-bind=v", f"--output={tmp_path}/run/logs/rank-%t.out"]
    i = plan.argv.index("--suffix")
    assert plan.argv[i:i + 6] == ["--suffix", "i", "--master-addr", "10.13.0.12", "--port", "7010"]
    part = runtime_part(plan.argv)
    tail = part[part.index("apptainer"):]
    assert tail == ["apptainer", "exec", "--cleanenv", "instance://{group}",  # the node's 4 ranks: one instance
                    "/opt/hpcai/bin/hpcai-entrypoint", "/opt/hpcai/bin/hpcai-bench", "nccl-tests"]
    start = [token for i, token in enumerate(plan.argv) if plan.argv[i - 1] == "--start"]
    assert start == ["apptainer", "-q", "instance", "start", "--cleanenv", "--nv", "IMG.sif"]
    unresolved = plan_launch(opts(tmp_path, site="jsc-ib", nodes=4), host=FakeHost(env=env), check=False)
    assert unresolved.master_addr == "jwb0012i"
    assert any("jwb0012i does not resolve" in w for w in unresolved.warnings)


def test_step_smaller_than_allocation_leaves_master_to_the_shim(tmp_path):
    plan = plan_launch(opts(tmp_path, site="generic-slurm", nodes=1), host=CRAY, check=False)
    assert plan.master_addr is None and "--master-addr" not in plan.argv


def test_outside_allocation_passes_partition_account_time(tmp_path):
    plan = plan_launch(opts(tmp_path, site="generic-slurm", runtime="charliecloud", nodes=2,
                            partition="gpu", account="proj1", time="00:10:00",
                            image=str(tmp_path / "img.sqfs")), host=FakeHost(), check=False)
    run = tmp_path / "run"
    assert plan.argv == [
        "srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
        "--partition=gpu", "--account=proj1", "--time=00:10:00",
        f"--output={run}/logs/rank-%t.out", f"--error={run}/logs/rank-%t.err",
        "ch-run", "--set-env", str(tmp_path / "img.sqfs"), "--",
        "/opt/hpcai/bin/hpcai-entrypoint", "/opt/hpcai/bin/hpcai-bench", "nccl-tests"]
    assert plan.job_id is None and plan.master_port is None


def test_charliecloud_image_folder_without_environment_file(tmp_path):
    (tmp_path / "img").mkdir()
    plan = plan_launch(opts(tmp_path, site="generic-slurm", runtime="charliecloud", image=str(tmp_path / "img")),
                       host=FakeHost(), check=False)
    assert "--set-env" not in plan.argv
    (tmp_path / "img" / "ch").mkdir()
    (tmp_path / "img" / "ch" / "environment").write_text("PATH=/opt/venv/bin:/usr/bin\n")
    plan = plan_launch(LaunchOptions(image=str(tmp_path / "img"), payload="sanity", site="generic-slurm",
                                     runtime="charliecloud", output_dir=str(tmp_path / "r2")),
                       host=FakeHost(), check=False)
    assert "--set-env" in plan.argv


def test_charliecloud_with_entrypoint_needs_no_shim(tmp_path):
    """ch-run inherits SLURM_*; the entrypoint makes rank variables, hpcai adds what it knows."""
    plan = plan_launch(opts(tmp_path, site="generic-slurm", runtime="charliecloud", nodes=2),
                       host=CRAY, check=False)
    assert SHIM_PATH not in plan.argv
    i = plan.argv.index("ch-run")
    assert plan.argv[i:i + 5] == ["ch-run", "--set-env", "--env-no-expand", "--set-env=MASTER_ADDR=nid001234",
                                  f"--set-env=MASTER_PORT={4242 % 4536 + 61000}"]
    jsc = plan_launch(opts(tmp_path, site="jsc-ib", runtime="charliecloud", cmd=("hostname",)), host=FakeHost(),
                      check=False)  # 4 ranks per node: an MPI payload would join them (through the shim)
    assert "--set-env=HPCAI_MASTER_ADDR_SUFFIX=i" in jsc.argv and "--set-env=MASTER_PORT=7010" in jsc.argv
    bare = plan_launch(opts(tmp_path, site="generic-slurm", runtime="charliecloud", cmd=("true",),
                            no_entrypoint=True), host=FakeHost(), check=False)
    assert SHIM_PATH in bare.argv  # no entrypoint: the shim sets the rank variables


def test_charliecloud_mpi_ranks_of_a_node_share_one_container(tmp_path):
    """ch-run --join for an MPI world (srun, mpiexec) with ranks sharing a node (CMA needs one user namespace):
    the peer count in argv, the group's name per node from the shim; never for a command that
    starts no MPI world (its ranks may end before the others start, and --join needs them all)."""
    plan = plan_launch(opts(tmp_path, site="generic-slurm", runtime="charliecloud", nodes=2, ntasks_per_node=2,
                            payload="mpi-allreduce"), host=FakeHost(), check=False)
    i = plan.argv.index(SHIM_PATH)
    assert plan.argv[i + 1:i + 5] == ["--forward", "join-tag", "--name", "hpcai-{jobid}-run-{node}"]
    assert runtime_part(plan.argv)[:2] == ["ch-run", "--join-ct=2"]
    cmd = plan_launch(opts(tmp_path, site="generic-slurm", runtime="charliecloud", nodes=2, ntasks_per_node=2,
                           cmd=("hostname",)), host=FakeHost(), check=False)
    assert SHIM_PATH not in cmd.argv and not any(t.startswith("--join") for t in cmd.argv)
    mpi = plan_launch(opts(tmp_path, site="generic-slurm", runtime="charliecloud", nodes=2, ntasks_per_node=2,
                           cmd=("python", "x.py"), mpi="pmix"), host=FakeHost(), check=False)
    assert "--join-ct=2" in mpi.argv  # --mpi: the command is an MPI world
    one = plan_launch(opts(tmp_path, site="generic-slurm", runtime="charliecloud", nodes=2,
                           payload="mpi-allreduce"), host=FakeHost(), check=False)
    assert not any(t.startswith("--join") for t in one.argv)  # one rank per node: nothing to share
    local = plan_launch(opts(tmp_path, site="local", runtime="charliecloud", backend="local", ntasks_per_node=2,
                             cmd=("python", "x.py"), mpi="pmix"), host=FakeHost(), check=False)
    assert not any(t.startswith("--join") for a in local.rank_argvs for t in a)  # worlds of one, no shim


def test_srun_docker_names_containers_per_rank_through_the_shim(tmp_path):
    plan = plan_launch(opts(tmp_path, site="generic-slurm", runtime="docker", image="img:1",
                            env=("A=1",)), host=FakeHost(), check=False)
    i = plan.argv.index(SHIM_PATH)
    assert plan.argv[i + 1:i + 5] == ["--forward", "flags", "--name", "hpcai-{jobid}-run-{rank}"]
    assert runtime_part(plan.argv) == [
        "docker", "run", "--rm", "--network", "host", "--ipc", "host", "--pid", "host",
        "--security-opt", f"seccomp={SECCOMP_PROFILE}", "--label", "hpcai.run=run", "-e", "A=1", "img:1", "/opt/hpcai/bin/hpcai-bench", "nccl-tests"]


def test_per_gpu_copies(tmp_path):
    plan = plan_launch(opts(tmp_path, site="cray-ex-nvidia", per_gpu=True), host=CRAY, check=False)
    assert "--gpus-per-task=1" in plan.argv and "--ntasks-per-node=4" in plan.argv
    assert "--cpus-per-task=72" in plan.argv and "--per-gpu" in plan.argv
    assert plan.to_json()["per_gpu"] is True
    local = plan_launch(opts(tmp_path, site="local", per_gpu=True, gpus_per_node=2, image="img"),
                        host=FakeHost(), check=False)
    assert [e["CUDA_VISIBLE_DEVICES"] if "CUDA_VISIBLE_DEVICES" in e else e["HPCAI_COPY"]
            for e in local.rank_envs] == ["0", "1"]
    assert all(e["WORLD_SIZE"] == "1" and e["RANK"] == "0" for e in local.rank_envs)
    with pytest.raises(UsageError, match="--per-gpu needs GPUs"):
        plan_launch(opts(tmp_path, site="generic-slurm", per_gpu=True), host=FakeHost(), check=False)


def test_mpiexec_backend(tmp_path):
    plan = plan_launch(opts(tmp_path, site="cray-ex-nvidia", backend="mpiexec", nodes=2,
                            nodelist="/var/spool/pbs/aux/123"), host=FakeHost(), check=False)
    assert plan.argv[:11] == ["mpiexec", "-n", "8", "-ppn", "4", "--cpu-bind", "socket",
                              "-d", "72", "--hostfile", "/var/spool/pbs/aux/123"]
    i = plan.argv.index("--log-dir")  # PALS has no per-rank output files: the shim writes them
    assert plan.argv[i:i + 3] == ["--log-dir", f"{tmp_path}/run/logs", "--"]
    assert not any(a.startswith("--output=") for a in plan.argv)


def test_local_backend_rank_commands(tmp_path):
    plan = plan_launch(opts(tmp_path, site="local", ntasks_per_node=2, image="img:1",
                            cmd=("hostname",), no_entrypoint=True), host=FakeHost(), check=False)
    assert plan.rank_argvs[1] == [
        "docker", "run", "--rm", "--network", "host", "--ipc", "host", "--pid", "host",
        "--security-opt", f"seccomp={SECCOMP_PROFILE}", "--name=hpcai-run-1",
        "--label", "hpcai.run=run", "-e", "RANK=1", "-e", "LOCAL_RANK=1", "-e", "WORLD_SIZE=2",
        "-e", "LOCAL_WORLD_SIZE=2", "-e", "NODE_RANK=0", "-e", "MASTER_ADDR=127.0.0.1",
        "-e", "MASTER_PORT=29555", "--entrypoint", "hostname", "img:1"]
    assert plan.container_names == ["hpcai-run-0", "hpcai-run-1"]
    with pytest.raises(UsageError, match="--nodes must be 1"):
        plan_launch(opts(tmp_path, site="local", nodes=2, image="img"), host=FakeHost(), check=False)


def test_user_env_wins_over_site_env_and_rank_env(tmp_path):
    """MASTER_PORT is the user's to set; a rank variable is not (one value for every rank would
    make them all one rank: issue 25), so -e RANK=9 is refused in one line."""
    plan = plan_launch(opts(tmp_path, site="local", image="img", env=("MASTER_PORT=5000",)),
                       host=FakeHost(), check=False)
    assert "MASTER_PORT=5000" in plan.argv and plan.master_port == 5000
    with pytest.raises(UsageError, match="--env RANK: hpcai sets RANK for each rank"):
        plan_launch(opts(tmp_path, site="local", image="img", env=("MASTER_PORT=5000", "RANK=9")),
                    host=FakeHost(), check=False)


def test_energy_wraps_each_rank_command(tmp_path, monkeypatch):
    """--energy puts hpcai.run.energy's wrapper around the per-rank command (fake wrapper)."""
    import hpcai.run.energy as energy

    monkeypatch.setattr(energy, "wrap_argv", lambda argv, d: ["measure", d, "--", *argv])
    plan = plan_launch(opts(tmp_path, site="generic-slurm", energy=True), host=FakeHost(), check=False)
    i = plan.argv.index("measure")
    assert plan.argv[i:i + 3] == ["measure", f"{tmp_path}/run/energy", "--"]
    assert plan.argv[i + 3:i + 3 + len(SHIM)] == SHIM
    local = plan_launch(opts(tmp_path, site="local", image="i", energy=True), host=FakeHost(), check=False)
    assert local.rank_argvs[0][:3] == ["measure", f"{tmp_path}/run/energy", "--"]


def test_a_user_bind_replaces_the_site_bind_to_the_same_destination(tmp_path):
    """Cray EX binds the host libfabric to /host/lib; a user's own /host/lib must win, once, with a note,
    also in Apptainer's comma form."""
    plan = plan_launch(opts(tmp_path, site="cray-ex-nvidia", binds=("/mine/lib:/host/lib,/opt/x:/opt/x",)),
                       host=CRAY, check=False)
    host_lib = [(src, dst) for src, dst in plan.binds if dst == "/host/lib"]
    assert host_lib == [("/mine/lib", "/host/lib")]
    assert ("/opt/x", "/opt/x") in plan.binds and ("/usr", "/host/usr") in plan.binds
    assert "--bind /mine/lib:/host/lib replaces the site's /opt/cray/libfabric/1.22.0/lib64:/host/lib" in plan.warnings
    argv = [token for i, token in enumerate(plan.argv) if plan.argv[i - 1] == "--start"]  # the instance's binds
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"].count("/mine/lib:/host/lib") == 1
    assert not any(a.endswith(":/host/lib") and a != "/mine/lib:/host/lib" for a in argv)


@pytest.mark.parametrize("kw, message", [
    ({"site": "nope"}, "unknown site 'nope'; valid: alcf-polaris, cray-ex-amd, cray-ex-nvidia, cscs-alps, generic-ib, generic-slurm, "
     "jedi, jsc-ib, jureca-a100, jureca-gc200, jureca-gh200, jureca-h100, jureca-mi250, jureca-waih100, llnl-elcap, local"),
    ({"runtime": "rkt"}, "unknown runtime 'rkt'; valid: apptainer, ce, charliecloud, docker, enroot, podman, podman-hpc, pyxis, sarus, singularity"),
    ({"backend": "lsf"}, "unknown backend 'lsf'; valid: flux, local, mpiexec, srun"),
    ({"mpi": "pmi9"}, "unknown mpi type 'pmi9'; valid: cray_shasta, none, pmi2, pmix, pspmix"),
    ({"payload": "nosuch"}, "unknown payload 'nosuch'; valid: "),
    ({"payload_args": ("novalue",)}, "expected var=value"),
    ({"env": ("1BAD=x",)}, "expected KEY=VALUE"),
    ({"env": ("HPCAI_TEST_UNSET_VAR",)}, "not set in this environment"),
    ({"binds": ("relative:/x",)}, "absolute paths"),
    ({"binds": ("/a,b:/c",)}, "expected /SRC[:/DST[:ro|rw]][,…]"),
    ({"binds": ("/a:/b:/c",)}, "no ':' inside a path"),
    ({"nodes": 0}, "--nodes must be between 1 and 100000, got 0"),
    ({"cmd": ("x",), "payload": "sanity"}, "not both"),
])
def test_bad_input_is_a_usage_error(tmp_path, kw, message):
    kw.setdefault("site", "generic-slurm")
    with pytest.raises(UsageError) as exc:
        plan_launch(opts(tmp_path, **kw), host=FakeHost(), check=False)
    assert message in str(exc.value)


def test_missing_image_file_fails_before_start(tmp_path):
    with pytest.raises(UsageError, match="image not found: .*nothere.sif"):
        plan_launch(opts(tmp_path, site="generic-slurm", image=str(tmp_path / "nothere.sif")),
                    host=FakeHost(), check=True)


def test_unknown_payload_variable_fails_before_start(tmp_path):
    with pytest.raises(UsageError):
        plan_launch(opts(tmp_path, site="generic-slurm", payload="sanity",
                         payload_args=("no_such_variable=1",)), host=FakeHost(), check=False)


def test_output_dir_never_reused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "plan.json").write_text("{}")
    with pytest.raises(UsageError, match="already holds a run record"):
        plan_launch(opts(tmp_path, site="generic-slurm"), host=FakeHost(), check=False)


def test_default_run_dir_names_payload_and_job(tmp_path):
    plan = plan_launch(LaunchOptions(image="i", payload="osu", site="generic-slurm",
                                     runs_root=str(tmp_path)), host=CRAY, check=False)
    assert plan.run_dir.startswith(str(tmp_path)) and plan.run_dir.endswith("-osu-4242")


def test_golden_dry_run_cray_ex_nvidia(tmp_path):
    plan = plan_launch(LaunchOptions(image="/scratch/IMG.sif", payload="nccl-tests", nodes=2,
                                     site="cray-ex-nvidia", output_dir="/scratch/runs/r1",
                                     env=("HF_TOKEN=hf_secret",)), host=CRAY, check=False)
    check_golden("dry-run-cray-ex-nvidia.txt", plan.display() + "\n")
    assert "hf_secret" not in plan.display()
