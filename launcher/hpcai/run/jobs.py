"""Waiting for submitted batch jobs (`hpcai submit --wait`, `hpcai sweep --submit --wait`).

Slurm accounting (sacct) is often missing on test clusters and small sites, so a job counts as
ended once squeue no longer lists it; how it ended comes from the run record its `hpcai launch`
wrote (status.json), which is the same for every site.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from hpcai import record
from hpcai.errors import HpcaiError

POLL_S = 2.0


def queued(job_ids: list[str]) -> list[str]:
    """The ids squeue still lists (pending, running or completing)."""
    try:
        res = subprocess.run(["squeue", "--noheader", "--format=%i", "--jobs", ",".join(job_ids)],
                             capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HpcaiError(f"cannot ask squeue about jobs {', '.join(job_ids)}: {exc}") from None
    if res.returncode != 0:
        if "invalid job id" in res.stderr.lower():  # every id has left squeue's memory: ended
            return []
        raise HpcaiError(f"squeue failed: {res.stderr.strip() or res.stdout.strip()}")
    return [j for j in res.stdout.split() if j in job_ids]


def wait_for_jobs(job_ids: list[str], timeout_s: float | None = None, poll_s: float = POLL_S) -> None:
    """Return once no job of job_ids is queued or running; HpcaiError after timeout_s."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while left := queued(job_ids):
        if deadline is not None and time.monotonic() >= deadline:
            raise HpcaiError(f"job(s) {', '.join(left)} still queued or running after {timeout_s:g} s "
                             "(they go on; `hpcai results show` reads them once they end)")
        time.sleep(poll_s)


def final_state(run_dir: Path) -> tuple[str, str]:
    """(state, message) from a run record; a job killed before its launch finished (time limit,
    node failure) leaves no final status, which is said with where its batch log is."""
    try:
        status = json.loads((run_dir / record.STATUS).read_text())
    except (OSError, ValueError):
        status = {}
    state = status.get("state") or "unknown"
    if state in ("running", "unknown"):
        logs = ", ".join(str(p) for p in sorted(run_dir.glob("slurm-*.out"))) or str(run_dir)
        return "ended", f"the job ended without a final status (time limit or node failure?); see {logs}"
    return state, status.get("message") or state
