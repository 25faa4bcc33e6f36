"""Assemble the CLI and turn errors into one line and an exit code.

Every command module exposes `register(app)`. Modules import only typer at the top so that
`hpcai launch` stays fast; heavy libraries (docker, jinja2, matplotlib) are imported inside the
commands that need them. One command line definition, typer's: the app is built on first use
(`hpcai.cli.main.app` still works as an attribute), and `plain_values` keeps typer 0.29 from
importing pydantic for the plain option types every launch has (see its docstring).

This module is the console script's target, so it imports nothing of hpcai's at its top: a Ctrl-C
at any moment after it starts to load, while typer and the commands are still being imported
too, ends in `error: interrupted` and exit 130 (`main`), never a traceback.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms) on every launch
if TYPE_CHECKING:
    from typing import Any

_APP: Any = None


# Which module under hpcai.cli registers each command or group: `hpcai launch` imports only
# launch's (a unit test checks this table against what the modules register).
COMMANDS = {"build": "build", "render": "build", "versions": "build", "inspect": "build", "sif": "build",
            "push": "registry", "login": "registry",
            "sqsh": "sqsh", "edf": "edf", "export": "export", "launch": "launch", "submit": "launch", "stage": "stage", "sweep": "sweep",
            "payloads": "payloads", "results": "results", "sites": "sites", "doctor": "doctor"}
MODULES = ("build", "registry", "sqsh", "edf", "export", "launch", "stage", "sweep", "payloads", "results", "sites", "doctor")  # help's order


def _build_app(modules: tuple[str, ...] = MODULES) -> Any:
    import importlib

    import typer

    from hpcai import __version__

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

    for name in modules:
        importlib.import_module(f"hpcai.cli.{name}").register(app)
    return app


def __getattr__(name: str) -> Any:
    global _APP
    if name == "app":
        if _APP is None:
            _APP = _build_app()
        return _APP
    raise AttributeError(name)


def _only(app: Any, name: str | None) -> Any:
    """The app with only the command or group NAME when it has one (else the whole app): typer
    makes every command's parameters when it builds the click group, ~8 ms of each launch for
    commands it will not run. Help and errors for an unknown name still see every command."""
    import copy

    commands = [c for c in app.registered_commands if c.name == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not (commands or groups):
        return app
    small = copy.copy(app)
    small.registered_commands, small.registered_groups = commands, groups
    return small


def plain_values(command: Any) -> None:
    """Give each str, int, float, bool, list[str], Path and list[Path] parameter of COMMAND (a click command or
    group, and its subcommands) a plain Python conversion in typer's own runtime-parameter shape.

    typer 0.29 converts every parameter value through a pydantic TypeAdapter it builds on first
    use (typer.core.TyperParameter.get_runtime_param); there is no setting to turn that off, and
    `typer._adapters` imports pydantic at its top: ~70 ms of each `hpcai launch` on the 2-core
    test machine, against a 0.8-1.3 s 8-rank job (docs/development.md). Richer types (path checks, bounds, choices, parsers) keep
    typer's own conversion, so pydantic is imported only by the commands that have them. Where
    typer has no such internals (another version), nothing changes: typer converts as it always
    does. Error messages are pydantic's words, so the output does not depend on the path taken.
    """
    try:
        from typer._click.core import Context
        from typer._coercion import RuntimeParam
        from typer._click.exceptions import BadParameter
        from typer._param_types import _path_options_requested
    except ImportError:  # pragma: no cover - another typer: its own conversion applies
        return
    from dataclasses import dataclass
    from pathlib import Path

    words = {int: "a valid integer, unable to parse string as an integer",
             float: "a valid number, unable to parse string as a number",
             bool: "a valid boolean, unable to interpret input"}
    truth = {**dict.fromkeys(("1", "true", "t", "yes", "y", "on"), True),
             **dict.fromkeys(("", "0", "false", "f", "no", "n", "off"), False)}  # pydantic's, and typer's ""

    def to_bool(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        return truth[str(value).strip().lower()]  # KeyError: not a boolean

    @dataclass(frozen=True)
    class Plain(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kind = self.annotation
            if isinstance(value, (list, tuple)):  # list[str], list[Path]: several values
                return [Path(v) if kind == list[Path] else str(v) for v in value]
            try:
                return (to_bool(value) if kind is bool else kind(value) if kind in words
                        else Path(value) if kind is Path else str(value))
            except (ValueError, KeyError):
                raise BadParameter(f"Input should be {words[kind]}", ctx=ctx, param=param) from None

    plain = (str, int, float, bool, list[str], Path, list[Path])
    for cmd in [command, *getattr(command, "commands", {}).values()]:
        if cmd is not command and hasattr(cmd, "commands"):
            plain_values(cmd)
            continue
        # --help too: click makes it on first use (and keeps it), and converts its value as well
        for param in [*getattr(cmd, "params", ()), cmd.get_help_option(Context(cmd))]:
            desc = getattr(param, "type_descriptor", None)
            if desc is None or getattr(param, "_runtime_param", 0) is not None or desc.annotation not in plain:
                continue
            info = desc.parameter_info
            if info.parser is not None or info.min is not None or info.max is not None or desc.file_annotation:
                continue
            if desc.annotation in (Path, list[Path]) and _path_options_requested(info):
                continue  # exists=, resolve_path=, …: typer's own checks
            param._runtime_param = Plain(parameter_info=info, annotation=desc.annotation)


def _fail(message: str, code: int, fast_exit: bool = False) -> None:
    from rich.markup import escape

    from hpcai.console import err, plain

    # the message echoes what the user gave: shown as text (no markup, no terminal control), on one line
    err.print(f"[bold red]error:[/] {escape(plain(message, lines=False))}", markup=True, highlight=False,
              soft_wrap=True)
    _exit(code, fast_exit)


def _interrupted(fast_exit: bool = False) -> None:
    """Ctrl-C: one line and exit 130; a second or third Ctrl-C while saying so is ignored (it
    would otherwise interrupt the message with a traceback)."""
    import signal

    global _SAID_INTERRUPTED
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _SAID_INTERRUPTED = True
    _fail("interrupted", 130, fast_exit)


_SAID_INTERRUPTED = False  # set by _interrupted: main then leaves by _leave_interrupted
_CTRL_C = False  # set by _ctrl_c: typer answers a Ctrl-C inside a command with a silent Exit(130)


def _ctrl_c(_signum: int, _frame: object) -> None:
    """Python's own SIGINT behaviour (KeyboardInterrupt), remembered: typer turns the
    KeyboardInterrupt raised inside a command into Exit(130), which `run` then cannot tell from a
    command's own exit code 130 (`submit --wait` of a cancelled job)."""
    global _CTRL_C
    _CTRL_C = True
    raise KeyboardInterrupt


def _swallowed_ctrl_c(unraisable) -> None:
    """sys.unraisablehook: a Ctrl-C that landed in a weakref callback of the import machinery is
    "ignored" by Python (printed with a traceback, and the command goes on). It is remembered
    instead, and `run` ends with `error: interrupted`; anything else is Python's."""
    global _SWALLOWED
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        _SWALLOWED = True
    else:
        sys.__unraisablehook__(unraisable)


_SWALLOWED = False


def _interrupt_inside(exc: BaseException) -> bool:
    """A KeyboardInterrupt wrapped by Python: 3.11 turns one raised in a class body's
    __set_name__ (a Ctrl-C while a module defines its classes) into a RuntimeError."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


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
    """Console-script entry point (`hpcai`, `python -m hpcai`): a Ctrl-C at any moment, also
    while the CLI is still being imported, is one line and exit 130. The signal module is
    imported inside the try (its enum import is a few ms a Ctrl-C can land in). A SIGINT ignored
    by whoever started hpcai (a background job of a script) stays ignored."""
    try:
        try:
            import signal

            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                sys.unraisablehook = _swallowed_ctrl_c
                signal.signal(signal.SIGINT, _ctrl_c)
            run(fast_exit=True)
        except KeyboardInterrupt:
            _interrupted()
        except Exception as exc:
            if not _interrupt_inside(exc):
                raise
            _interrupted()
    except SystemExit as exit_:
        # the exit code is decided: a Ctrl-C now could only break into the atexit handlers (a
        # temporary folder being removed) with a traceback. Not an import statement: the try or
        # _interrupted imported signal, and an import is one more moment a Ctrl-C can land in.
        signal = sys.modules["signal"]
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if _SAID_INTERRUPTED:
            _leave_interrupted(exit_.code)
        raise


def _leave_interrupted(code: int) -> None:
    """Exit after `error: interrupted` with the code said, atexit handlers run and streams
    flushed. Not through the interpreter's own exit: CPython 3.11 marks a KeyboardInterrupt raised
    inside exec() of a string (dataclasses and namedtuple build their methods that way, so a
    Ctrl-C while a module loads can land there) as unhandled even when it was caught, and at exit
    then kills itself with SIGINT: exit -2 after the line that said 130."""
    import atexit
    import os

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass
    os._exit(code)


def run(argv: list[str] | None = None, fast_exit: bool = False) -> None:
    """The CLI: no tracebacks for user errors, exit 2 for bad input.

    fast_exit: after `hpcai launch`, leave with os._exit once stdout/stderr are flushed. The
    interpreter's teardown (finalising every imported module) costs 5-10 ms of each launch, and
    by then every record file is written and closed. Other commands exit normally (atexit
    handlers, temporary folders). Tests calling run() in-process leave it off.
    """
    from hpcai.errors import HpcaiError

    args = sys.argv[1:] if argv is None else list(argv)
    fast_exit = fast_exit and args[:1] == ["launch"]
    name = args[0] if args else None
    if COMMANDS.get(name) == "launch":  # launch, submit
        from hpcai.cli import launch

        launch.RAW_ARGS = args
        if name == "launch":
            launch.prefetch_hint(args[1:])  # the engine answers while typer loads
    import typer

    try:  # typer >= 0.26 vendors click
        from typer._click import exceptions as click_exc
    except ImportError:  # pragma: no cover - older typer with click installed
        from click import exceptions as click_exc
    # Exit/Abort moved between click and typer across versions: catch whichever exist.
    exits = tuple({typer.Exit, getattr(click_exc, "Exit", typer.Exit)})
    aborts = tuple({typer.Abort, getattr(click_exc, "Abort", typer.Abort)})

    # a known command: only its module's commands are made (the others' imports cost each run)
    app = _build_app((COMMANDS[name],)) if name in COMMANDS else __getattr__("app")
    command = typer.main.get_command(_only(app, name))
    plain_values(command)
    try:
        rv = command.main(args=args, prog_name="hpcai", standalone_mode=False)
    except exits as exc:
        _exit(exc.exit_code, fast_exit)
    except aborts:
        _interrupted(fast_exit)
    except click_exc.ClickException as exc:  # usage errors: unknown option, bad value, missing arg
        _fail(exc.format_message().replace("\n", " "), 2, fast_exit)
    except HpcaiError as exc:
        _fail(str(exc), exc.exit_code, fast_exit)
    except KeyboardInterrupt:
        _interrupted(fast_exit)
    except OSError as exc:
        _fail(_os_error(exc), 1, fast_exit)
    if (rv == 130 and _CTRL_C) or _SWALLOWED:  # typer returns Exit(130) for a Ctrl-C in a command;
        _interrupted(fast_exit)  # Python swallows one in a weakref callback: say them like any other
    try:
        sys.stdout.flush()
    except OSError as exc:  # stdout on a full device or a closed pipe
        _fail(_os_error(exc), 1, fast_exit)
    _exit(rv if isinstance(rv, int) else 0, fast_exit)
