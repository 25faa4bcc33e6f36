"""`hpcai submit --rest URL`: the same batch job through slurmrestd instead of sbatch (issue 31).

Slurm's REST API (OpenAPI v0.0.38, Slurm 22.05's; auth/jwt) takes the batch script as text and the
job's options as a job description: it does not read `#SBATCH` lines, so the plan's geometry is
given again here (nodes, ranks per node, CPUs per rank, GPUs per node, time, partition, account,
output file). What that description cannot carry is refused before anything is sent: a site's
free-form `sbatch_options`, `--clusters`, `--nodelist`.

The token is the one `scontrol token` prints, read from SLURM_JWT, sent in a request header and
nowhere else: never on a command line, in the script, the record or the job's environment. The
job's environment is the submitting one (as sbatch's default --export=ALL), less SLURM_*, plus
the secret values the script reads (as sbatch gets them in its own environment).
"""

from __future__ import annotations

import getpass
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from hpcai.errors import HpcaiError, UsageError, one_line
from hpcai.run.timelimits import minutes

API = "v0.0.38"
TOKEN_ENV = "SLURM_JWT"
POLL_S = 2.0
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE"}


def check_url(url: str) -> str:
    """URL as slurmrestd's base: http(s)://HOST[:PORT][/PATH], no credentials, query or fragment."""
    parts = urllib.parse.urlsplit(one_line("--rest", url))
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(f"--rest: {url!r} is not a slurmrestd address; give http(s)://HOST:PORT, "
                         "e.g. --rest http://127.0.0.1:6820")
    if parts.username or parts.password:
        raise UsageError("--rest: the address holds credentials; the token goes in SLURM_JWT, never in a URL")
    return url.rstrip("/")


def token() -> str:
    value = os.environ.get(TOKEN_ENV, "")
    if not value:
        raise UsageError(f"--rest needs a token in {TOKEN_ENV} (`export $(scontrol token)` where Slurm runs); "
                         "hpcai never takes it on the command line")
    return value


def job_description(plan, opts, site_sbatch: tuple[str, ...], secrets: dict[str, str]) -> dict[str, Any]:
    """The job's options as slurmrestd takes them; what it cannot carry is refused in one line."""
    g = plan.geometry
    cannot = [("the site's sbatch_options", " ".join(site_sbatch)), ("--clusters", opts.clusters),
              ("--nodelist", g.nodelist)]
    for what, value in cannot:
        if value:
            raise UsageError(f"--rest: {what} ({value}) cannot go through slurmrestd's job description (API {API}); "
                             "submit with sbatch (drop --rest) or leave it out")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    desc: dict[str, Any] = {
        "name": f"hpcai-{plan.payload}", "nodes": g.nodes, "tasks_per_node": g.ntasks_per_node,  # an int: [min, max] is taken as 1
        "current_working_directory": os.getcwd(), "standard_output": f"{plan.run_dir}/slurm-%j.out",
        "environment": {**env, **secrets},
    }
    for key, value in (("cpus_per_task", g.cpus_per_task), ("partition", g.partition), ("account", g.account),
                       ("gpus_per_node", f"gpu:{g.gpus_per_node}" if g.gpus_per_node else None),
                       ("time_limit", minutes(g.time) if g.time else None)):
        if value:
            desc[key] = value
    return desc


def _call(url: str, path: str, body: dict | None = None) -> dict[str, Any]:
    """One request to slurmrestd: its JSON answer; a transport or API error is one line."""
    headers = {"X-SLURM-USER-NAME": getpass.getuser(), "X-SLURM-USER-TOKEN": token(), "Accept": "application/json"}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    request = urllib.request.Request(f"{url}/slurm/{API}/{path}", data=data, headers=headers,
                                     method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - http(s) only (check_url)
            doc = json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise HpcaiError(f"slurmrestd at {url} refused the token in {TOKEN_ENV} (HTTP {exc.code}): expired? "
                             "`scontrol token` gives a new one") from None
        try:
            doc = json.loads(exc.read() or b"{}")
        except ValueError:
            raise HpcaiError(f"slurmrestd at {url}: HTTP {exc.code} on {path}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise HpcaiError(f"cannot reach slurmrestd at {url}: {getattr(exc, 'reason', exc)}") from None
    return doc


def _errors(doc: dict[str, Any]) -> str:
    return "; ".join(str(e.get("error") or e.get("description") or e) for e in doc.get("errors") or [])


def submit(url: str, script: str, description: dict[str, Any]) -> str:
    """POST the job; its id."""
    doc = _call(url, "job/submit", {"script": script, "job": description})
    if doc.get("job_id") is None:
        said = _errors(doc) or "no job id in its answer"
        # slurmctld drops the connection of a token it cannot verify; slurmrestd says only this
        hint = f" (slurmctld refuses a token it cannot verify so: is {TOKEN_ENV} current?)" if "Zero Bytes" in said else ""
        raise HpcaiError(f"slurmrestd at {url} did not take the job: {said}{hint}")
    return str(doc["job_id"])


def state(url: str, job_id: str) -> str:
    """The job's state as slurmrestd says it (PENDING, RUNNING, COMPLETED, …); '' once it has
    forgotten the job (after MinJobAge)."""
    doc = _call(url, f"job/{job_id}")
    jobs = doc.get("jobs") or []
    if not jobs:
        said = _errors(doc)
        if said and "invalid job id" not in said.lower():
            raise HpcaiError(f"slurmrestd at {url}: job {job_id}: {said}")
        return ""
    return str(jobs[0].get("job_state") or "")


def wait(url: str, job_id: str, timeout_s: float | None, poll_s: float = POLL_S) -> str:
    """Poll until the job has ended; the last state slurmrestd gave ('' when it forgot the job)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while (now := state(url, job_id)) and now not in ENDED:
        if deadline is not None and time.monotonic() >= deadline:
            raise HpcaiError(f"job {job_id} still {now} after {timeout_s:g} s (it goes on; `hpcai results show` "
                             "reads it once it ends)")
        time.sleep(poll_s)
    return now


def record_job(run_dir: Path, url: str) -> None:
    """Where the job was submitted, beside its id in the record (no token: it is not there)."""
    from hpcai import files, record

    files.write_atomic(run_dir / "slurmrestd", url + "\n", record.PRIVATE_FILE, over_link=True)
