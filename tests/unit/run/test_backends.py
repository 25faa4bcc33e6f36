"""Backends, host lists and failed-rank detection (pure functions, no cluster)."""

from __future__ import annotations


import pytest

from hpcai.run import hostnames
from hpcai.run.backends import get_backend
from hpcai.run.model import Geometry
from hpcai.run.backends.local import rank_env
from hpcai.run.backends.srun import failed_ranks


def test_srun_inside_allocation_is_a_step():
    g = Geometry(nodes=2, ntasks_per_node=4, cpus_per_task=72, gpus_per_node=4, mpi="pmix",
                 partition="p", account="a", time="1:00", in_allocation=True, log_dir="/r/logs",
                 extra=("--network=disable_rdzv_get",))
    assert get_backend("srun").prefix(g) == [
        "srun", "--nodes=2", "--ntasks-per-node=4", "--cpus-per-task=72", "--gpus-per-node=4",
        "--mpi=pmix", "--kill-on-bad-exit=1", "--output=/r/logs/rank-%t.out",
        "--error=/r/logs/rank-%t.err", "--network=disable_rdzv_get"]


def test_mpiexec_and_local_prefix():
    g = Geometry(nodes=2, ntasks_per_node=4, cpus_per_task=16, cpu_bind="depth", nodelist="/pbs/nodes")
    assert get_backend("mpiexec").prefix(g) == ["mpiexec", "-n", "8", "-ppn", "4", "--cpu-bind", "depth",
                                            "-d", "16", "--hostfile", "/pbs/nodes"]
    assert get_backend("local").prefix(g) == []


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


def test_failed_rank_from_srun_stderr_and_exit_files():
    lines = ["srun: error: nid002: task 1: Exited with exit code 3\n",
             "srun: error: nid001: tasks 0,2-3: Exited with exit code 143\n"]
    assert failed_ranks(lines, {}) == {1: 3}
    assert failed_ranks([], {0: 143, 1: 0, 2: 7}) == {2: 7}
    assert failed_ranks([], {0: 137, 1: 143}) == {0: 137, 1: 143}  # only killed: name them all


def test_ranks_reported_after_the_step_was_terminated_are_not_failures():
    lines = ["srun: error: nid001: task 1: Exited with exit code 3\n",
             "srun: launch/slurm: _step_signal: Terminating StepId=323.0\n",
             "srun: error: nid002: task 3: Exited with exit code 1\n",  # ch-run, child killed
             "srun: error: nid001: task 0: Terminated\n"]
    assert failed_ranks(lines, {}) == {1: 3}
    assert failed_ranks(lines[1:], {}) == {3: 1}  # nothing before: report what there is




def test_first_host_expands_only_the_first_range(monkeypatch):
    """MASTER_ADDR from a 4,096-node allocation: one host is expanded, not the list."""
    import hostlist

    seen = []
    real = hostlist.expand_hostlist
    monkeypatch.setattr(hostlist, "expand_hostlist", lambda text: seen.append(text) or real(text))
    assert hostnames.first_host("nid[000001-004096],login[1-9]") == "nid000001"
    assert seen == ["nid[000001]"]


@pytest.mark.parametrize("nodelist", ["nid[1-", "nid[001-004", "nid;id", "", "a]b"])
def test_a_damaged_host_list_is_a_value_error(nodelist):
    with pytest.raises(ValueError, match="malformed host list"):
        hostnames.first_host(nodelist)
