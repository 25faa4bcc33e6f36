"""What changed between runs: `hpcai results diff A B` (provenance, hpcai.results.diff),
`hpcai results compare B --against A` (each figure's ratio with a confidence interval,
hpcai.results.significance) and `hpcai results report` (the HTML page with the regressions
marked, hpcai.results.report). Registered on the results app by hpcai.cli.results."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hpcai.cli.results_tables import print_table, read_records
from hpcai.output import emit_json


def compare_against(runs: Optional[list[Path]], against: Path, tolerance: float, baseline: Optional[Path],
                     as_json: bool) -> None:
    """`compare B --against A`: each figure both sides measured, B/A with its interval and verdict."""
    from rich.table import Table

    from hpcai.console import cell, err, plain
    from hpcai.errors import UsageError
    from hpcai.results.compare import against as pair, unpaired
    from hpcai.results.significance import REGRESSION

    if baseline is not None:
        raise UsageError("--against compares runs with runs, --baseline with references: give one of them")
    a, b = read_records([against]), read_records(runs)
    rows = pair(a, b, tolerance)
    for line in unpaired(a, b):
        err.print(f"note: {plain(line)}", markup=False, highlight=False, soft_wrap=True)
    if not rows:
        raise UsageError("no configuration and metric measured on both sides: nothing to compare")
    if as_json:
        emit_json({"tolerance": tolerance, "rows": [{"config": r.config, "metric": r.metric, "unit": r.unit,
                                                     "better": r.better, **r.change.__dict__} for r in rows]})
    else:
        table = Table(title=cell(f"runs against {against} (tolerance {tolerance:.0%}, 95 % intervals)"))
        for col in ("configuration", "metric", "n A", "n B", "ratio B/A", "95 % interval", "p (Mann–Whitney)",
                    "verdict"):
            table.add_column(col)
        for r in rows:
            c = r.change
            interval = f"{c.low:.3f} – {c.high:.3f}" if c.low is not None else "-"
            table.add_row(*map(cell, (r.config, f"{r.metric} ({r.unit}, {r.better})", c.n_a, c.n_b,
                                      f"{c.ratio:.3f}" if c.ratio is not None else "-", interval,
                                      f"{c.p_value:.3g}" if c.p_value is not None else "-")),
                          f"[{'red' if c.verdict == REGRESSION else 'green' if c.verdict != 'undecided' else 'yellow'}]"
                          f"{c.verdict}[/]")
        print_table(table)
    if any(r.change.verdict == REGRESSION for r in rows):
        raise typer.Exit(1)


def diff_cmd(
    a: Path = typer.Argument(..., metavar="A", help="A run record (the earlier run, say)."),
    b: Path = typer.Argument(..., metavar="B", help="Another run record."),
    as_json: bool = typer.Option(False, "--json", help="Print the differences as JSON."),
) -> None:
    """What differs in the provenance of two runs, likeliest cause of a changed figure first:
    component versions, NCCL, the libfabric and MPI mapped, the host MPI, the image, the
    environment, geometry and nodes, the launch, the payload, hpcai."""
    from rich.table import Table

    from hpcai.console import cell, err, plain
    from hpcai.errors import UsageError
    from hpcai.results.diff import diff, unrecorded
    from hpcai.results.loading import load

    for path in (a, b):
        if not path.exists():
            raise UsageError(f"no such run record: {path}")
    ra, rb = load(a), load(b)
    found = diff(ra, rb)
    if as_json:
        emit_json({"a": str(a), "b": str(b), "differences": [{"rank": d.rank, "area": d.area, "key": d.key,
                                                              "a": d.a, "b": d.b} for d in found],
                   "not_recorded": unrecorded(ra, rb)})
        return
    table = Table(title=cell(f"{a.name} → {b.name}: {len(found)} differences"))
    for col in ("rank", "area", "key", "A", "B"):
        table.add_column(col)
    for d in found:
        table.add_row(*map(cell, (d.rank, d.area, d.key, d.a, d.b)))
    print_table(table)
    for line in unrecorded(ra, rb):
        err.print(f"note: {plain(line)}", markup=False, highlight=False, soft_wrap=True)


def report_cmd(
    runs: Optional[list[Path]] = typer.Argument(None, help="Run-record folders, or folders holding them. Default: "
                                                           "./runs (or --history)."),
    output: Path = typer.Option(..., "--output", "-o", help="The HTML file to write."),
    history: Optional[str] = typer.Option(None, "--history", metavar="PAYLOAD", help="The runs of PAYLOAD the run "
                                          "history holds (hpcai results index), instead of folders."),
    site: Optional[str] = typer.Option(None, "--site", help="With --history: only runs on this site."),
    db: Optional[Path] = typer.Option(None, "--db", metavar="FILE", help="With --history: the history database."),
    tolerance: float = typer.Option(0.05, "--tolerance", min=0.0, max=0.9, help="A change smaller than this share "
                                    "is no change (default 0.05)."),
) -> None:
    """One self-contained HTML page over runs: per payload a plot per metric, the runs, their
    provenance, and the regressions between the newest image and the one before, marked."""
    from hpcai.console import plain
    from hpcai.errors import UsageError
    from hpcai.output import say
    from hpcai.results import report

    if history is not None:
        if runs:
            raise UsageError("give run folders or --history PAYLOAD, not both")
        from hpcai.results import history as hist

        conn = hist.connect(db)
        try:
            found = [p for p in hist.run_dirs(conn, history, site) if p.is_dir()]
        finally:
            conn.close()
        if not found:
            raise UsageError(f"the history holds no readable runs of {history!r}{f' on {site}' if site else ''}")
        runs = found
    elif site is not None or db is not None:
        raise UsageError("--site and --db go with --history")
    marked = report.write(read_records(runs), output, tolerance)
    say(f"wrote {plain(output, lines=False)} ({marked} regression{'s' if marked != 1 else ''} marked)")


def register(app: typer.Typer) -> None:
    app.command("diff")(diff_cmd)
    app.command("report")(report_cmd)
