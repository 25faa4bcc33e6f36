#!/usr/bin/env python3
"""Check that tests/infra/packages.txt covers everything the tests use, without trusting what
this machine already has installed.

1. What is used: every command the tests, benchmarks and infra scripts run (Python:
   `shutil.which("X")` and the first string of a list or tuple literal, as in `["srun", …]`;
   shell: the words in command position), and every module imported by the system python3
   (`"import X"`), kept when it resolves to a file here.
2. Which Debian package owns each (`dpkg-query -S`, across every PATH match: a command may also
   sit outside Debian, like pip's or a machine image's copy in /usr/local/bin).
3. What a fresh machine would have: a container of the local minimal Debian base (stricter than a
   stock Debian 12) with this machine's apt sources, where `apt-get install --simulate` of the
   declared packages lists everything they bring along.
Every owning package must be in that set; each one that is not is printed with the file that
uses it, and the exit code is 1. Needs docker and the base image of tests/infra/docker-up.sh.

    python3 tests/infra/check-fresh.py [--verbose]
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BASE = os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim")  # as docker-up.sh
PYTHON_SOURCES = ("tests", "benchmarks")
SHELL_SOURCES = ("tests/infra/*.sh", ".ci/run", "entrypoints/hpcai-shim", "entrypoints/hpcai-entrypoint",
                 "entrypoints/hpcai-lib.sh")
# Where this project's own tools live (the virtualenv, from pip): looked at after the system's.
OWN_BIN = [str(REPO / ".venv" / "bin"), str(Path(sys.prefix) / "bin")]
SHELL_WORDS = {
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "in", "case", "esac",
    "function", "select", "time", "exec", "command", "builtin", "export", "local", "readonly",
    "return", "exit", "set", "unset", "shift", "trap", "wait", "read", "mapfile", "printf", "echo",
    "cd", "test", "true", "false", "eval", "source", "kill", "type", "ulimit", "umask", "break",
    "continue", "declare", "let", "pwd", "getopts", "hash", "alias", "jobs", "times",
}
# After these, the next word is the command that runs (`timeout 60 srun …`, `xargs -r docker …`).
PREFIXES = {"timeout", "nohup", "xargs", "env", "runuser", "exec", "command", "nice", "flock", "!"}


def python_commands(path: Path) -> tuple[set[str], set[str]]:
    """Commands named for sure (`which("X")`) and maybe (`["X", …]`, `"import X"` as python3:X)."""
    sure: set[str] = set()
    maybe: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "which":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                sure.add(node.args[0].value)
        elif isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                maybe.add(first.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if m := re.fullmatch(r"import ([A-Za-z_][\w.]*)", node.value):
                maybe.add(f"python3:{m.group(1)}")
    return sure, {c for c in maybe if re.fullmatch(r"[A-Za-z][\w.+:-]*", c)}


def shell_commands(path: Path) -> set[str]:
    """Words in command position in a shell script (a scan, not a parser: good for this repo)."""
    text = path.read_text()
    functions = set(re.findall(r"^\s*([\w-]+)\s*\(\)", text, re.M))
    found: set[str] = set()
    for line in text.splitlines():
        # Quoted text runs nothing, except a $(…) inside double quotes; then comments go.
        line = re.sub(r"'[^']*'", "''", line)
        line = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: ";".join(re.findall(r"\$\([^)]*\)", m.group())) or '""', line)
        line = re.sub(r"(^|\s)#.*$", "", line)
        for segment in re.split(r"\|\||&&|[|;&({`]|\$\(|\bthen\b|\bdo\b|\belse\b", line):
            words = segment.split()
            while words and (re.fullmatch(r"\w+=\S*", words[0]) or words[0] in PREFIXES
                             or (words[0].startswith("-") and len(words) > 1) or words[0].isdigit()):
                words.pop(0)
            if words and re.fullmatch(r"[a-z][\w.+-]*", words[0]) and words[0] not in SHELL_WORDS:
                found.add(words[0])
    return found - functions


def used(root: Path) -> tuple[dict[str, set[str]], set[str]]:
    """({command or 'python3:module': {files that use it}}, the names known to be commands)."""
    uses: dict[str, set[str]] = {}
    sure: set[str] = set()
    for top in PYTHON_SOURCES:
        for path in sorted((root / top).rglob("*.py")):
            commands, candidates = python_commands(path)
            sure |= commands
            for name in commands | candidates:
                uses.setdefault(name, set()).add(str(path.relative_to(root)))
    for pattern in SHELL_SOURCES:
        for path in sorted(root.glob(pattern)):
            for name in shell_commands(path):
                sure.add(name)
                uses.setdefault(name, set()).add(str(path.relative_to(root)))
    return uses, sure


def owner(path: str) -> str | None:
    """The Debian package that installed PATH (merged /usr: dpkg may know it as /bin/X)."""
    candidates = [path, os.path.realpath(path)]
    candidates += [c.replace("/usr/bin/", "/bin/", 1) for c in candidates if c.startswith("/usr/bin/")]
    candidates += [c.replace("/usr/sbin/", "/sbin/", 1) for c in candidates if c.startswith("/usr/sbin/")]
    for candidate in candidates:
        res = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True, check=False)
        # "dash: /bin/sh" (lines about diversions name no package)
        for line in res.stdout.splitlines():
            if res.returncode == 0 and not line.startswith("diversion by"):
                return line.split(":", 1)[0].split(",")[0].strip()
    return None


def files_for(name: str) -> list[str]:
    """Every file NAME resolves to on this machine: each PATH match, or a system-python module."""
    if name.startswith("python3:"):
        module = name.split(":", 1)[1]
        res = subprocess.run(["/usr/bin/python3", "-c", f"import {module}; print({module}.__file__)"],
                             capture_output=True, text=True, check=False)
        return [res.stdout.strip()] if res.returncode == 0 and res.stdout.strip() else []
    dirs = [d for d in os.environ.get("PATH", "").split(":") if d and d not in OWN_BIN]
    dirs += ["/usr/sbin", "/sbin", "/usr/bin", "/bin", *OWN_BIN]  # the virtualenv's last
    found = []
    for d in dict.fromkeys(dirs):
        candidate = Path(d) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            found.append(str(candidate))
    return found


def fresh_packages(declared: list[str]) -> set[str]:
    """Packages of the minimal base plus what installing DECLARED there would bring (simulated)."""
    sources = [f"/etc/apt/sources.list.d/{p.name}" for p in Path("/etc/apt/sources.list.d").glob("*")]
    mounts = []
    for path in ["/etc/apt/sources.list", *sources]:
        if Path(path).is_file():
            mounts += ["-v", f"{path}:{path}:ro"]
    script = ('rm -f /etc/apt/sources.list.d/0000*; apt-get update -qq >/dev/null && '
              "dpkg-query -W -f '${Package}\\n' && apt-get install -s -y \"$@\"")
    argv = ["docker", "run", "--rm", "--network", "host", *mounts, BASE, "sh", "-c", script, "sh", *declared]
    res = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=900)
    if res.returncode != 0:
        sys.exit(f"check-fresh: the simulated install in a fresh {BASE} container failed: {res.stderr.strip()[-2000:]}")
    packages = set()
    for line in res.stdout.splitlines():
        if m := re.match(r"Inst (\S+)", line):
            packages.add(m.group(1))
        elif re.fullmatch(r"[a-z0-9][\w.+-]*", line):
            packages.add(line)
    return {p.split(":")[0] for p in packages}


def main() -> int:
    parser = argparse.ArgumentParser(description="Check that tests/infra/packages.txt covers what the tests use.")
    parser.add_argument("--verbose", action="store_true", help="print every command and its package")
    parser.add_argument("--root", type=Path, default=REPO, help="the repository to check (default: this one)")
    args = parser.parse_args()
    root = args.root.resolve()
    if not shutil.which("docker"):
        sys.exit("check-fresh: needs docker and the base image: run tests/infra/docker-up.sh first")
    declared = subprocess.run(["bash", str(root / "tests/infra/install-packages.sh"), "--list", "all"], capture_output=True,
                              text=True, check=True).stdout.split()
    fresh = fresh_packages(declared)
    missing, outside, absent, covered = [], [], [], 0
    uses, commands = used(root)
    for name, files in sorted(uses.items()):
        paths = files_for(name)
        if not paths:
            if name in commands:
                absent.append(name)
            continue
        packages = [p for p in map(owner, paths) if p]
        if not packages:
            outside.append(f"{name} ({paths[0]})")
        elif any(p in fresh for p in packages):
            covered += 1
            if args.verbose:
                print(f"ok       {name:<20} {packages[0]}")
        else:
            missing.append(f"{name} (package {packages[0]}), used by {', '.join(sorted(files))}")
    print(f"check-fresh: {len(declared)} declared packages bring {len(fresh)} on a fresh {BASE}; "
          f"{covered} commands/modules the tests use are covered")
    if args.verbose:
        print(f"not from Debian here (pip, the machine image): {', '.join(outside) or '-'}")
        print(f"not on this machine (tests needing them skip here, or are deselected on CI): {', '.join(absent) or '-'}")
    for line in missing:
        print(f"check-fresh: MISSING {line}: add its package to tests/infra/packages.txt")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
