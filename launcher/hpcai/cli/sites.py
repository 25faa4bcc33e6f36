"""CLI commands: `sites list`, `sites show NAME` and `sites schema` (site profiles are data: launcher/hpcai/run/sites/*.toml).

A site file may come from a shared HPCAI_SITE_PATH, so every text from it reaches the terminal
through `console.plain`/`cell` (an escape sequence in a description is shown, never run)."""

from __future__ import annotations

import typer

PANEL = "Launch"


def register(app: typer.Typer) -> None:
    """Add the `sites` group to the top-level app."""
    sites = typer.Typer(help="Site profiles: list them, show one, print their JSON Schema.", no_args_is_help=True)

    @sites.command("list")
    def list_sites(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
        """All site profiles, the detected one marked."""
        from hpcai.run.site import detect_site, iter_sites

        rows = list(iter_sites("the list"))  # a broken file: one warning line, the rest listed
        detected = detect_site(sites=rows)
        if as_json:
            from hpcai.output import emit_json

            emit_json([{"name": s.name, "detected": s.name == detected, "backend": s.backend, "runtime": s.runtime,
                        "mpi": s.mpi, "gpu": s.gpu, "source": s.source} for s in rows])
            return
        from rich.table import Table

        from hpcai.console import cell, out

        table = Table("site", "backend", "runtime", "mpi", "gpu", "gpus/node", box=None)
        for s in rows:
            mark = " (detected)" if s.name == detected else ""
            table.add_row(*map(cell, (s.name + mark, s.backend, s.runtime, s.mpi or "default", s.gpu,
                                      s.gpus_per_node)))
        out.print(table)

    @sites.command("show")
    def show(name: str = typer.Argument(..., help="Site name."),
             as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
        """Every field of one site profile, with defaults filled in and binds resolved on this host."""
        from dataclasses import asdict

        from hpcai.redact import redact_env
        from hpcai.run.host import Host
        from hpcai.run.site import load_site, site_binds

        site = load_site(name)
        binds, warnings = site_binds(site, Host())
        # a site's env may hold a token: shown redacted, as every other output does
        data = {**asdict(site), "env": redact_env(site.env), "resolved_binds": [f"{s}:{d}" for s, d in binds],
                "warnings": warnings}
        if as_json:
            from hpcai.output import emit_json

            emit_json(data)
            return
        from hpcai.console import out, plain

        for key, value in data.items():
            if isinstance(value, dict):
                out.print(f"[bold]{key}[/]:", highlight=False)
                for k, v in value.items():
                    out.print(plain(f"  {k} = {v}"), highlight=False, markup=False)
            else:
                shown = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
                out.print(f"[bold]{key}[/]: ", end="", highlight=False)
                # a multi-line description stays indented under its key, so no line can pass for a field
                out.print(plain(shown).replace("\n", "\n  "), highlight=False, markup=False)

    @sites.command("schema")
    def schema() -> None:
        """The site file's rules as JSON Schema (draft 2020-12), for an editor to check a site file
        as it is written: every key, its type, choices, bounds and shape, and no other key. hpcai
        itself checks the same rules when it reads the file (hpcai.run.site.SCHEMA)."""
        from hpcai.output import emit_json
        from hpcai.run.site import SCHEMA

        emit_json(SCHEMA.json_schema("hpcai site profile (launcher/hpcai/run/sites/NAME.toml)"), sort_keys=True)

    app.add_typer(sites, name="sites", rich_help_panel=PANEL)
