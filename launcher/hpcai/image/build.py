"""Run the real image builder (docker or podman) over a prepared context, with progress and a log.

The classic Docker builder (DOCKER_BUILDKIT=0) is used on purpose: its plain "Step n/m" and
"Using cache" lines give an honest progress bar and let tests assert cache reuse, and it needs no
buildx plugin. Output streams into build/logs/<tag>.log; on failure the user gets the failing
step, the log tail and the log path.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError
from hpcai.image.spec import ImageSpec

BUILDERS = ("docker", "podman")
# docker: "Step 3/40 : RUN …"; podman/buildah number the steps of each stage: "[1/2] STEP 3/14: RUN …"
STEP_RE = re.compile(r"^(?:\[(\d+)/\d+\]\s+)?(?:Step|STEP) (\d+)/(\d+)\s*:\s*(.*)$")
MISMATCH_RE = re.compile(r"checksum mismatch for (\S+?):")
DAEMON_HINT = ("start one with `sudo dockerd` (or tests/infra/docker-up.sh), "
               "or build with Podman: --builder podman / DOCKER=podman")


def work_dir() -> Path:
    """Where contexts and logs go: $HPCAI_WORK_DIR, default ./build."""
    return Path(os.environ.get("HPCAI_WORK_DIR") or "build")


def log_path(tag: str) -> Path:
    return work_dir() / "logs" / (re.sub(r"[^A-Za-z0-9._-]+", "_", tag) + ".log")


def builder_name(value: str | None) -> str:
    """--builder / DOCKER: docker (default) or podman; a path to either binary is accepted."""
    name = Path(value).name if value else "docker"
    if name not in BUILDERS:
        from hpcai.errors import unknown

        raise unknown("builder", value or "", BUILDERS)
    return name


def build_argv(spec: ImageSpec, builder: str, context: Path, no_cache: bool = False) -> list[str]:
    """The build command as a token list (docker: classic builder via DOCKER_BUILDKIT=0 env)."""
    argv = [builder, "build", "--network", "host", "-f", str(context / "Dockerfile"), "-t", spec.tag]
    if no_cache:
        argv.append("--no-cache")
    if spec.arch != "amd64":
        argv += ["--platform", f"linux/{spec.arch}"]
    if builder == "podman":
        argv += ["--format", "docker", "--layers"]
    return argv + [str(context)]


def builder_env(builder: str) -> dict[str, str]:
    """The builder process's environment: docker's classic builder (BuildKit's output is not the
    step log hpcai follows)."""
    env = dict(os.environ)
    if builder == "docker":
        env["DOCKER_BUILDKIT"] = "0"
    return env


def check_engine(builder: str) -> None:
    """Fail early, as bad input (exit 2), when the engine cannot be reached."""
    if builder == "podman":
        if not shutil.which("podman"):
            raise UsageError("podman not found on PATH; install it or use --builder docker")
        return
    if not shutil.which("docker"):
        raise UsageError(f"the docker CLI is not installed; {DAEMON_HINT}")
    import docker

    try:
        docker.from_env(timeout=10).ping()
    except Exception as exc:  # the SDK raises several types for "no daemon"
        raise UsageError(f"no Docker daemon reachable ({type(exc).__name__}); {DAEMON_HINT}") from None


@dataclass
class BuildResult:
    tag: str
    log: Path
    steps: int
    cached_steps: int
    seconds: float


def _step_title(step_text: str, spec: ImageSpec) -> str:
    """Name the hpcai step behind a builder step line (`RUN …/libfabric.sh` -> libfabric)."""
    from hpcai.image.render import builder_steps, final_steps, payload_hooks

    hooks = payload_hooks(spec)
    for step in (*builder_steps(spec, hooks), *final_steps(spec, hooks)):
        if step.command in step_text:
            return step.title
    return step_text


def run_build(spec: ImageSpec, builder: str, context: Path, no_cache: bool = False) -> BuildResult:
    """Run the build, stream it to the log, show progress on stderr; raise on failure."""
    from rich.status import Status

    from hpcai.console import err

    argv = build_argv(spec, builder, context, no_cache)
    log = log_path(spec.tag)
    log.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=30)
    step, total, text, cached, started = 0, 0, "starting", 0, time.monotonic()
    stage_steps: dict[str, int] = {}  # steps per build stage, in order (one entry for docker)
    with log.open("w") as fh, Status("", console=err) as status:
        fh.write(f"$ {shlex.join(argv)}\n")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=builder_env(builder), text=True, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            fh.flush()  # the log is the user's window into a long step
            line = line.rstrip("\n")
            tail.append(line)
            parsed = parse_step(line, stage_steps)
            if parsed:
                step, total, text = parsed
            elif "Using cache" in line:
                cached += 1
            status.update(f"[bold]{spec.tag}[/] step {step}/{total} "
                          f"[dim]{time.monotonic() - started:5.0f}s[/] {text[:90]}")
        rc = proc.wait()
    seconds = time.monotonic() - started
    if rc != 0:
        _fail(spec, step, total, text, list(tail), log)
    return BuildResult(spec.tag, log, total, cached, seconds)


def parse_step(line: str, stage_steps: dict[str, int]) -> tuple[int, int, str] | None:
    """(step, total so far, instruction) from a builder's step line, counted across stages;
    stage_steps (stage -> its step count) carries the stages seen so far."""
    m = STEP_RE.match(line.strip())
    if not m:
        return None
    stage_steps[m.group(1) or "1"] = int(m.group(3))
    earlier = sum(list(stage_steps.values())[:-1])
    return earlier + int(m.group(2)), sum(stage_steps.values()), m.group(4)


def _fail(spec: ImageSpec, step: int, total: int, text: str, tail: list[str], log: Path) -> None:
    from hpcai.console import err

    for line in tail:
        m = MISMATCH_RE.search(line)
        if m:  # a tampered or wrong download is the user's input to fix, not our crash
            raise UsageError(f"{line.split('error: ', 1)[-1]} (log: {log})")
    title = _step_title(text, spec)
    err.print(f"[bold]last {len(tail)} lines of {log}:[/]", markup=True)
    for line in tail:
        err.print(line, markup=False, highlight=False, soft_wrap=True)
    raise HpcaiError(f"build failed at step {step}/{total} ({title}); full log: {log}")
