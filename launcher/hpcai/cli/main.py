"""Assemble the CLI and turn errors into one line and an exit code.

Every command module exposes `register(app)`. Modules import only typer at the top so that
`hpcai launch --dry-run` stays fast; heavy libraries (docker, jinja2, matplotlib) are imported
inside the commands that need them.
"""

from __future__ import annotations

import sys

import typer

try:  # typer >= 0.26 vendors click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - older typer with click installed
    from click import exceptions as click_exc

from hpcai import __version__
from hpcai.cli import build, doctor, launch, payloads, results, sites, sweep
from hpcai.errors import HpcaiError

# Exit/Abort moved between click and typer across versions: catch whichever exist.
_EXIT = tuple({typer.Exit, getattr(click_exc, "Exit", typer.Exit)})
_ABORT = tuple({typer.Abort, getattr(click_exc, "Abort", typer.Abort)})

app = typer.Typer(
    name="hpcai",
    help="Build AI container images for supercomputers and launch them correctly.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        print(f"hpcai {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """hpcai: images (build, render, sif), launching (launch, submit, sweep), results."""


for module in (build, launch, sweep, payloads, results, sites, doctor):
    module.register(app)


def _fail(message: str, code: int) -> None:
    from hpcai.console import err

    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False, soft_wrap=True)
    sys.exit(code)


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point: no tracebacks for user errors, exit 2 for bad input."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:  # `launch --dry-run/--json` must start fast: parsed without typer (see cli/launch.py)
        fast = launch.fast_preview(args)
    except HpcaiError as exc:
        _fail(str(exc), exc.exit_code)
    if fast is not None:
        sys.exit(fast)
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=argv, prog_name="hpcai", standalone_mode=False)
    except _EXIT as exc:
        sys.exit(exc.exit_code)
    except _ABORT:
        _fail("interrupted", 130)
    except click_exc.ClickException as exc:  # usage errors: unknown option, bad value, missing arg
        _fail(exc.format_message().replace("\n", " "), 2)
    except HpcaiError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    sys.exit(rv if isinstance(rv, int) else 0)
