"""CLI commands `hpcai results index` and `hpcai results history`: the run history database
(hpcai.results.history), registered on the results app by hpcai.cli.results."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

DB_HELP = "The history database (default: $HPCAI_RESULTS_DB, else ~/.local/share/hpcai/history.sqlite)."


def _db(path: Optional[Path]):
    from hpcai.results import history

    return history.connect(path)


def index_cmd(
    runs: Optional[list[Path]] = typer.Argument(None, help="Run-record folders, or folders holding them. Default: ./runs"),
    db: Optional[Path] = typer.Option(None, "--db", metavar="FILE", help=DB_HELP),
) -> None:
    """Index run records into the history database: new ones added, changed ones read again, the
    rest left (safe to run again, and beside launches that index their own records)."""
    from hpcai.console import err, plain
    from hpcai.output import say
    from hpcai.results import history

    conn = _db(db)
    try:
        done = history.index(list(runs) if runs else [Path("runs")], conn)
    finally:
        conn.close()
    for line in done.skipped:
        err.print(f"warning: {plain(line)}", markup=False, highlight=False, soft_wrap=True)
    say(f"indexed: {done.added} added, {done.updated} updated, {done.unchanged} unchanged, "
        f"{len(done.skipped)} skipped")


def history_cmd(
    payload: str = typer.Argument(..., help="The payload whose series to show (nccl-tests, ddp-bench, …)."),
    site: Optional[str] = typer.Option(None, "--site", help="Only runs on this site."),
    metric: Optional[list[str]] = typer.Option(None, "--metric", "-m", help="Only this metric; repeatable."),
    db: Optional[Path] = typer.Option(None, "--db", metavar="FILE", help=DB_HELP),
    plot: Optional[Path] = typer.Option(None, "--plot", metavar="FILE", help="Also plot the series (.png, .svg, "
                                                                             ".pdf): one axis per metric."),
    as_json: bool = typer.Option(False, "--json", help="Print the series as JSON."),
) -> None:
    """A payload's runs over time, oldest first, from the history database: when, where, on which
    image, and each metric; a change of image digest is marked, as where a series may step."""
    from hpcai.errors import UsageError, unknown
    from hpcai.output import emit_json
    from hpcai.results import history

    conn = _db(db)
    try:
        names = history.metric_names(conn, payload)
        for name in metric or []:
            if name not in names:
                raise unknown(f"metric of {payload}", name, names) if names else \
                    UsageError(f"no runs of {payload!r} in the history ({history.default_path() if db is None else db});"
                               " `hpcai results index DIR` adds existing records")
        points = history.series(conn, payload, site, list(metric) if metric else None)
    finally:
        conn.close()
    if not points:
        raise UsageError(f"no runs of {payload!r}{f' on {site}' if site else ''} in the history; "
                         "`hpcai results index DIR` adds existing records")
    if as_json:
        emit_json([p.__dict__ for p in points])
    else:
        _table(payload, points)
    if plot:
        from hpcai.results.plot import history_figure, save

        save(history_figure(payload, points), plot)


def _table(payload: str, points) -> None:
    from rich.table import Table

    from hpcai.cli.results_tables import fmt, print_table
    from hpcai.console import cell

    names = list(dict.fromkeys(n for p in points for n in p.values))
    table = Table(title=cell(f"{payload}: {len(points)} runs"))
    for col in ("started", "run", "site", "nodes×ranks", "image", "state",
                *(f"{n} ({next(p.units[n] for p in points if n in p.units)})" for n in names)):
        table.add_column(cell(col))
    last = None
    for p in points:
        image = (p.image_digest[7:19] if p.image_digest.startswith("sha256:") else p.image_digest[:12]) or "-"
        changed = last is not None and p.image_digest != last
        last = p.image_digest
        table.add_row(*map(cell, (p.started, p.name, p.where, f"{p.nodes}×{p.ranks // max(p.nodes, 1)}",
                                  f"{image} (new)" if changed else image, p.state,
                                  *(fmt(p.values.get(n)) for n in names))))
    print_table(table)


def register(app: typer.Typer) -> None:
    app.command("index")(index_cmd)
    app.command("history")(history_cmd)
