"""What changed between runs: `hpcai results diff A B` (provenance, hpcai.results.diff) and
`hpcai results compare B --against A` (each figure's ratio with a confidence interval,
hpcai.results.significance). Registered on the results app by hpcai.cli.results."""

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


def register(app: typer.Typer) -> None:
    app.command("diff")(diff_cmd)
