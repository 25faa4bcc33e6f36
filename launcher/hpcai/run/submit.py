"""Batch submission: the pure sbatch writer (PBS Pro's in run/pbs.py, Flux's in run/flux_batch.py),
submitting a plan, and waiting for the job.

`hpcai submit` and `hpcai sweep --submit` write `<record>/submit.sbatch`: `#SBATCH` lines from
the plan, then `exec hpcai launch …` with the same options, so inside the allocation the launch
plans the step again (MASTER_ADDR/PORT from the job's nodes and id) and writes the run record
itself. Every value on a `#` line passes `errors.one_line` and is shell-quoted; a value redaction
hides (a `--password` argument, a URL's user-info) is read from HPCAI_SECRET_ARG_n on the `exec`
line and handed to sbatch in its environment, like secret `--env` values.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from hpcai import files
from hpcai import record
from hpcai.errors import HpcaiError, UsageError, one_line
from hpcai.run.options import options_argv
from hpcai.output import say
from hpcai.redact import redact_argv, secret_items


SCRIPT = "submit.sbatch"
PBS_SCRIPT = "submit.pbs"
FLUX_SCRIPT = "submit.flux"
# Per scheduler (a backend's `batch`): its script's name, the command that takes it, and the
# module that writes, submits and waits for it (None: sbatch's, here).
SCRIPTS = {"slurm": SCRIPT, "pbs": PBS_SCRIPT, "flux": FLUX_SCRIPT}
COMMANDS = {"slurm": "sbatch", "pbs": "qsub", "flux": "flux batch"}
_MODULES = {"pbs": "hpcai.run.pbs", "flux": "hpcai.run.flux_batch"}


def _scheduler(batch: str):
    """The module of a scheduler that is not Slurm (run/pbs.py, run/flux_batch.py), or None."""
    from importlib import import_module

    return import_module(_MODULES[batch]) if batch in _MODULES else None


def line_value(what: str, value: object) -> str:
    """A value for a `#SBATCH` or comment line of the batch script, shell-quoted. The one rule for
    them: no control characters, since a newline would end the line and run the rest as a command
    (before the #SBATCH block it would also make sbatch ignore every directive after it)."""
    return shlex.quote(one_line(what, value))


def sbatch_script(plan, opts, python: str) -> str:
    """The batch script: #SBATCH lines from the plan, then `hpcai launch` inside the allocation.
    Every value on a `#` line goes through line_value; each word of the exec line is quoted, or
    read from the job's environment when it is secret."""
    g = plan.geometry
    run_dir = line_value("--output-dir", plan.run_dir)
    lines = ["#!/bin/bash",
             "# Written by `hpcai submit`. Inside the allocation, `hpcai launch` plans the step again",
             "# (MASTER_ADDR/PORT from the job's nodes and id) and writes the run record into",
             f"# {run_dir}.",
             f"#SBATCH --job-name={line_value('payload', 'hpcai-' + plan.payload)}", f"#SBATCH --nodes={g.nodes}",
             f"#SBATCH --ntasks-per-node={g.ntasks_per_node}"]
    for key, value in (("gpus-per-node", g.gpus_per_node), ("cpus-per-task", g.cpus_per_task),
                       ("time", g.time), ("partition", g.partition), ("account", g.account),
                       ("nodelist", g.nodelist)):
        if value:
            lines.append(f"#SBATCH --{key}={line_value('--' + key, value)}")
    lines.append(f"#SBATCH --output={run_dir}/slurm-%j.out")
    lines += [f"#SBATCH {line_value('sbatch_options entry', o)}" for o in _site_sbatch(plan)]
    if opts.clusters:  # after the site's options: sbatch takes the last -M, so the user's wins
        lines.append(f"#SBATCH --clusters={line_value('--clusters', check_clusters(opts.clusters))}")
    lines += ["#", f"# The step as planned at submission (site {line_value('site', plan.site)}):"]
    lines += ["#   " + ln for ln in plan.display().splitlines()]
    lines += ["set -eu", exec_line(_job_argv(python, opts))]
    return "\n".join(lines) + "\n"


def exec_line(argv: list[str]) -> str:
    """The job's `exec hpcai launch …` line: each word quoted, or read from the job's environment
    when it is secret (`--cmd -- tool --password V`: V comes from HPCAI_SECRET_ARG_n)."""
    hidden = secret_args(argv)
    return " ".join(f'"${{{hidden[i][0]}}}"' if i in hidden else shlex.quote(tok) for i, tok in enumerate(argv))


def batch_script(plan, opts, python: str) -> str:
    """The job script for the plan's scheduler: sbatch's (above), PBS Pro's or Flux's."""
    module = _scheduler(plan.backend.batch)
    if module:
        from hpcai.run.site import load_site

        return module.script(plan, load_site(plan.site), exec_line(_job_argv(python, opts)), line_value)
    return sbatch_script(plan, opts, python)


def script_path(plan) -> Path:
    return Path(plan.run_dir) / SCRIPTS[plan.backend.batch]


def secret_args(argv: list[str]) -> dict[int, tuple[str, str]]:
    """{position: (variable, token)} for the tokens redaction hides (a --password value, a URL's
    user-info, …): a batch script reads them from HPCAI_SECRET_ARG_1, _2, … instead of holding
    them (redact.py's one rule decides what is secret)."""
    hidden = [i for i, (tok, shown) in enumerate(zip(argv, redact_argv(argv))) if tok != shown]
    return {i: (f"HPCAI_SECRET_ARG_{n}", argv[i]) for n, i in enumerate(hidden, start=1)}


def _job_argv(python: str, opts) -> list[str]:
    """What the batch script runs: `hpcai launch` with the same options."""
    return ["exec", python, "-m", "hpcai", "launch", *options_argv(opts)]


def submit_plan(plan, opts, submit: bool = True) -> tuple[Path, str | None]:
    """Write <run_dir>/submit.sbatch (submit.pbs, submit.flux on a PBS or Flux site) and, if submit,
    hand it to sbatch, slurmrestd, qsub or flux batch; returns (script, job id or None).

    Shared by `hpcai submit` and `hpcai sweep --submit`. Secret --env values go to the submitting
    command's own environment (the job inherits it), never into the script.
    """
    from hpcai.run.environment import parse_env

    check_batch(plan, opts)
    run_dir = Path(plan.run_dir)
    opts.output_dir = str(run_dir)
    opts.done_file = plan.done_file  # absolute, as the plan checked it
    text = batch_script(plan, opts, sys.executable)  # refused values leave no folder behind
    run_dir.mkdir(parents=True, exist_ok=True, mode=record.PRIVATE_DIR)
    script = script_path(plan)
    write_once(script, text)
    command = COMMANDS[plan.backend.batch]
    say(f"{command} script: {script}")
    secrets = secret_items(parse_env(opts.env, dict(os.environ)))
    secrets.update(secret_args(_job_argv(sys.executable, opts)).values())
    if not submit:
        if secrets:  # the script names them; their values must be in the environment of `sbatch`
            say(f"note: the script copies {', '.join(sorted(secrets))} from the environment it is submitted "
                f"from (values are never written into it): export them before `{command} {script}`")
        return script, None
    module = _scheduler(plan.backend.batch)
    if module:
        job = module.submit(script, secrets)
    elif opts.rest:  # slurmrestd: the same script, the options as a job description, the token in a header
        from hpcai.run import rest

        job = rest.submit(opts.rest, text, rest.job_description(plan, opts, _site_sbatch(plan), secrets))
        rest.record_job(run_dir, opts.rest)
    else:
        res = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                             env={**os.environ, **secrets}, check=False)
        if res.returncode != 0:
            raise HpcaiError(f"sbatch failed: {res.stderr.strip() or res.stdout.strip()}")
        job = res.stdout.strip()  # "ID", or "ID;CLUSTER" where the site has several clusters (-M)
    job_id, _, cluster = job.partition(";")
    # the record's own names: a link planted there is replaced, never written through
    files.write_atomic(run_dir / "job_id", job_id + "\n", record.PRIVATE_FILE, over_link=True)
    if cluster:
        files.write_atomic(run_dir / "cluster", cluster + "\n", record.PRIVATE_FILE, over_link=True)
    return script, job


def backend_for(scheduler: str | None, backend: str | None) -> str | None:
    """The backend --scheduler picks: the one whose jobs that scheduler runs (slurm: srun, pbs:
    mpiexec, flux: flux); a --backend given as well must be that one."""
    if not scheduler:
        return backend
    from hpcai.run.backends import BACKENDS, get_backend

    runs = {get_backend(name).batch: name for name in BACKENDS if get_backend(name).batch}
    if scheduler not in runs:
        raise UsageError(f"--scheduler {one_line('--scheduler', scheduler)!r} is not one hpcai writes jobs for; "
                         f"one of: {', '.join(runs)}")
    if backend and backend != runs[scheduler]:
        raise UsageError(f"--scheduler {scheduler} starts ranks with the {runs[scheduler]} backend, not "
                         f"--backend {backend}: drop one of them")
    return runs[scheduler]


CLUSTER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def check_clusters(text: str) -> str:
    """A --clusters value as sbatch takes it: cluster names, comma-separated, or `all`."""
    names = [n.strip() for n in text.split(",")] if text.strip() else []
    for name in names:
        if not CLUSTER.fullmatch(name):
            raise UsageError(f"--clusters: {one_line('cluster', name)!r} is not a cluster name (letters, digits, "
                             "'_', '.', '-'); give them comma-separated, e.g. --clusters alpha,beta, or all")
    return ",".join(names)


def plan_record(opts, check: bool):
    """plan_launch for a batch job, its record folder claimed (an exclusive mkdir) once the plan
    and its script are known good: submits started together in one folder each take their own
    record, as launches do (plan.claimed_plan). A name taken between the plan's look and the claim
    is planned again, and the next look passes it by (record.new_run_dir)."""
    from dataclasses import replace

    from hpcai.run.plan import plan_launch

    while True:
        plan = plan_launch(opts, check=check)
        check_batch(plan, opts)  # what can be refused is refused before a script is written
        batch_script(plan, replace(opts, output_dir=plan.run_dir), sys.executable)
        if opts.rest:  # what slurmrestd cannot carry, and a missing token, before anything is written
            from hpcai.run import rest

            rest.job_description(plan, opts, _site_sbatch(plan), {})
            if check:
                rest.token()
        if opts.output_dir or record.claim_name(Path(plan.run_dir)):
            return plan


def check_batch(plan, opts, command: str = "submit") -> None:
    """What no batch job of this plan can be: one line naming why."""
    if not plan.backend.batch:
        raise UsageError(f"{command} needs a Slurm, PBS Pro or Flux site; {plan.site} uses the {plan.backend.name} "
                         "backend")
    if plan.backend.batch != "slurm" and (opts.clusters or opts.rest):
        raise UsageError(f"{'--clusters' if opts.clusters else '--rest'} is Slurm's; this job goes to "
                         f"{COMMANDS[plan.backend.batch]} (the {plan.backend.name} backend)")


def write_once(script: Path, text: str) -> None:
    """Write the batch script with hpcai.files.write_new (aside, then linked into place): the link
    fails when the name is taken, by a file or a planted symbolic link, so two submits given one
    --output-dir never write one script, nothing is written through a link, and a reader (sbatch)
    never sees half of it. Private like the rest of the record."""
    try:
        files.write_new(script, text, record.PRIVATE_FILE)
    except FileExistsError:
        raise UsageError(f"{script.parent} already holds a batch script ({script.name}) of another submit; "
                         "a run never shares a record: choose another --output-dir") from None


def wait_for(job: str, run_dir, timeout_s: float | None, rest_url: str = "") -> int:
    """Wait for one submitted job (ID or ID;CLUSTER; through slurmrestd at REST_URL when given);
    report how it ended; its exit code (0, 1, or 130 cancelled)."""
    from hpcai.run import jobs

    say(f"waiting for job {jobs.shown(job)} …")
    state, message = outcome(job, Path(run_dir), timeout_s, rest_url)
    say(f"job {jobs.shown(job)}: {message}\nrun record: {run_dir}")
    return {"completed": 0, "cancelled": 130}.get(state, 1)


def outcome(job: str, run_dir: Path, timeout_s: float | None, rest_url: str = "") -> tuple[str, str]:
    """Wait for one job on the scheduler its script was written for; (state, message) from its
    record, with what the scheduler says of a job that left no final status."""
    from hpcai.run import jobs

    if (run_dir / PBS_SCRIPT).exists():
        from hpcai.run import pbs

        pbs.wait(job, timeout_s)
        return jobs.final_state(run_dir, job, "")
    if (run_dir / FLUX_SCRIPT).exists():
        from hpcai.run import flux_batch

        return jobs.final_state(run_dir, job, flux_batch.wait(job, timeout_s), "Flux")
    if rest_url:
        from hpcai.run import rest

        return jobs.final_state(run_dir, job, rest.wait(rest_url, job, timeout_s))
    jobs.wait_for_jobs([job], timeout_s)
    return jobs.final_state(run_dir, job)


def _site_sbatch(plan) -> tuple[str, ...]:
    from hpcai.run.site import load_site  # planning read it already: no import cost here

    return load_site(plan.site).sbatch_options
