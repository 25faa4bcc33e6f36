"""CLI command: `hpcai sweep --nodes 1,2,4,8 [--var batch_size=32,64] PAYLOAD` — scaling series.

Without --submit every point runs now, one after another; with --submit each point becomes its
own batch job (sbatch, qsub or flux batch, as `hpcai submit` writes it) and the command returns once all are queued, or with
--wait once all have ended, printing the results and scaling tables; --no-submit writes the
scripts only. With --jube FILE.xml it writes the sweep as a JUBE benchmark instead and runs nothing
(hpcai.run.jube).
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from hpcai.run.options import SWEEP, command, plan_fields


def sweep(payload: str, nodes: str, var: list[str] | None, repeat: int, output_dir: str | None, dry_run: bool,
          submit: bool | None, wait: bool, wait_timeout: float | None, jube: str | None = None,
          **plan: object) -> None:
    """Run a payload over node counts (× variable values): one run record per point, in one sweep folder."""
    import time

    from hpcai.console import err, out
    from hpcai.errors import UsageError
    from hpcai.run import sweep as sw

    if (wait or wait_timeout is not None) and not submit and jube is None:
        raise UsageError("--wait waits for submitted jobs: use it with --submit")
    node_list = sw.parse_nodes(nodes)
    variables = sw.parse_vars(var or [])
    pts = sw.points(node_list, variables, repeat)  # refuses a grid above sw.MAX_POINTS first
    sw.check_vars(payload, variables)  # before the dry-run's listing: an unknown name is never shown
    if jube is not None:
        if dry_run:
            raise UsageError("--jube writes the benchmark file and runs nothing already: drop --dry-run")
        _jube(Path(jube), payload, node_list, variables, repeat, output_dir, submit, wait, wait_timeout, plan)
        return
    if dry_run:
        for p in pts:
            extra = " ".join(f"{k}={v}" for k, v in p["payload_vars"].items())
            rep = f" repetition={p['repetition']}" if "repetition" in p else ""
            out.print(f"{payload} nodes={p['nodes']} {extra}".rstrip() + rep, markup=False)
        return
    base = plan_fields(plan, SWEEP)  # every launch option but the node count, host list and folder
    folder = sw.claim(Path(output_dir) if output_dir else Path("runs") / time.strftime("sweep-%Y%m%d-%H%M%S"),
                      payload, unique=output_dir is None)
    if submit is not None:
        runs = sw.submit_sweep(payload, node_list, variables, folder, base, submit=submit, repeat=repeat)
        for r in runs:  # stdout like `hpcai submit`: job ids, or the scripts with --no-submit
            out.print(r["job_id"] or r["script"], markup=False, soft_wrap=True)
        what = "jobs submitted" if submit else "batch scripts written"
        if submit and (wait or wait_timeout is not None):
            _wait(runs, folder, wait_timeout)
            return
        err.print(f"sweep: {len(runs)} {what} in {folder}; once they end, `hpcai results show {folder}`",
                  soft_wrap=True, markup=False)
        return
    run_dirs = sw.run_sweep(payload, node_list, variables, folder, base, repeat=repeat)
    err.print(f"sweep of {len(run_dirs)} runs in {folder}; see `hpcai results show {folder}`", soft_wrap=True)


def _jube(path: Path, payload: str, nodes: list[int], variables: dict[str, list[str]], repeat: int,
          output_dir: str | None, submit: bool | None, wait: bool, wait_timeout: float | None,
          plan: dict) -> None:
    """Write the JUBE benchmark; its path on stdout, how to run it on stderr."""
    from hpcai.console import err, out
    from hpcai.run import jube
    from hpcai.run import sweep as sw

    jube.jube_file(path)  # the name first: a wrong one is refused before any point is planned
    js = jube.make(payload, nodes, variables, repeat, plan_fields(plan, SWEEP), submit, wait, wait_timeout,
                   output_dir)
    jube.write(path, js)
    out.print(str(path.absolute()), markup=False, soft_wrap=True)
    step = "hpcai submit --wait" if js.wait else "hpcai submit" if js.submit else "hpcai launch"
    then = ("`jube continue` on its run folder until `jube status` says FINISHED (the jobs' ends), then "
            if js.submit and not js.wait else "then ")
    err.print(f"sweep: JUBE benchmark of {sw.count_points(nodes, variables, repeat)} points ({step} each) in "
              f"{path}: `jube run {path}`, {then}`jube result -a` on its run folder", soft_wrap=True, markup=False)


def _wait(runs: list[dict], folder: Path, timeout_s: float | None) -> None:
    """Wait for the sweep's jobs, show its tables, and exit 1 naming the points that did not complete."""
    from hpcai import record
    from hpcai.run import jobs
    from hpcai.cli.results import show_cmd
    from hpcai.console import err

    from hpcai.run.submit import SCRIPT, outcome

    err.print(f"sweep: waiting for {len(runs)} jobs in {folder} …", soft_wrap=True, markup=False)
    # Slurm's jobs are followed together (one squeue per poll); PBS's and Flux's one after another,
    # within the one time limit
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def left() -> float | None:
        return None if deadline is None else max(deadline - time.monotonic(), 0)

    jobs.wait_for_jobs([r["job_id"] for r in runs if Path(r["script"]).name == SCRIPT], left())
    ended = [(r, outcome(r["job_id"] or "", Path(r["run_dir"]), left())) for r in runs]
    if any((Path(r["run_dir"]) / record.PLAN).exists() for r in runs):  # else no table: each point says why
        show_cmd([folder])
    bad = [(r, msg) for r, (state, msg) in ended if state != "completed"]
    for r, msg in bad:
        err.print(f"error: {r['nodes']} node(s), job {r['job_id']}: {msg}", soft_wrap=True, markup=False)
    if bad:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app, its options from hpcai/options.py."""
    payload = ("payload", typer.Argument(..., help="Payload to run at every point."), str)
    app.command("sweep", rich_help_panel="Launch")(command(sweep, SWEEP, payload))
