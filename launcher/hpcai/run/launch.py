"""Executing a LaunchPlan: start the ranks, pass on signals, name failed ranks, write the run record.

`run_launch(opts)` is the Python API (`hpcai sweep` calls it): it plans, creates the record
folder (never an existing record), writes plan.json, runs the backend and writes status.json.
srun runs one step with `--kill-on-bad-exit=1` and per-rank logs; failed ranks come from srun's
own stderr (`srun: error: nid002: task 1: Exited with exit code 3`) and from the exit files the
rank shim writes, because the test cluster (and many others) has no accounting database for
`sacct`. The local backend starts each rank itself and ends the others as soon as one fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from hpcai.run import record
from hpcai.run.backends import get_backend
from hpcai.errors import HpcaiError
from hpcai.output import say, warn
from hpcai.run.plan import LaunchOptions, LaunchPlan, plan_launch
from hpcai.run.runtimes import get_runtime

__all__ = ["LaunchOptions", "LaunchPlan", "LaunchFailed", "plan_launch", "run_launch", "run_repeated", "execute"]

GRACE_S = 10.0          # between SIGTERM and SIGKILL
KILLED = {130, 137, 143}  # exit codes of ranks we (or Slurm) ended, not ranks that failed
_SRUN_TASK = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.*)")


class LaunchFailed(HpcaiError):
    """The run started but did not succeed; `run_dir` holds its record."""

    def __init__(self, message: str, run_dir: Path, exit_code: int = 1):
        super().__init__(message)
        self.run_dir = run_dir
        self.exit_code = exit_code


def run_launch(opts: LaunchOptions, check: bool = True, echo: bool = False) -> Path:
    """Plan and run; returns the record folder. check: raise LaunchFailed unless it completed."""
    return execute(plan_launch(opts), check=check, echo=echo)


def run_repeated(opts: LaunchOptions, repeat: int, echo: bool = False) -> list[Path]:
    """`--repeat N`: the same launch N times, one record each, as the Mila suite repeats whole runs
    (`results show|compare` then give mean, sd and the rest over them). With --output-dir, that
    folder holds the N records. Every repetition runs even when one fails (LaunchFailed after the
    last, naming them); Ctrl-C or a cancelled run stops the rest."""
    from dataclasses import replace

    from hpcai.run.plan import check_repeat

    check_repeat(repeat)
    if repeat == 1:
        return [run_launch(opts, echo=echo)]
    each = replace(opts, output_dir=None, runs_root=opts.output_dir or opts.runs_root)
    runs, failed = [], []
    for i in range(1, repeat + 1):
        if echo:
            say(f"repetition {i} of {repeat}")
        run_dir = run_launch(each, check=False, echo=echo)
        runs.append(run_dir)
        state = record.read_json(run_dir / record.STATUS).get("state")
        if state == "cancelled":
            raise LaunchFailed(f"repetition {i} of {repeat} was cancelled; the rest did not run", run_dir, 130)
        if state != "completed":
            failed.append(run_dir)
    if failed:
        raise LaunchFailed(f"{len(failed)} of {repeat} repetitions failed: {', '.join(map(str, failed))}",
                           failed[0], 1)
    return runs


def _ranges(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def failed_ranks(srun_stderr: list[str], exit_codes: dict[int, int]) -> dict[int, int]:
    """{rank: exit code} of ranks that failed by themselves (not the ones killed after them).

    srun reports the failing task, then `_step_signal: Terminating StepId=…` when
    --kill-on-bad-exit ends the step; tasks reported after that were ended by Slurm, whatever
    their code (ch-run exits 1 when its child is killed). Exit codes 130/137/143 from the rank
    shim's files mean the same.
    """
    before: dict[int, int] = {}
    after: dict[int, int] = {}
    seen_kill = False
    for line in srun_stderr:
        seen_kill = seen_kill or "Terminating StepId" in line or "forcing job termination" in line
        m = _SRUN_TASK.search(line)
        if m and "Exited with exit code" in m.group(3):
            code = int(m.group(3).rsplit(" ", 1)[-1])
            (after if seen_kill else before).update({r: code for r in _ranges(m.group(2)) if code})
    failed = {r: c for r, c in before.items() if c not in KILLED}
    if not failed:
        reported = {**after, **exit_codes}
        failed = {r: c for r, c in reported.items() if c and c not in KILLED}
        if not failed:  # only killed ranks (e.g. cancelled from outside): name them all
            failed = {r: c for r, c in reported.items() if c}
    return dict(sorted(failed.items()))


def read_exit_files(log_dir: Path) -> dict[int, int]:
    codes = {}
    for p in log_dir.glob("rank-*.exit"):
        try:
            codes[int(p.stem.split("-", 1)[1])] = int(p.read_text().strip())
        except ValueError:
            continue
    return codes


class _Signals:
    """Turn SIGINT/SIGTERM into a flag the run loop acts on (restored afterwards)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.on_signal = None  # called once, in the main thread, when the first signal arrives
        self._old: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._set)
        return self

    def _set(self, signum, _frame) -> None:
        first = self.received is None
        self.received = signum
        if first and self.on_signal:
            self.on_signal()

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            # After a Ctrl-C the process is ending (a cancelled run stops repeats and sweeps too):
            # a second or third one must not interrupt the report with a traceback.
            signal.signal(sig, signal.SIG_IGN if self.received else old)


def _stop(procs: list[subprocess.Popen], names: list[str], engine: str | None) -> None:
    """SIGTERM every rank's process group, kill containers by name, SIGKILL after the grace."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    if engine and names:
        subprocess.run([engine, "kill", *names], capture_output=True, check=False)
    deadline = time.monotonic() + GRACE_S
    for p in procs:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def _run_local(plan: LaunchPlan, logs: Path, sig: _Signals, started: Callable[[], None]
               ) -> tuple[dict[int, int], str]:
    engine = plan.runtime if get_runtime(plan.runtime).engine else None
    procs: list[subprocess.Popen] = []
    for rank, argv in enumerate(plan.rank_argvs):
        try:  # a log that cannot be made (full disk) or a binary that cannot start: no orphans
            with open(logs / f"rank-{rank}.out", "wb") as out, open(logs / f"rank-{rank}.err", "wb") as err:
                # own session: hpcai alone decides how ranks are ended
                procs.append(subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                              env={**os.environ, **plan.secret_env,
                                                   **plan.rank_envs[rank]},
                                              start_new_session=True))
        except OSError as exc:
            _stop(procs, plan.container_names, engine)
            raise HpcaiError(f"cannot start rank {rank} ({argv[0]}): {exc}") from None
    started()
    state = "completed"
    while [p.poll() for p in procs].count(None):  # poll every rank, not only the first running
        if sig.received or any(p.returncode not in (None, 0) for p in procs):
            state = "cancelled" if sig.received else "failed"
            _stop(procs, plan.container_names, engine)
            break
        time.sleep(0.05)
    codes = {r: (128 - p.wait() if p.wait() < 0 else p.returncode) for r, p in enumerate(procs)}
    if engine and plan.container_names:  # a client killed hard cannot remove its container
        subprocess.run([engine, "rm", "-f", *plan.container_names], capture_output=True, check=False)
    if state == "completed" and any(codes.values()):
        state = "failed"
    return codes, state


def _run_step(plan: LaunchPlan, logs: Path, sig: _Signals, started: Callable[[], None]
              ) -> tuple[dict[int, int], str, list[str], int]:
    lines: list[str] = []
    proc = subprocess.Popen(plan.argv, env={**os.environ, **plan.secret_env},
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=True)

    def pump() -> None:  # show srun's own messages and keep them to find failed ranks
        assert proc.stderr is not None
        shown = True
        for line in proc.stderr:
            lines.append(line)
            if shown:
                try:
                    sys.stderr.write(line)
                except OSError:  # stderr on a full device or a closed pipe: srun's lines are kept
                    shown = False

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    started()

    def cancel() -> None:
        # Two SIGINTs within a second make srun pass SIGINT to every task (the shims stop their
        # containers); a SIGTERM would make srun SIGKILL the tasks at once.
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        timer = threading.Timer(3 * GRACE_S, proc.kill)  # srun itself stuck: end it
        timer.daemon = True
        timer.start()

    sig.on_signal = cancel
    if sig.received:  # arrived before the handler knew about srun
        cancel()
    proc.wait()  # no polling: a signal runs `cancel` from the handler, then the wait resumes
    state = "cancelled" if sig.received else "completed"
    reader.join(timeout=5)
    codes = read_exit_files(logs)
    if state == "completed" and (proc.returncode or any(codes.values())):
        state = "failed"
    if state != "completed" and get_runtime(plan.runtime).engine:
        _cleanup_containers(plan, logs)
    return codes, state, lines, proc.returncode


def _cleanup_containers(plan: LaunchPlan, logs: Path) -> None:
    """Slurm may SIGKILL the shims; remove their containers on every node that ran one."""
    from hpcai.run.site import Host

    cleanup = [*Host().shim(), "--cleanup", f"hpcai.run={Path(plan.run_dir).name}", "--", plan.runtime]
    hosts = sorted({p.read_text().strip() for p in logs.glob("rank-*.host")} - {""})
    srun = ["srun", f"--nodes={len(hosts)}", "--ntasks-per-node=1", f"--nodelist={','.join(hosts)}"]
    # on the nodes, and here for engines shared with this host
    for argv in ([*srun, *cleanup], cleanup) if hosts else (cleanup,):
        try:
            subprocess.run(argv, capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _follow(path: Path, done: threading.Event) -> None:
    """Copy a growing log file to stdout until `done`, then drain what is left."""
    while not path.exists() and not done.wait(0.1):
        pass
    if not path.exists():
        return
    import codecs

    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode  # chunks split chars
    with path.open("rb") as fh:
        while True:
            chunk = fh.read(65536)
            if chunk:
                try:
                    sys.stdout.write(decode(chunk))
                    sys.stdout.flush()
                except OSError:  # stdout on a full device or a closed pipe: the log is in logs/
                    return
            elif done.is_set():
                return
            else:
                done.wait(0.1)  # not sleep: the launch ends as soon as the ranks do


def _digest(plan: LaunchPlan) -> str | None:
    """docker/podman: the image Id; a SIF or SquashFS file: its sha256 (hpcai.run.digests)."""
    path = Path(plan.image)
    if get_runtime(plan.runtime).engine:
        from hpcai.image.engine import image_id

        return image_id(plan.runtime, plan.image)
    if path.is_file():
        from hpcai.run.digests import image_sha256

        return image_sha256(path)  # cached by its path and stat identity: no rehash per launch
    return None


def _start_record(run_dir: Path, plan: LaunchPlan, plan_data: dict, status: record.RunStatus) -> None:
    """Claim the record's logs folder, set space aside for its final files and say "running";
    a disk too full for that stops the launch before anything starts, leaving nothing behind."""
    record.claim_logs(run_dir)  # exit 2 when another run has written, or is writing, this record
    try:
        # the final plan.json and status.json are written aside before their old copies go
        record.reserve_space(run_dir, 2 * len(json.dumps(plan_data, indent=2, default=str))
                             + 64 * len(plan.rank_argvs or [0]) + (64 << 10))
        record.write_status(run_dir, status)
    except OSError as exc:
        record.abandon(run_dir)
        raise HpcaiError(f"cannot write the run record in {run_dir}: {exc.strerror or exc}; "
                         "nothing was started") from None


class _Writes:
    """The record files written after the ranks started: a failure (a full disk) is remembered and
    reported in one line at the end, never raised while ranks are running."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.failed: dict[str, str] = {}

    def json(self, name: str, data: object) -> None:
        try:
            record.write_json(self.run_dir / name, data)
        except OSError as exc:
            self.failed[name] = exc.strerror or str(exc)
        else:
            self.failed.pop(name, None)

    def problem(self) -> str | None:
        if not self.failed:
            return None
        what = ", ".join(self.failed)
        return f"could not write {what} in {self.run_dir}: {'; '.join(sorted(set(self.failed.values())))}"


def _finalize_metrics(run_dir: Path, writes: _Writes) -> None:
    """Parse the logs into metrics.json; a parser or energy file that fails is the record's loss
    (a warning), never the run's: its status is already written."""
    from hpcai.results.records import finalize

    try:
        finalize(run_dir)
    except OSError as exc:
        writes.failed[record.METRICS] = exc.strerror or str(exc)
    except Exception as exc:  # noqa: BLE001 - any parser fault: the run itself is recorded
        warn(f"{run_dir / record.METRICS} not written: {exc}")


def execute(plan: LaunchPlan, check: bool = True, echo: bool = False) -> Path:
    run_dir = Path(plan.run_dir)
    try:  # before the record is started: stderr that fails (/dev/full) leaves no record behind
        for w in plan.warnings:
            warn(w)
    except OSError:
        record.abandon(run_dir)  # the folder planning claimed
        raise
    status = record.RunStatus(state="running", started=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    plan_data = plan.to_json()  # once: it sizes the space set aside and becomes plan.json
    _start_record(run_dir, plan, plan_data, status)
    logs = run_dir / record.LOGS
    writes = _Writes(run_dir)
    data: dict = {}
    digest: dict[str, str | None] = {}
    hasher = threading.Thread(target=lambda: digest.setdefault("d", _digest(plan)), daemon=True)

    def write_plan() -> None:  # once the ranks are starting: this is not on their critical path
        data.update(plan_data, image_digest=None)
        writes.json(record.PLAN, data)
        hasher.start()  # a SIF can be many GB: hash it while the ranks run

    started = time.time()
    srun_lines: list[str] = []
    rc = 0
    state = "failed"
    codes: dict[int, int] = {}
    done = threading.Event()
    follower = threading.Thread(target=_follow, args=(logs / "rank-0.out", done), daemon=True)
    if echo:  # rank 0's output, live, on stdout (every rank's is in logs/)
        follower.start()
    # Signals stay caught until the final status is written: a second or third Ctrl-C while the
    # record is being finished must not leave it half-written (or print a traceback).
    with _Signals() as sig:
        try:
            if get_backend(plan.backend).per_rank:
                codes, state = _run_local(plan, logs, sig, write_plan)
            else:
                codes, state, srun_lines, rc = _run_step(plan, logs, sig, write_plan)
        except (HpcaiError, OSError) as exc:  # a rank or srun could not be started: recorded
            srun_lines.append(f"error: {exc}")
            rc = 1
        finally:
            if not data:  # nothing started: the record still says what was meant to run
                write_plan()
        wall = round(time.time() - started, 3)
        done.set()
        if echo:
            follower.join(timeout=10)
        failed = failed_ranks(srun_lines, codes) if state == "failed" else {}
        exit_code = 0 if state == "completed" else (130 if state == "cancelled" else
                                                     next((c for c in failed.values() if c), rc or 1))
        status = record.RunStatus(
            state=state, exit_code=exit_code, failed_ranks=list(failed), wall_s=wall,
            steps=[{"name": plan.backend, "exit_code": exit_code, "wall_s": wall,
                    "rank_exit_codes": {str(r): c for r, c in sorted(codes.items())}}],
            started=status.started, ended=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            message=_message(state, failed, run_dir, rc, srun_lines))
        deadline = time.monotonic() + 60
        while hasher.is_alive() and time.monotonic() < deadline and sig.received is None:
            hasher.join(timeout=0.2)  # Ctrl-C does not wait for a GB-sized hash
        data["image_digest"] = digest.get("d")
        record.release_space(run_dir)  # the final files take the space set aside for them
        writes.json(record.STATUS, asdict(status))
        writes.json(record.PLAN, data)
        if plan.payload != "cmd":  # a raw command has no parser to run
            _finalize_metrics(run_dir, writes)
    say(f"run record: {run_dir}")
    problem = writes.problem()
    if problem:
        raise LaunchFailed(f"the run {state}, but {problem}", run_dir, 130 if sig.received else 1)
    if sig.received and state != "cancelled":  # Ctrl-C while the record was finished: stop here too
        raise LaunchFailed(f"interrupted; the run had {state} and its record is complete: {run_dir}", run_dir, 130)
    if check and state != "completed":
        raise LaunchFailed(status.message, run_dir, 130 if state == "cancelled" else 1)
    return run_dir


def _message(state: str, failed: dict[int, int], run_dir: Path, rc: int, lines: list[str]) -> str:
    if state == "completed":
        return "completed"
    if state == "cancelled":
        return f"cancelled; logs in {run_dir / record.LOGS}"
    if not failed:
        why = next((ln.strip() for ln in reversed(lines) if "error" in ln), "")
        return (f"the step failed (exit code {rc}) before any rank reported"
                + (f": {why}" if why else f"; see {run_dir / record.LOGS}"))
    first = next(iter(failed))
    names = ", ".join(f"rank {r} (exit code {c})" for r, c in failed.items())
    return f"{names} failed; log: {run_dir / record.LOGS / f'rank-{first}.err'}"
