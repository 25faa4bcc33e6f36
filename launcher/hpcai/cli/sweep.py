"""CLI command: `hpcai sweep --nodes 1,2,4,8 [--var batch_size=32,64] PAYLOAD` — scaling series.

Without --submit every point runs now, one after another; with --submit each point becomes its
own sbatch job (as `hpcai submit` writes it) and the command returns once all are queued, or with
--wait once all have ended, printing the results and scaling tables; --no-submit writes the
scripts only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def sweep(
    payload: str = typer.Argument(..., help="Payload to run at every point."),
    nodes: str = typer.Option(..., "--nodes", "-N", help="Node counts, comma-separated: 1,2,4,8."),
    var: Optional[list[str]] = typer.Option(None, "--var", help="Payload variable values: NAME=V1,V2 (repeatable)."),
    site: Optional[str] = typer.Option(None, "--site", help="Site profile (default: detected)."),
    partition: Optional[str] = typer.Option(None, "--partition", "-p", envvar="HPCAI_PARTITION", help="Slurm partition."),
    image: Optional[str] = typer.Option(None, "--image", help="Image to run (tag, SIF or SquashFS)."),
    runtime: Optional[str] = typer.Option(None, "--runtime", help="Container runtime (default: the site's)."),
    mpi: Optional[str] = typer.Option(None, "--mpi", help="srun --mpi type (pmix, pmi2, …; default: the site's)."),
    ntasks_per_node: Optional[int] = typer.Option(None, "--ntasks-per-node", help="Ranks per node."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", help="GPUs per node (default: the site's)."),
    account: Optional[str] = typer.Option(None, "--account", "-A", envvar="HPCAI_ACCOUNT", help="Slurm account."),
    time_: Optional[str] = typer.Option(None, "--time", "-t", help="Time limit per point (Slurm format)."),
    bind: Optional[list[str]] = typer.Option(None, "--bind", "-B", help="SRC[:DST], repeatable (as for launch)."),
    data: Optional[str] = typer.Option(None, "--data", envvar="HPCAI_DATA", help="Folder of real datasets and models (as for launch)."),
    env: Optional[list[str]] = typer.Option(None, "--env", "-e", help="KEY=VALUE or KEY, repeatable (as for launch)."),
    profile: Optional[list[str]] = typer.Option(None, "--profile", help="Payload profile, repeatable (as for launch)."),
    srun_arg: Optional[list[str]] = typer.Option(None, "--srun-arg", help="Extra srun option, repeatable (as for launch)."),
    repeat: int = typer.Option(1, "--repeat", help="Run every point N times, one record each."),
    energy: bool = typer.Option(False, "--energy", help="Measure power with jpwr at every point."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", "-o", help="Sweep folder (default runs/sweep-<time>)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the points and exit."),
    submit: Optional[bool] = typer.Option(None, "--submit/--no-submit", show_default=False,
                                          help="One sbatch job per point (--no-submit: write the scripts only) "
                                               "(default: run every point now)."),
    wait: bool = typer.Option(False, "--wait", help="With --submit: wait for every job, then print the tables."),
    wait_timeout: Optional[float] = typer.Option(None, "--wait-timeout", help="Give up waiting after SECONDS."),
) -> None:
    """Run a payload over node counts (× variable values): one run record per point, in one sweep folder."""
    import time

    from hpcai.console import err, out
    from hpcai.errors import UsageError
    from hpcai import sweep as sw

    if (wait or wait_timeout is not None) and not submit:
        raise UsageError("--wait waits for submitted jobs: use it with --submit")
    node_list = sw.parse_nodes(nodes)
    variables = sw.parse_vars(var or [])
    pts = sw.points(node_list, variables, repeat)
    if dry_run:
        for p in pts:
            extra = " ".join(f"{k}={v}" for k, v in p["payload_vars"].items())
            rep = f" repetition={p['repetition']}" if "repetition" in p else ""
            out.print(f"{payload} nodes={p['nodes']} {extra}".rstrip() + rep, markup=False)
        return
    base = {k: v for k, v in (("site", site), ("partition", partition), ("image", image), ("runtime", runtime),
                              ("mpi", mpi), ("ntasks_per_node", ntasks_per_node), ("gpus_per_node", gpus_per_node),
                              ("account", account), ("time", time_), ("binds", tuple(bind or ()) or None),
                              ("env", tuple(env or ()) or None), ("profiles", tuple(profile or ()) or None),
                              ("srun_args", tuple(srun_arg or ()) or None), ("data", data or None))
            if v is not None}
    if energy:
        base["energy"] = True
    folder = sw.claim(output_dir or Path("runs") / time.strftime("sweep-%Y%m%d-%H%M%S"), payload,
                      unique=output_dir is None)
    if submit is not None:
        runs = sw.submit_sweep(payload, node_list, variables, folder, base, submit=submit, repeat=repeat)
        for r in runs:  # stdout like `hpcai submit`: job ids, or the scripts with --no-submit
            out.print(r["job_id"] or r["script"], markup=False, soft_wrap=True)
        what = "jobs submitted" if submit else "sbatch scripts written"
        if submit and (wait or wait_timeout is not None):
            _wait(runs, folder, wait_timeout)
            return
        err.print(f"sweep: {len(runs)} {what} in {folder}; once they end, `hpcai results show {folder}`",
                  soft_wrap=True, markup=False)
        return
    run_dirs = sw.run_sweep(payload, node_list, variables, folder, base, repeat=repeat)
    err.print(f"sweep of {len(run_dirs)} runs in {folder}; see `hpcai results show {folder}`", soft_wrap=True)


def _wait(runs: list[dict], folder: Path, timeout_s: float | None) -> None:
    """Wait for the sweep's jobs, show its tables, and exit 1 naming the points that did not complete."""
    from hpcai import jobs
    from hpcai.cli.results import show_cmd
    from hpcai.console import err

    err.print(f"sweep: waiting for {len(runs)} jobs in {folder} …", soft_wrap=True, markup=False)
    jobs.wait_for_jobs([r["job_id"] for r in runs], timeout_s)
    show_cmd([folder])
    bad = [(r, jobs.final_state(Path(r["run_dir"]))) for r in runs]
    bad = [(r, msg) for r, (state, msg) in bad if state != "completed"]
    for r, msg in bad:
        err.print(f"error: {r['nodes']} node(s), job {r['job_id']}: {msg}", soft_wrap=True, markup=False)
    if bad:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("sweep", rich_help_panel="Launch")(sweep)
