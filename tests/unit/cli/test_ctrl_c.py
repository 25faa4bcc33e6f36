"""Ctrl-C at any moment of `hpcai` (hostile corpus, round three, issue 25): from its first
milliseconds (imports) to inside a command, it is one line, `error: interrupted`, never a
traceback; a SIGINT the parent ignored stays ignored. Every process is real: the CLI runs as a
subprocess, signals are sent by the kernel."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.hostile

CONSOLE_SCRIPT = Path(sys.executable).with_name("hpcai")
ENTRY_POINTS = {"console script": [str(CONSOLE_SCRIPT)], "python -m hpcai": [sys.executable, "-m", "hpcai"]}


def before_hpcai_runs(err: str) -> bool:
    """A traceback from before hpcai's entry point ran, which no code of a package can catch:
    CPython's own start-up ("Fatal Python error: init_…", "Could not import runpy module", at
    about 6 ms here) or the one import line of the generated console script or runpy (about
    1 ms, loading hpcai.cli.main, which imports nothing of hpcai's at its top). No frame is a
    function of hpcai: modules being loaded (`<module>`) and the import machinery's functions,
    importlib's, runpy's or a meta path finder's (setuptools' _distutils_hack in a venv)."""
    if err.startswith(("Fatal Python error: init_", "Could not import runpy module")):
        return True
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', err)
    return bool(frames) and not any(fn != "<module>" and "/hpcai/" in path for path, fn in frames)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_ctrl_c_in_the_first_milliseconds_is_one_line(entry):
    """SIGINT 0-100 ms after `hpcai --help` starts, a few times each: killed by the signal before
    Python set its handler (-2, a shell says 130), finished (0), or `error: interrupted` and 130."""
    said = 0
    for delay_ms in (0, 5, 20, 50, 100) * 3:
        proc = subprocess.Popen([*ENTRY_POINTS[entry], "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(delay_ms / 1000)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if before_hpcai_runs(err):
            continue
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay_ms, err)
        assert (proc.returncode, err) in ((-signal.SIGINT, ""), (0, ""), (130, "error: interrupted\n")), \
            (delay_ms, proc.returncode, err)
        said += proc.returncode == 130
    assert said, "no SIGINT reached hpcai's own code: nothing was tested"


def hooked(hook: str, counted: str) -> str:
    """A script that installs HOOK (which signals the process itself at a chosen moment), runs
    hpcai's main() and, when main() returns, says how many COUNTED (imports, execs) HOOK saw."""
    return ("import builtins, os, signal, sys\nfrom hpcai.cli.main import main\n" + hook
            + f'sys.argv[0] = "hpcai"\ntry:\n    main()\nfinally:\n    sys.stdout.write(f"{counted}={{seen[0]}}")\n')


# Signals itself (SIGINT) at its N-th import statement once main() runs, or at the import of
# NAME: deterministic, every moment of the imports (typer, rich, the command modules) and of
# typer's help, one by one.
AT_IMPORT = hooked("""
n, name, seen, real = int(sys.argv.pop(1)), sys.argv.pop(1), [0], builtins.__import__
def importing(module, globals=None, locals=None, fromlist=(), level=0):
    seen[0] += 1
    if seen[0] == n or name in (module, *(fromlist or ())):
        os.kill(os.getpid(), signal.SIGINT)
    return real(module, globals, locals, fromlist, level)
builtins.__import__ = importing
""", "imports")


def interrupted_at(n: int, name: str = "-", *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", AT_IMPORT, str(n), name, *(args or ("--help",))],
                          capture_output=True, text=True, timeout=120, check=False)


def test_ctrl_c_at_every_moment_of_the_imports_is_one_line():
    total = int(interrupted_at(0).stdout.rpartition("imports=")[2])
    assert total > 50  # typer, rich and the command modules are imported inside main()
    for n in sorted({1, 2, 3, *range(4, total, max(total // 25, 1)), total}):
        res = interrupted_at(n)
        assert res.returncode == 130 and res.stderr == "error: interrupted\n", (n, total, res.stderr)


def test_ctrl_c_inside_a_command_is_the_same_line(tmp_path):
    """typer answers a KeyboardInterrupt inside a command (here while it renders the help, and
    while `results show` imports its table) with a silent Exit(130): hpcai says it all the same."""
    for name, args in (("rich_utils", ("--help",)), ("rich.table", ("results", "show", str(tmp_path)))):
        res = interrupted_at(-1, name, *args)
        assert res.returncode == 130 and res.stderr == "error: interrupted\n", (name, res.stderr)


# Signals itself inside its N-th exec() of a string once main() runs (dataclasses build their
# methods so): the KeyboardInterrupt is raised in the exec'd code (in its loop, where CPython looks
# for pending signals). Run as a module (`python -m`), like `python -m hpcai`.
AT_EXEC = hooked("""
n, real, seen = int(sys.argv.pop(1)), builtins.exec, [0]
def exec_(code, *args):
    if isinstance(code, str):
        seen[0] += 1
        if seen[0] == n:
            code = "import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(99): pass\\n" + code
    return real(code, *args)
builtins.exec = exec_
""", "execs")


def test_ctrl_c_inside_exec_of_a_string_exits_130_not_by_the_signal(tmp_path):
    """CPython 3.11 marks a KeyboardInterrupt leaving exec() of a string as unhandled even when it
    is caught (until the next exec or eval of a string), and a module run with `python -m` then
    kills itself with SIGINT at exit: `error: interrupted` and exit -2, seen in CI when a Ctrl-C
    landed in the dataclass that `plain_values` makes. hpcai leaves with 130 all the same."""
    (tmp_path / "exec_ctrl_c.py").write_text(AT_EXEC)

    def interrupted_at_exec(n: int) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "exec_ctrl_c", str(n), "--help"], capture_output=True,
                              text=True, timeout=120, check=False, cwd=tmp_path)

    total = int(interrupted_at_exec(0).stdout.rpartition("execs=")[2])
    assert total > 10  # typer's and hpcai's dataclasses are made inside main()
    for n in (1, total // 2, *range(max(total - 5, 1), total + 1)):
        res = interrupted_at_exec(n)
        assert (res.returncode, res.stderr) == (130, "error: interrupted\n"), (n, total)


def test_a_sigint_ignored_by_the_parent_stays_ignored():
    """A script's background job (`hpcai … &`) starts with SIGINT ignored: hpcai keeps it so, and
    a Ctrl-C meant for the script's foreground does not stop it."""
    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    for delay_ms in (20, 50, 100):
        proc = subprocess.Popen([str(CONSOLE_SCRIPT), "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=ignore_sigint)
        time.sleep(delay_ms / 1000)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and err == "" and "Usage" in out, (delay_ms, proc.returncode, err)


def test_a_ctrl_c_python_wraps_or_swallows_is_still_an_interrupt(monkeypatch):
    """Two ways Python hides a KeyboardInterrupt raised by the SIGINT handler during imports, both
    seen in the test above: 3.11 wraps one raised in __set_name__ (a class body of ipaddress) in a
    RuntimeError, and one raised in an import-lock weakref callback is "ignored" (printed, and the
    command goes on). main() takes the first for an interrupt; the second is remembered."""
    import types

    from hpcai.cli import main as cli

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ki:
            raise RuntimeError("Error calling __set_name__ on 'cached_property' instance") from ki
    except RuntimeError as wrapped:
        assert cli._interrupt_inside(wrapped)
    assert not cli._interrupt_inside(RuntimeError("a bug"))
    passed_on = []
    monkeypatch.setattr(cli.sys, "__unraisablehook__", passed_on.append)
    monkeypatch.setattr(cli, "_SWALLOWED", False)
    other = types.SimpleNamespace(exc_type=ValueError)
    cli._swallowed_ctrl_c(other)
    assert passed_on == [other] and cli._SWALLOWED is False
    cli._swallowed_ctrl_c(types.SimpleNamespace(exc_type=KeyboardInterrupt))
    assert passed_on == [other] and cli._SWALLOWED is True
