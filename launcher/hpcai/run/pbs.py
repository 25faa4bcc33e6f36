"""PBS Pro batch jobs (`hpcai submit` on an mpiexec site such as ALCF Polaris; issue 31 item 3).

The script has the shape ALCF documents for Polaris: `#PBS` directives (name, `select=N` with the
site's resources, `place=scatter`, walltime, queue, project, one output file, the submitting
environment exported with -V so secret values reach the job as they reach an sbatch job), then
`exec hpcai launch` with the same options, whose mpiexec backend starts the ranks through PALS
with `--hostfile $PBS_NODEFILE`. `qsub` takes it; `qstat -x -F json -f ID` says when it ended.

No PBS server can be installed here (PBS Pro is not in Debian): the scripts are golden-tested and
qsub/qstat are stand-ins in the tests, which say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError

POLL_S = 5.0
# The directives hpcai writes itself: a site's pbs_options may not set them (a second walltime or
# output file would silently win or lose).
OWN_FLAGS = ("-N", "-q", "-A", "-o", "-e", "-j", "-V", "-v")
OWN_RESOURCES = ("select", "walltime", "place")


def owned(option: str) -> str | None:
    """Why a site's pbs_options entry may not be given (hpcai sets it), or None."""
    words = option.split()
    flag = words[0] if words else ""
    if flag in OWN_FLAGS or any(flag.startswith(f) and len(flag) > 2 and f != "-l" for f in OWN_FLAGS):
        return f"hpcai sets {flag} itself"
    if flag.startswith("-l"):
        resource = (flag[2:] or (words[1] if len(words) > 1 else "")).split("=")[0]
        if resource in OWN_RESOURCES:
            return f"hpcai sets -l {resource} itself (nodes: -N, time: --time)"
    return None


def script(plan, site, launch_line: str, quote) -> str:
    """The qsub script: `#PBS` lines from the plan and the site, then LAUNCH_LINE (the quoted
    `exec hpcai launch …`, secrets read from the environment). QUOTE checks and quotes each value."""
    from hpcai.run.timelimits import hms

    g = plan.geometry
    run_dir = quote("--output-dir", plan.run_dir)
    chunk = f"select={g.nodes}" + (f":{site.pbs_resources}" if site.pbs_resources else "")
    lines = ["#!/bin/bash",
             "# Written by `hpcai submit` for PBS Pro. Inside the job, `hpcai launch` starts the ranks with",
             "# mpiexec (PALS) on the nodes of $PBS_NODEFILE and writes the run record into",
             f"# {run_dir}.",
             f"#PBS -N {quote('payload', 'hpcai-' + plan.payload)}",
             f"#PBS -l {quote('select', chunk)}",
             "#PBS -l place=scatter"]
    if g.time:
        lines.append(f"#PBS -l walltime={hms(g.time)}")
    for flag, value in (("-q", g.partition), ("-A", g.account)):
        if value:
            lines.append(f"#PBS {flag} {quote(flag, value)}")
    lines += ["#PBS -j oe", f"#PBS -o {run_dir}/pbs.out", "#PBS -V"]
    # qsub splits a directive into words as a shell does: each word quoted on its own
    lines += ["#PBS " + " ".join(quote("pbs_options entry", w) for w in o.split()) for o in site.pbs_options]
    lines += ["#", f"# The step as planned at submission (site {quote('site', plan.site)}):"]
    lines += ["#   " + ln for ln in plan.display().splitlines()]
    return "\n".join([*lines, "set -eu", launch_line]) + "\n"


def submit(script_path: Path, secrets: dict[str, str]) -> str:
    """qsub the script (secret values in its environment, which -V hands the job); the job id."""
    try:
        res = subprocess.run(["qsub", str(script_path)], capture_output=True, text=True,
                             env={**os.environ, **secrets}, timeout=120, check=False)
    except FileNotFoundError:
        raise UsageError("qsub not found: submit on a PBS site's login node (or --no-submit to write the "
                         "script only)") from None
    if res.returncode != 0:
        raise HpcaiError(f"qsub failed: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout.strip()


def ended(job_id: str) -> bool:
    """Whether PBS says the job has finished (job_state F or X; or it no longer knows it)."""
    res = subprocess.run(["qstat", "-x", "-F", "json", "-f", job_id], capture_output=True, text=True,
                         timeout=60, check=False)
    if res.returncode != 0:
        if "unknown job id" in res.stderr.lower():
            return True
        raise HpcaiError(f"qstat failed: {res.stderr.strip() or res.stdout.strip()}")
    try:
        jobs = json.loads(res.stdout).get("Jobs") or {}
    except ValueError:
        raise HpcaiError(f"qstat -F json gave no JSON for job {job_id}") from None
    states = [j.get("job_state") for j in jobs.values()]
    return not states or all(s in ("F", "X") for s in states)


def wait(job_id: str, timeout_s: float | None, poll_s: float = POLL_S) -> None:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not ended(job_id):
        if deadline is not None and time.monotonic() >= deadline:
            raise HpcaiError(f"job {job_id} still queued or running after {timeout_s:g} s (it goes on; "
                             "`hpcai results show` reads it once it ends)")
        time.sleep(poll_s)
