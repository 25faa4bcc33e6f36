"""`hpcai submit --clusters` and waiting for a job on another cluster (issue 31, item 1): the
batch script's -M line, the `ID;CLUSTER` that `sbatch --parsable` answers, and squeue/sacct asked
on that cluster. Slurm here is STAND-IN sbatch/squeue/sacct scripts that log their arguments and
answer as Slurm 22.05 does with -M; the same paths run against two real clusters joined by
slurmdbd in tests/integration/test_multi_cluster.py."""

from __future__ import annotations

import os

import pytest

from hpcai.errors import UsageError
from hpcai.run import jobs
from hpcai.run.submit import check_clusters


@pytest.mark.parametrize("given, kept", [("alpha", "alpha"), ("alpha,beta", "alpha,beta"),
                                         (" alpha , beta ", "alpha,beta"), ("all", "all"), ("", "")])
def test_cluster_lists_as_sbatch_takes_them(given, kept):
    assert check_clusters(given) == kept


@pytest.mark.parametrize("bad", ["a;b", "a b", "-x", "alpha,,beta", "al\npha", "$(id)"])
def test_a_bad_cluster_list_is_one_line(bad):
    with pytest.raises(UsageError, match="cluster") as refused:
        check_clusters(bad)
    assert "\n" not in str(refused.value)


def test_a_job_is_its_id_and_cluster():
    assert jobs.split("42;beta") == ("42", "beta") and jobs.split("42") == ("42", "")
    assert jobs.shown("42;beta") == "42 on cluster beta" and jobs.shown("42") == "42"


@pytest.fixture
def slurm(tmp_path, monkeypatch):
    """Stand-in sbatch (answers 7;beta), squeue (lists the ids in $QUEUED under a CLUSTER: line,
    as -M prints) and sacct (TIMEOUT); each logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "slurm.log"
    for name, body in (("sbatch", 'echo "7;beta"'),
                       ("squeue", 'echo "CLUSTER: beta"; for j in $QUEUED; do echo "$j"; done'),
                       ("sacct", 'echo TIMEOUT')):
        tool = bin_dir / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n{body}\n')
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("QUEUED", "")
    return log


def test_squeue_and_sacct_are_asked_on_the_jobs_cluster(slurm, monkeypatch):
    monkeypatch.setenv("QUEUED", "7 9")
    assert jobs.queued(["7;beta", "8;beta", "9"]) == ["7;beta", "9"]
    calls = slurm.read_text().splitlines()
    assert "squeue --noheader --format=%i --jobs 7,8 --clusters=beta" in calls
    assert "squeue --noheader --format=%i --jobs 9" in calls  # no cluster named: squeue's own
    assert jobs.accounted_state("7;beta") == "TIMEOUT"
    assert slurm.read_text().splitlines()[-1] == \
        "sacct --noheader --parsable2 --allocations --format=State --jobs 7 --clusters=beta"


def test_submit_clusters_writes_the_line_and_waits_on_that_cluster(hpcai, slurm, tmp_path):
    run, sif = tmp_path / "r", tmp_path / "x.sif"
    sif.write_bytes(b"")  # apptainer only as text: the plan needs the file (--userns: root runs only that mode)
    res = hpcai("submit", "--site", "generic-slurm", "--runtime", "apptainer", "--userns", "--image", str(sif),
                "-o", str(run), "--clusters", "alpha,beta", "--wait", "--cmd", "--", "true")
    assert res.exit_code == 1, res.stderr  # the stand-in job never wrote a final status
    text = (run / "submit.sbatch").read_text()
    assert "#SBATCH --clusters=alpha,beta\n" in text and "--clusters" not in text.splitlines()[-1]
    assert res.stdout.strip() == "7;beta"
    assert (run / "job_id").read_text() == "7\n" and (run / "cluster").read_text() == "beta\n"
    assert "squeue --noheader --format=%i --jobs 7 --clusters=beta" in slurm.read_text()
    assert "job 7 on cluster beta: the job ended without a final status (Slurm's accounting says TIMEOUT)" \
        in res.stderr


def test_a_bad_cluster_list_leaves_nothing(hpcai, slurm, tmp_path):
    res = hpcai("submit", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--clusters", "a;b", "--cmd", "--", "true")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "is not a cluster name" in res.stderr
    assert not (tmp_path / "r").exists() and not slurm.exists()
