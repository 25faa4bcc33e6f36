"""Assemble the CLI and turn errors into one line and an exit code.

Every command module exposes `register(app)`. Modules import only typer at the top so that
`hpcai launch --dry-run` stays fast; heavy libraries (docker, jinja2, matplotlib) are imported
inside the commands that need them. `hpcai launch` itself is parsed before typer is even imported
(typer + its pydantic layer cost more than the 0.5 s dry-run budget; see cli/launch.py), so the
typer app is built on first use: `hpcai.cli.main.app` still works as an attribute.
"""

from __future__ import annotations

import sys

from hpcai.errors import HpcaiError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms) on every launch
if TYPE_CHECKING:
    from typing import Any

_APP: Any = None


def _build_app() -> Any:
    import typer

    from hpcai import __version__
    from hpcai.cli import build, doctor, launch, payloads, results, sites, sweep

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
            from hpcai.output import emit

            emit(f"hpcai {__version__}")
            raise typer.Exit()

    @app.callback()
    def _main(
        version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                     help="Print the version and exit."),
    ) -> None:
        """hpcai: images (build, render, sif), launching (launch, submit, sweep), results."""

    for module in (build, launch, sweep, payloads, results, sites, doctor):
        module.register(app)
    return app


def __getattr__(name: str) -> Any:
    global _APP
    if name == "app":
        if _APP is None:
            _APP = _build_app()
        return _APP
    raise AttributeError(name)


def _fail(message: str, code: int, fast_exit: bool = False) -> None:
    from rich.markup import escape

    from hpcai.console import err, plain

    # the message echoes what the user gave: shown as text (no markup, no terminal control)
    err.print(f"[bold red]error:[/] {escape(plain(message))}", markup=True, highlight=False, soft_wrap=True)
    _exit(code, fast_exit)


def _interrupted(fast_exit: bool = False) -> None:
    """Ctrl-C: one line and exit 130; a second or third Ctrl-C while saying so is ignored (it
    would otherwise interrupt the message with a traceback)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _fail("interrupted", 130, fast_exit)


def _os_error(exc: OSError) -> str:
    """An OSError as one line: what failed and on which file (a full disk, a file where a folder
    was expected, a read-only folder, stdout on a full device)."""
    where = exc.filename or "the output"
    return f"{exc.strerror or exc}: {where}"


def _exit(code: int, fast_exit: bool) -> None:
    if not fast_exit:
        sys.exit(code)
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # stdout on a full device: the message went to stderr already
            pass
    os._exit(code)


def main() -> None:
    """Console-script entry point (`hpcai`, `python -m hpcai`)."""
    run(fast_exit=True)


def run(argv: list[str] | None = None, fast_exit: bool = False) -> None:
    """The CLI: no tracebacks for user errors, exit 2 for bad input.

    fast_exit: after `hpcai launch`, leave with os._exit once stdout/stderr are flushed. The
    interpreter's teardown (finalising every imported module) costs 5-10 ms of each launch, and
    by then every record file is written and closed. Tests calling run() in-process leave it off.
    """
    from hpcai.cli import launch

    args = sys.argv[1:] if argv is None else list(argv)
    try:  # `launch` must start fast: parsed without typer (see cli/launch.py)
        fast = launch.fast_launch(args)
    except HpcaiError as exc:
        _fail(str(exc), exc.exit_code, fast_exit)
    except KeyboardInterrupt:
        _interrupted(fast_exit)
    except OSError as exc:
        _fail(_os_error(exc), 1, fast_exit)
    if fast is not None:
        _exit(fast, fast_exit)

    import typer

    try:  # typer >= 0.26 vendors click
        from typer._click import exceptions as click_exc
    except ImportError:  # pragma: no cover - older typer with click installed
        from click import exceptions as click_exc
    # Exit/Abort moved between click and typer across versions: catch whichever exist.
    exits = tuple({typer.Exit, getattr(click_exc, "Exit", typer.Exit)})
    aborts = tuple({typer.Abort, getattr(click_exc, "Abort", typer.Abort)})

    launch.RAW_ARGS = args
    command = typer.main.get_command(__getattr__("app"))
    try:
        rv = command.main(args=argv, prog_name="hpcai", standalone_mode=False)
    except exits as exc:
        sys.exit(exc.exit_code)
    except aborts:
        _interrupted()
    except click_exc.ClickException as exc:  # usage errors: unknown option, bad value, missing arg
        _fail(exc.format_message().replace("\n", " "), 2)
    except HpcaiError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _interrupted()
    except OSError as exc:
        _fail(_os_error(exc), 1)
    try:
        sys.stdout.flush()
    except OSError as exc:  # stdout on a full device or a closed pipe
        _fail(_os_error(exc), 1)
    sys.exit(rv if isinstance(rv, int) else 0)
