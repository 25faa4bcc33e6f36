"""Waiting for submitted batch jobs (`hpcai submit --wait`, `hpcai sweep --submit --wait`).

Slurm accounting (sacct) is often missing on test clusters and small sites, so a job counts as
ended once squeue no longer lists it; how it ended comes from the run record its `hpcai launch`
wrote (status.json), which is the same for every site, and from sacct where the record has none.
A job on a multi-cluster site is `ID;CLUSTER`, as `sbatch --parsable` prints it: squeue and sacct
are asked on that cluster (-M), since without it they see only their own.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from hpcai import record
from hpcai.errors import HpcaiError

POLL_S = 2.0


def split(job: str) -> tuple[str, str]:
    """(id, cluster) of a job as `sbatch --parsable` names it: ID, or ID;CLUSTER on a site with
    several clusters (cluster '' when none is named)."""
    job_id, _, cluster = job.partition(";")
    return job_id, cluster


def shown(job: str) -> str:
    job_id, cluster = split(job)
    return f"{job_id} on cluster {cluster}" if cluster else job_id


def _ask(argv: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HpcaiError(f"cannot ask {argv[0]} about {what}: {exc}") from None


def queued(jobs: list[str]) -> list[str]:
    """The jobs (ID or ID;CLUSTER) squeue still lists (pending, running or completing): each
    cluster's asked with `squeue -M CLUSTER`, since a plain squeue sees only its own cluster."""
    by_cluster: dict[str, list[str]] = {}
    for job in jobs:
        job_id, cluster = split(job)
        by_cluster.setdefault(cluster, []).append(job_id)
    left = []
    for cluster, ids in by_cluster.items():
        argv = ["squeue", "--noheader", "--format=%i", "--jobs", ",".join(ids),
                *([f"--clusters={cluster}"] if cluster else [])]
        res = _ask(argv, f"jobs {', '.join(ids)}")
        if res.returncode != 0:
            if "invalid job id" in res.stderr.lower():  # every id has left squeue's memory: ended
                continue
            raise HpcaiError(f"squeue failed: {res.stderr.strip() or res.stdout.strip()}")
        listed = set(res.stdout.split())  # with -M, a "CLUSTER: name" line comes first
        left += [f"{i};{cluster}" if cluster else i for i in ids if i in listed]
    return left


def wait_for_jobs(jobs: list[str], timeout_s: float | None = None, poll_s: float = POLL_S) -> None:
    """Return once no job of JOBS (ID or ID;CLUSTER) is queued or running; HpcaiError after timeout_s."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while left := queued(jobs):
        if deadline is not None and time.monotonic() >= deadline:
            raise HpcaiError(f"job(s) {', '.join(map(shown, left))} still queued or running after {timeout_s:g} s "
                             "(they go on; `hpcai results show` reads them once they end)")
        time.sleep(poll_s)


def accounted_state(job: str) -> str:
    """How Slurm's accounting says JOB ended (TIMEOUT, NODE_FAIL, …), or '' where there is none."""
    job_id, cluster = split(job)
    try:
        res = _ask(["sacct", "--noheader", "--parsable2", "--allocations", "--format=State", "--jobs", job_id,
                    *([f"--clusters={cluster}"] if cluster else [])], f"job {job_id}")
    except HpcaiError:
        return ""
    states = res.stdout.split() if res.returncode == 0 else []
    return states[0] if states else ""


def final_state(run_dir: Path, job: str = "", said: str | None = None,
                who: str = "Slurm's accounting") -> tuple[str, str]:
    """(state, message) from a run record; a job killed before its launch finished (time limit,
    node failure) leaves no final status, which is said with where its batch log is, and with what
    the scheduler (WHO) says of JOB: SAID (slurmrestd's last state, Flux's result), else Slurm's
    accounting where it has any."""
    try:
        status = json.loads((run_dir / record.STATUS).read_text())
    except (OSError, ValueError):
        status = {}
    state = status.get("state") or "unknown"
    if state in ("running", "unknown"):
        logs = ", ".join(str(p) for pattern in ("slurm-*.out", "pbs.out", "flux-*.out")
                         for p in sorted(run_dir.glob(pattern))) or str(run_dir)
        said = (accounted_state(job) if job else "") if said is None else said
        why = f"{who} says {said}" if said else "time limit or node failure?"
        return "ended", f"the job ended without a final status ({why}); see {logs}"
    return state, status.get("message") or state
