"""Backends, host lists, the rank shim and failed-rank detection (pure functions, no cluster)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hpcai import hostnames, shim
from hpcai.backends import Geometry, backend_prefix
from hpcai.backends.local import rank_env
from hpcai.launch import failed_ranks


def test_srun_inside_allocation_is_a_step():
    g = Geometry(nodes=2, ntasks_per_node=4, cpus_per_task=72, gpus_per_node=4, mpi="pmix",
                 partition="p", account="a", time="1:00", in_allocation=True, log_dir="/r/logs",
                 extra=("--network=disable_rdzv_get",))
    assert backend_prefix("srun", g) == [
        "srun", "--nodes=2", "--ntasks-per-node=4", "--cpus-per-task=72", "--gpus-per-node=4",
        "--mpi=pmix", "--kill-on-bad-exit=1", "--output=/r/logs/rank-%t.out",
        "--error=/r/logs/rank-%t.err", "--network=disable_rdzv_get"]


def test_mpiexec_and_local_prefix():
    g = Geometry(nodes=2, ntasks_per_node=4, cpus_per_task=16, cpu_bind="depth", nodelist="/pbs/nodes")
    assert backend_prefix("mpiexec", g) == ["mpiexec", "-n", "8", "-ppn", "4", "--cpu-bind", "depth",
                                            "-d", "16", "--hostfile", "/pbs/nodes"]
    assert backend_prefix("local", g) == []


def test_local_rank_env():
    assert rank_env(2, 4, 29500) == {"RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "4",
                                     "LOCAL_WORLD_SIZE": "4", "NODE_RANK": "0",
                                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.mark.parametrize("nodelist, first", [
    ("nid[001234-001300,001400]", "nid001234"), ("nid001,nid002", "nid001"), ("x[3,5-7],y1", "x3"),
    ("nid[000001-004096]", "nid000001"), ("a[1-2]b[3-4]", "a1b3"), ("single", "single")])
def test_first_host(nodelist, first):
    assert hostnames.first_host(nodelist) == first


def test_master_port_rule():
    assert hostnames.master_port("123456") == 123456 % 4536 + 61000
    assert hostnames.master_port(None) == 29500 and hostnames.master_port("9", fixed=7010) == 7010


def test_master_addr_suffix():
    assert hostnames.master_addr("jwb[0001-0002]", "i", {"jwb0001i": "10.0.0.1"}.get) == ("10.0.0.1", None)
    addr, warn = hostnames.master_addr("jwb[0001-0002]", "i", lambda n: None)
    assert addr == "jwb0001i" and "does not resolve" in warn


SLURM = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_NODEID": "1",
         "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_ID": "99", "SLURM_STEP_NODELIST": "nid[003-004]",
         "SLINGSHOT_VNIS": "1234", "HOME": "/root"}


def test_shim_rank_env_from_slurm():
    assert shim.rank_env(SLURM) == {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
                                    "LOCAL_WORLD_SIZE": "4", "NODE_RANK": "1",
                                    "MASTER_ADDR": "nid003", "MASTER_PORT": str(99 % 4536 + 61000)}


def test_shim_never_overwrites_and_per_gpu_isolates():
    assert "MASTER_ADDR" not in shim.rank_env({**SLURM, "MASTER_ADDR": "given"})
    env = shim.rank_env(SLURM, per_gpu=True)
    assert env["WORLD_SIZE"] == "1" and env["RANK"] == "0" and env["HPCAI_COPY"] == "5"
    assert env["MASTER_PORT"] == str(99 % 4536 + 61000 + 1)


def test_shim_pmi_and_tasks_per_node():
    env = shim.rank_env({"PMI_RANK": "3", "PMI_LOCAL_RANK": "1", "PMI_SIZE": "4", "PMI_LOCAL_SIZE": "2"})
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == ("3", "1", "4", "2")
    assert shim.tasks_on_node("4(x2),3", 2) == 3 and shim.tasks_on_node("", 0) is None


def _ns(**kw):
    base = dict(kind="docker", name="hpcai-{jobid}-r-{rank}", patterns=["SLURM_*", "SLINGSHOT_*"],
                suffix="", port=0, per_gpu=False, master_addr="", cmd=["docker", "run", "--rm", "img", "x"])
    base.update(kw)
    return SimpleNamespace(**base)


def test_shim_docker_gets_name_and_forwarded_names():
    argv, env, name = shim.build(_ns(), SLURM)
    assert name == "hpcai-99-r-5"
    assert argv[:3] == ["docker", "run", "--name=hpcai-99-r-5"]
    forwarded = [argv[i + 1] for i, t in enumerate(argv) if t == "-e"]
    assert "SLINGSHOT_VNIS" in forwarded and "RANK" in forwarded and "HOME" not in forwarded
    assert not any("=" in f for f in forwarded)  # values come from the environment, not argv
    assert env["RANK"] == "5" and argv[-2:] == ["img", "x"]


def test_shim_apptainer_uses_apptainerenv():
    argv, env, _ = shim.build(_ns(kind="apptainer", cmd=["apptainer", "exec", "i", "x"]), SLURM)
    assert argv == ["apptainer", "exec", "i", "x"]
    assert env["APPTAINERENV_RANK"] == "5" and env["APPTAINERENV_SLINGSHOT_VNIS"] == "1234"


def test_failed_rank_from_srun_stderr_and_exit_files():
    lines = ["srun: error: nid002: task 1: Exited with exit code 3\n",
             "srun: error: nid001: tasks 0,2-3: Exited with exit code 143\n"]
    assert failed_ranks(lines, {}) == {1: 3}
    assert failed_ranks([], {0: 143, 1: 0, 2: 7}) == {2: 7}
    assert failed_ranks([], {0: 137, 1: 143}) == {0: 137, 1: 143}  # only killed: name them all


def test_shim_parses_only_what_plan_writes():
    ns = shim._parse(["--kind", "docker", "--pass", "A*", "--pass", "B", "--per-gpu", "--port", "7010",
                      "--", "docker", "run", "--", "x"])
    assert (ns.kind, ns.patterns, ns.per_gpu, ns.port) == ("docker", ["A*", "B"], True, 7010)
    assert ns.cmd == ["docker", "run", "--", "x"]
    with pytest.raises(SystemExit):
        shim._parse(["--bogus", "1", "--", "x"])
    assert shim.matches("SLURM_PROCID", "SLURM_*") and not shim.matches("SLURMD_X", "SLURM_*")


def test_shim_process_exit_code_file_and_sigterm(tmp_path):
    """The real shim as a process: rank variables in the child, exit file, SIGTERM passed on."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NODELIST": "nid[005-006]"}
    base = [sys.executable, "-m", "hpcai.shim", "--kind", "charliecloud", "--exit-dir", str(tmp_path), "--"]
    res = subprocess.run([*base, "sh", "-c", 'echo "$RANK $WORLD_SIZE $MASTER_ADDR"; exit 4'], env=env,
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 4 and res.stdout == "2 4 nid005\n"
    assert (tmp_path / "rank-2.exit").read_text() == "4\n"
    proc = subprocess.Popen([*base, "sh", "-c", "trap 'exit 9' TERM; sleep 30 & wait"], env=env)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 9  # the child saw the TERM and its code is kept
    assert (tmp_path / "rank-2.exit").read_text() == "9\n"


def test_ranks_reported_after_the_step_was_terminated_are_not_failures():
    lines = ["srun: error: nid001: task 1: Exited with exit code 3\n",
             "srun: launch/slurm: _step_signal: Terminating StepId=323.0\n",
             "srun: error: nid002: task 3: Exited with exit code 1\n",  # ch-run, child killed
             "srun: error: nid001: task 0: Terminated\n"]
    assert failed_ranks(lines, {}) == {1: 3}
    assert failed_ranks(lines[1:], {}) == {3: 1}  # nothing before: report what there is


def test_shim_as_launched_script_mode_without_site(tmp_path):
    """The shim exactly as plans start it (Host().shim(): python -S -E …/shim.py): no site-packages,
    yet a bracketed host list still expands (python-hostlist is found by adding site lazily)."""
    import os
    import subprocess

    from hpcai.site import Host

    argv = Host().shim()
    assert argv[1:3] == ["-S", "-E"] and argv[3].endswith("hpcai/shim.py")
    env = {**os.environ, "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "9",
           "SLURM_JOB_NODELIST": "nid[007-008]", "PYTHONPATH": "/nonexistent"}
    res = subprocess.run([*argv, "--kind", "none", "--exit-dir", str(tmp_path), "--", "sh", "-c",
                          'echo "$RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT"'],
                         env=env, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"1 2 nid007 {9 % 4536 + 61000}\n"
    assert (tmp_path / "rank-1.exit").read_text() == "0\n"
