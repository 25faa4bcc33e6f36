"""Run the real image builder (docker, podman or apptainer) over a prepared context, with progress and a log.

The classic Docker builder (DOCKER_BUILDKIT=0) is used on purpose: its plain "Step n/m" and
"Using cache" lines give an honest progress bar and let tests assert cache reuse, and it needs no
buildx plugin. Apptainer builds a SIF straight from the context's def (`--builder apptainer`, for a
login node without Docker): no layer cache, so no cache count; its progress is the install step
%post is running, read from the `+ …` lines of its `sh -x`. Output streams into
build/logs/<tag>.log; on failure the user gets the failing step, the log tail and the log path.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError, operand
from hpcai.image.spec import ImageSpec

ENGINES = ("docker", "podman")  # OCI engines: they build images, and hold the images sif/sqsh convert
BUILDERS = (*ENGINES, "apptainer")  # apptainer builds a SIF from the def, with no engine at all
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


def builder_name(value: str | None, choices: Sequence[str] = ENGINES) -> str:
    """--builder / DOCKER: docker (default) or one of CHOICES (podman; apptainer for `build`); a
    path to the binary is accepted."""
    name = Path(value).name if value else "docker"
    if name not in choices:
        from hpcai.errors import unknown

        raise unknown("builder", value or "", choices)
    return name


def build_argv(spec: ImageSpec, builder: str, context: Path, no_cache: bool = False) -> list[str]:
    """The build command as a token list (docker: classic builder via DOCKER_BUILDKIT=0 env).
    Format: docker build --network host -f CTX/Dockerfile -t TAG [--no-cache] … CTX"""
    argv = [builder, "build", "--network", "host", "-f", operand("the work folder", context / "Dockerfile"),
            "-t", spec.tag]
    if no_cache:
        argv.append("--no-cache")
    if spec.arch != "amd64":
        argv += ["--platform", f"linux/{spec.arch}"]
    if builder == "podman":
        argv += ["--format", "docker", "--layers"]
    return argv + [operand("the work folder", context)]  # a path: ./-w/… for HPCAI_WORK_DIR=-w


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
    """Run the docker/podman build, stream it to the log, show progress on stderr; raise on failure."""
    argv = build_argv(spec, builder, context, no_cache)
    log = log_path(spec.tag)
    step, total, text, cached = 0, 0, "starting", 0
    stage_steps: dict[str, int] = {}  # steps per build stage, in order (one entry for docker)

    def progress(line: str) -> str:
        nonlocal step, total, text, cached
        parsed = parse_step(line, stage_steps)
        if parsed:
            step, total, text = parsed
        elif "Using cache" in line:
            cached += 1
        return f"step {step}/{total} {text}"

    rc, tail, seconds = stream(argv, log, spec.tag, progress, env=builder_env(builder))
    if rc != 0:
        _fail(spec, f"step {step}/{total} ({_step_title(text, spec)})", tail, log)
    return BuildResult(spec.tag, log, total, cached, seconds)


def stream(argv: list[str], log: Path, label: str, progress: Callable[[str], str], *,
           cwd: Path | None = None, env: dict[str, str] | None = None,
           append: bool = False) -> tuple[int, list[str], float]:
    """Run ARGV with its output (stdout and stderr) going into LOG line by line (after what LOG
    holds when APPEND), and one status line on stderr: LABEL, the time so far and progress(line),
    called on each line. Returns the exit status, the last 30 lines and the seconds it took. Ctrl-C (or any error here) stops the
    command before it is raised: SIGINT first, as a terminal's Ctrl-C would (apptainer removes its
    temporary folders then), SIGKILL if it has not ended 30 s later."""
    from rich.markup import escape
    from rich.status import Status

    from hpcai.console import err

    log.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=30)
    started = time.monotonic()
    with log.open("a" if append else "w") as fh, Status("", console=err) as status:
        fh.write(f"$ {shlex.join(argv)}\n")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                                env=env, text=True, errors="replace")
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                fh.write(line)
                fh.flush()  # the log is the user's window into a long step
                line = line.rstrip("\n")
                tail.append(line)
                status.update(f"[bold]{escape(label)}[/] [dim]{time.monotonic() - started:5.0f}s[/] "
                              f"{escape(progress(line)[:100])}")
            rc = proc.wait()
        except BaseException:
            _stop(proc)
            raise
    return rc, list(tail), time.monotonic() - started


def _stop(proc: subprocess.Popen) -> None:
    import signal

    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def parse_step(line: str, stage_steps: dict[str, int]) -> tuple[int, int, str] | None:
    """(step, total so far, instruction) from a builder's step line, counted across stages;
    stage_steps (stage -> its step count) carries the stages seen so far."""
    m = STEP_RE.match(line.strip())
    if not m:
        return None
    stage_steps[m.group(1) or "1"] = int(m.group(3))
    earlier = sum(list(stage_steps.values())[:-1])
    return earlier + int(m.group(2)), sum(stage_steps.values()), m.group(4)


def _fail(spec: ImageSpec, where: str, tail: list[str], log: Path) -> None:
    """The end of a failed build: a checksum mismatch is the user's input to fix (exit 2);
    anything else shows the log's tail, then one line naming WHERE it failed and the log."""
    from hpcai.console import err

    for line in tail:
        m = MISMATCH_RE.search(line)
        if m:  # a tampered or wrong download is the user's input to fix, not our crash
            raise UsageError(f"{line.split('error: ', 1)[-1]} (log: {log})")
    err.print(f"[bold]last {len(tail)} lines of {log}:[/]", markup=True)
    for line in tail:
        err.print(line, markup=False, highlight=False, soft_wrap=True)
    raise HpcaiError(f"build failed at {where}; full log: {log}")


# --- apptainer: a SIF from the def ---------------------------------------------------------------

# Apptainer's own lines that start a phase of a def build, and the name a failure there gets.
APPTAINER_PHASES = (("Starting build", "the base image (Bootstrap/From)"),
                    ("Running post scriptlet", "%post"),
                    ("Running testscript", "%test (hpcai-entrypoint --check, hpcai-bench --self-test)"),
                    ("Creating SIF file", "writing the SIF (mksquashfs)"))
SUBID_HINT = ("apptainer build --fakeroot needs this user in /etc/subuid and /etc/subgid "
              "(e.g. root:1000000:65536; see docs/building.md)")


def part_path(output: Path) -> Path:
    """Where a SIF is written before it is renamed to OUTPUT: never a half-written file under the final name."""
    return output.with_name(output.name + ".part")


def apptainer_argv(tool: str, output: Path, no_cache: bool = False, part: Path | None = None) -> list[str]:
    """`apptainer build --fakeroot --force OUT.sif.part hpcai.def`, run in the context folder (the
    def's %files name paths relative to it). --fakeroot: %post and %test run as root inside a user
    namespace (this user's /etc/subuid range), the one way they run for a user without root, and
    for root too where Apptainer is not setuid. %test runs at the end (no --notest): a SIF whose
    entrypoint --check or self-test fails is never written."""
    return [tool, "build", "--fakeroot", "--force", *(["--disable-cache"] if no_cache else []),
            operand("-o/--output", part or part_path(output)), "hpcai.def"]


@dataclass
class ApptainerProgress:
    """Which install step a def build is in, from its output: %post runs under `sh -x`, so each
    step's command shows as `+ /opt/hpcai-build/install/SCRIPT ARGS` when it starts."""

    steps: list  # render.Step, builder stage then final stage, as the def runs them
    phase: str = "starting"

    def see(self, line: str) -> str:
        """Take one line of the build's output; the status to show."""
        found = traced_step(line[2:], self.steps) if line.startswith("+ ") else 0
        if found:
            self.phase = f"step {found}/{len(self.steps)} ({self.steps[found - 1].title})"
        elif line.startswith("INFO:"):
            self.phase = next((phase for text, phase in APPTAINER_PHASES if text in line), self.phase)
        return f"{self.phase}: {line}"


def traced_step(command: str, steps: Sequence) -> int:
    """The 1-based index of the step whose command `sh -x` traced as COMMAND (its words as the
    shell quoted them), else 0. A payload hook is told apart by its payload name."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if not words:
        return 0
    best = 0
    for i, step in enumerate(steps, 1):
        argv = list(step.argv)
        if words == argv:
            return i
        if not best and words[0] == argv[0] and words[1:2] == argv[1:2]:
            best = i
    return best


def run_apptainer_build(spec: ImageSpec, tool: str, context: Path, output: Path,
                        no_cache: bool = False) -> BuildResult:
    """Build OUTPUT (a SIF) from the context's def with apptainer: written into a private folder
    beside OUTPUT (files.aside_dir, unique to this build) and renamed once the build and %test
    passed; a failure or Ctrl-C leaves nothing behind, and a user's OUTPUT.part is never touched."""
    from hpcai import files
    from hpcai.image.render import builder_steps, final_steps, payload_hooks

    hooks = payload_hooks(spec)
    progress = ApptainerProgress([*builder_steps(spec, hooks), *final_steps(spec, hooks)])
    log = log_path(spec.tag)
    with files.aside_dir(output, "-o/--output") as part:
        argv = apptainer_argv(tool, output, no_cache, part.absolute())
        rc, tail, seconds = stream(argv, log, str(output), progress.see, cwd=context)
        if rc != 0:
            if any("/etc/subuid" in line for line in tail):
                raise HpcaiError(f"build failed at {progress.phase}: {SUBID_HINT}; full log: {log}")
            _fail(spec, progress.phase, tail, log)
    return BuildResult(spec.tag, log, len(progress.steps), 0, seconds)
