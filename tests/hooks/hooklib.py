"""Run hpcai-entrypoint and its hooks under a synthetic environment, straight from the repo.

`run_entrypoint(env, hooks=[...])` runs the real entrypoint under a real shell (dash as `sh`,
and bash) with HPCAI_HOOKS_DIR pointing at a directory that holds only the named hooks, and
returns what the final `exec` saw: its environment (read NUL-separated from `env -0`), plus
stdout, stderr and the exit code. `exported()` is the exact difference to the input
environment, so a test can assert precisely what a hook set and that preset values survived.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "entrypoints" / "hpcai-entrypoint"
LIB = ENTRYPOINT.with_name("hpcai-lib.sh")  # the functions the entrypoint sources from beside it
HOOKS = REPO / "entrypoints" / "hooks.d"
SHELLS = [s for s in ("sh", "bash") if shutil.which(s)]
# Variables a shell adds by itself; never part of what a hook exported.
SHELL_NOISE = {"PWD", "OLDPWD", "SHLVL", "_"}
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}


def hook_file(name: str) -> Path:
    """entrypoints/hooks.d/NN-<name>.sh for a hook name like 'host-fabric'."""
    matches = sorted(HOOKS.glob(f"[0-9][0-9]-{name}.sh"))
    assert len(matches) == 1, f"no single hook named {name}: {matches}"
    return matches[0]


@dataclass
class EntrypointRun:
    rc: int
    stdout: str
    stderr: str
    given: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)

    def exported(self) -> dict[str, str]:
        """Variables the hooks added or changed (name -> new value)."""
        return {k: v for k, v in self.env.items()
                if k not in SHELL_NOISE and self.given.get(k) != v}

    def removed(self) -> set[str]:
        return {k for k in self.given if k not in self.env}

    @property
    def warnings(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if "warning:" in line]


@pytest.fixture(params=SHELLS)
def shell(request) -> str:
    return request.param


@pytest.fixture
def workdir():
    """A scratch dir other users can traverse (pytest's tmp_path is 0700; some tests drop root)."""
    path = Path(tempfile.mkdtemp(prefix="hpcai-ep-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def run_entrypoint(workdir, shell):
    """run_entrypoint(env, hooks=None|[names], args=None, user=None, opts=()) -> EntrypointRun.

    hooks=None runs every hook of the repository; args replaces the `env -0` command; user
    runs it as that user (needs root), for tests where file permissions must matter; opts are
    shell options placed before the script (("-e",) runs it under errexit).
    """
    counter = iter(range(1000))
    tmp_path = workdir

    def run(env: dict[str, str], hooks: list[str] | None = None,
            args: list[str] | None = None, user: str | None = None,
            opts: tuple[str, ...] = ()) -> EntrypointRun:
        given = {**BASE_ENV, **env}
        if hooks is not None and "HPCAI_HOOKS_DIR" not in given:
            hooks_dir = tmp_path / f"hooks-{next(counter)}"
            hooks_dir.mkdir()
            for name in hooks:
                src = hook_file(name)
                shutil.copy(src, hooks_dir / src.name)
            hooks_dir.chmod(0o755)
            given["HPCAI_HOOKS_DIR"] = str(hooks_dir)
        argv = [shell, *opts, str(ENTRYPOINT), *(args if args is not None else ["env", "-0"])]
        if user is not None:  # drop root for tests where permissions must bite
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
        proc = subprocess.run(argv, env=given, capture_output=True, timeout=30, check=False,
                              cwd="/")
        out = proc.stdout.decode(errors="replace")
        result = EntrypointRun(proc.returncode, out, proc.stderr.decode(errors="replace"), given)
        if args is None and proc.returncode == 0:
            for item in out.split("\0"):
                if "=" in item:
                    key, _, value = item.partition("=")
                    result.env[key] = value
        return result

    return run


@pytest.fixture
def shlib(shell):
    """shlib(script) -> stdout of `script` run after sourcing the entrypoint's functions (hpcai-lib.sh)."""

    def call(script: str) -> str:
        prog = f'. "{LIB}"\n{script}\n'
        proc = subprocess.run([shell, "-c", prog], capture_output=True, text=True, timeout=30,
                              check=False, env={**BASE_ENV})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return call


def as_root() -> bool:
    return os.geteuid() == 0


def touch(path: Path, target: str | None = None) -> None:
    """A fake library file (ELF magic only), or a symlink to TARGET; parents made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if target is None:
        path.write_bytes(b"\x7fELF fake")
    else:
        path.symlink_to(target)
