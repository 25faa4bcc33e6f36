"""Flux batch jobs (`hpcai submit` on a flux site, such as an LLNL-style El Capitan system; issue 31
item 3).

The script is what `flux batch` takes (flux-batch(1)): `# flux:` submission directives (RFC 36)
right after the shebang, as one group: the job name, `-N` whole nodes (`--exclusive`; Flux then
makes each node one slot), the time limit in seconds, queue, bank, host list and one output file
for the script's own output. Then `exec hpcai launch` with the same options: Flux runs it on the
first node of the allocation, in the new Flux instance (FLUX_URI set), and its flux backend starts
the ranks there with `flux run`. `flux batch` copies the submitting environment into the job, so
secret values reach it as they reach an sbatch job. The job id is asked for in ASCII
(FLUX_F58_FORCE_ASCII: `f…`, not `ƒ…`); `flux jobs -o '{state} {result}' ID` says when it ended
and how.

Flux is not in Debian and cannot be installed here: the scripts are golden-tested, and `flux`
is a stand-in in the tests, which say so.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError

POLL_S = 5.0
# What hpcai sets itself: a site's flux_options may not repeat it (a second time limit or output
# file would silently win or lose). Short and long spellings, as flux-batch(1) names them.
OWN = ("-N", "--nodes", "-n", "--nslots", "-x", "--exclusive", "-t", "--time-limit", "-q", "--queue", "-B",
       "--bank", "--job-name", "--output", "--error", "--requires")


def owned(option: str) -> str | None:
    """Why a site's flux_options entry may not be given (hpcai sets it), or None."""
    word = option.split()[0] if option.split() else ""
    flag = word.split("=", 1)[0]
    short = flag[:2] if not flag.startswith("--") else flag  # -N4 is -N
    if flag in OWN or short in OWN:
        return f"hpcai sets {flag if flag in OWN else short} itself"
    return None


def script(plan, site, launch_line: str, quote) -> str:
    """The `flux batch` script: `# flux:` directives from the plan and the site, then LAUNCH_LINE
    (the quoted `exec hpcai launch …`). QUOTE checks and quotes each value (submit.line_value)."""
    from hpcai.run.timelimits import seconds

    g = plan.geometry
    run_dir = quote("--output-dir", plan.run_dir)
    lines = ["#!/bin/bash",
             f"# flux: --job-name={quote('payload', 'hpcai-' + plan.payload)}",
             f"# flux: -N {g.nodes}",
             "# flux: --exclusive"]
    if g.time:
        lines.append(f"# flux: --time-limit={seconds(g.time)}s")
    for flag, value in (("--queue", g.partition), ("--bank", g.account)):
        if value:
            lines.append(f"# flux: {flag}={quote(flag, value)}")
    if g.nodelist:
        lines.append(f"# flux: --requires={quote('--nodelist', 'host:' + g.nodelist)}")
    lines.append(f"# flux: --output={run_dir}/flux-{{{{id}}}}.out")  # stderr too: none given
    # each word quoted on its own: Flux reads a directive as a shell would, `#` starting a comment
    lines += ["# flux: " + " ".join(quote("flux_options entry", w) for w in o.split()) for o in site.flux_options]
    lines += ["#",
              "# Written by `hpcai submit` for Flux. `flux batch` runs it on the first node of the allocation,",
              "# where `hpcai launch` starts the ranks with `flux run` and writes the run record into",
              f"# {run_dir}.",
              "#", f"# The step as planned at submission (site {quote('site', plan.site)}):"]
    lines += ["#   " + ln for ln in plan.display().splitlines()]
    return "\n".join([*lines, "set -eu", launch_line]) + "\n"


def _flux(args: list[str], env: dict[str, str] | None = None, what: str = "flux") -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["flux", *args], capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "FLUX_F58_FORCE_ASCII": "1", **(env or {})})
    except FileNotFoundError:
        raise UsageError(f"flux not found: {what} on a Flux system's login node (or --no-submit to write the "
                         "script only)") from None


def submit(script_path: Path, secrets: dict[str, str]) -> str:
    """`flux batch` the script (secret values in its environment, which the job copies); the job id."""
    res = _flux(["batch", str(script_path)], secrets, "submit")
    if res.returncode != 0:
        raise HpcaiError(f"flux batch failed: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout.strip()


def state(job_id: str) -> tuple[str, str]:
    """(state, result) of a job as `flux jobs` has it: ('RUN', ''), ('INACTIVE', 'TIMEOUT'), …;
    ('INACTIVE', '') for a job Flux no longer knows (purged)."""
    res = _flux(["jobs", "-n", "-o", "{state} {result}", job_id], what="--wait")
    if res.returncode != 0:
        if "not found" in res.stderr.lower():
            return "INACTIVE", ""
        raise HpcaiError(f"flux jobs failed: {res.stderr.strip() or res.stdout.strip()}")
    words = res.stdout.split()
    if not words:
        raise HpcaiError(f"flux jobs said nothing of job {job_id}")
    return words[0], " ".join(words[1:])


def wait(job_id: str, timeout_s: float | None, poll_s: float = POLL_S) -> str:
    """Wait until Flux says the job is INACTIVE; its result (COMPLETED, FAILED, CANCELED, TIMEOUT)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        now, result = state(job_id)
        if now == "INACTIVE":
            return result
        if deadline is not None and time.monotonic() >= deadline:
            raise HpcaiError(f"job {job_id} still {now.lower()} after {timeout_s:g} s (it goes on; "
                             "`hpcai results show` reads it once it ends)")
        time.sleep(poll_s)
