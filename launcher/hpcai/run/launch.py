"""Executing a LaunchPlan: write the run record around the backend that runs the ranks.

`run_launch(opts)` is the Python API (`hpcai sweep` calls it): it plans, creates the record
folder (never an existing record), writes plan.json, has the backend run the ranks (its
`execute`: starting them, passing on signals, naming failed ranks) and writes status.json.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from hpcai import record
from hpcai.errors import HpcaiError
from hpcai.output import plain, say, warn
from hpcai.run.model import LaunchOptions, LaunchPlan
from hpcai.run.plan import claimed_plan, plan_launch
from hpcai.run.processes import CANCELLED_BY, Outcome, Signals

__all__ = ["LaunchOptions", "LaunchPlan", "LaunchFailed", "plan_launch", "claimed_plan", "run_launch", "run_repeated", "execute"]


class LaunchFailed(HpcaiError):
    """The run started but did not succeed; `run_dir` holds its record."""

    def __init__(self, message: str, run_dir: Path, exit_code: int = 1):
        super().__init__(message)
        self.run_dir = run_dir
        self.exit_code = exit_code


def run_launch(opts: LaunchOptions, check: bool = True, echo: bool = False) -> Path:
    """Plan and run; returns the record folder. check: raise LaunchFailed unless it completed."""
    return execute(claimed_plan(opts), check=check, echo=echo)


def run_repeated(opts: LaunchOptions, repeat: int, echo: bool = False) -> list[Path]:
    """`--repeat N`: the same launch N times, one record each, as the Mila suite repeats whole runs
    (`results show|compare` then give mean, sd and the rest over them). With --output-dir, that
    folder holds the N records. Every repetition runs even when one fails (LaunchFailed after the
    last, naming them); Ctrl-C or a cancelled run stops the rest. A --done-file is written once,
    by the last repetition that runs."""
    from dataclasses import replace

    from hpcai import files
    from hpcai.run.scheduler import check_repeat

    check_repeat(repeat)
    if opts.stage:  # once for every repetition: the first stages, the rest would find it warm anyway
        from hpcai.run.stage import for_launch

        opts = for_launch(opts)
    if repeat == 1:
        return [run_launch(opts, echo=echo)]
    each = replace(opts, output_dir=None, runs_root=opts.output_dir or opts.runs_root, done_file="")
    runs, failed = [], []
    for i in range(1, repeat + 1):
        if echo:
            say(f"repetition {i} of {repeat}")
        run_dir = run_launch(replace(each, done_file=opts.done_file) if i == repeat else each, check=False,
                             echo=echo)
        runs.append(run_dir)
        state = record.read_json(run_dir / record.STATUS).get("state")
        if state == "cancelled":
            if opts.done_file and i < repeat:  # the rest will not run: this one ended the launch
                files.write_atomic(Path(opts.done_file).absolute(), "cancelled\n", None, "--done-file")
            raise LaunchFailed(f"repetition {i} of {repeat} was cancelled; the rest did not run", run_dir, 130)
        if state != "completed":
            failed.append(run_dir)
    if failed:
        raise LaunchFailed(f"{len(failed)} of {repeat} repetitions failed: {', '.join(map(str, failed))}",
                           failed[0], 1)
    return runs


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
    """docker/podman: the image Id; a SIF or SquashFS file: its sha256 (hpcai.run.digests), a
    staged one's from its site copy (the node-local copy, byte for byte the same, need not be here)."""
    path = Path(plan.staged_from or plan.image)
    if plan.runtime.engine:
        from hpcai.image.engine import image_id

        return image_id(plan.runtime.name, plan.image)
    if path.is_file():
        from hpcai.run.digests import image_sha256

        return image_sha256(path)  # cached by its path and stat identity: no rehash per launch
    return None


def _while_running(plan: LaunchPlan, digest: dict[str, str | None]) -> None:
    """While the ranks run (this process waits on them): the image digest for plan.json (a SIF
    can be many GB), then the imports that parsing and indexing the record will need, so that the
    launch ends as soon after its ranks as it can."""
    digest["d"] = _digest(plan)
    try:
        if plan.payload != "cmd":
            from hpcai.results.runs import prepare

            prepare(plan.payload)
        import hpcai.results.history  # noqa: F401 - the record is indexed as the launch ends (_index)
    except Exception:  # noqa: BLE001 - only a head start: finalize reports any real fault
        pass


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

    def text(self, path: Path, text: str, what: str) -> None:
        """A file the user named outside the record (--done-file), by files' rules for such names."""
        from hpcai import files

        try:
            files.write_atomic(path, text, None, what)
        except (OSError, HpcaiError) as exc:
            self.failed[str(path)] = getattr(exc, "strerror", None) or str(exc)

    def problem(self) -> str | None:
        if not self.failed:
            return None
        what = ", ".join(self.failed)
        return f"could not write {what} in {self.run_dir}: {'; '.join(sorted(set(self.failed.values())))}"


def _finalize_metrics(run_dir: Path, writes: _Writes) -> None:
    """Parse the logs into metrics.json; a parser or energy file that fails is the record's loss
    (a warning), never the run's: its status is already written."""
    from hpcai.results.runs import finalize

    try:
        finalize(run_dir)
    except OSError as exc:
        writes.failed[record.METRICS] = exc.strerror or str(exc)
    except Exception as exc:  # noqa: BLE001 - any parser fault: the run itself is recorded
        warn(f"{run_dir / record.METRICS} not written: {exc}")


def _index(run_dir: Path) -> None:
    """The finished record into the run history (hpcai.results.history), unless $HPCAI_RESULTS_DB
    is `off`; a history that cannot be written is a warning: the record is what counts."""
    import os

    if os.environ.get("HPCAI_RESULTS_DB", "").lower() == "off":
        return
    from hpcai.results.history import index_quietly

    problem = index_quietly(run_dir)
    if problem:
        warn(problem)


def execute(plan: LaunchPlan, check: bool = True, echo: bool = False) -> Path:
    run_dir = Path(plan.run_dir)
    try:  # before the record is started: stderr that fails (/dev/full) leaves no record behind
        for w in plan.warnings:
            warn(w)
    except OSError:
        record.abandon(run_dir)  # the folder claimed for it (claimed_plan)
        raise
    # the launcher's identity: a record still "running" after it was killed (SIGKILL, a node
    # that rebooted) is told from a live run (record.launcher_note)
    status = record.RunStatus(state="running", started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              **record.this_launcher())
    plan_data = plan.to_json()  # once: it sizes the space set aside and becomes plan.json
    _start_record(run_dir, plan, plan_data, status)
    logs = run_dir / record.LOGS
    writes = _Writes(run_dir)
    data: dict = {}
    digest: dict[str, str | None] = {}
    hasher = threading.Thread(target=_while_running, args=(plan, digest), daemon=True)

    def write_plan() -> None:  # once the ranks are starting: this is not on their critical path
        data.update(plan_data, image_digest=None)
        writes.json(record.PLAN, data)
        hasher.start()  # a SIF can be many GB: hash it while the ranks run

    started = time.time()
    done = threading.Event()
    follower = threading.Thread(target=_follow, args=(logs / "rank-0.out", done), daemon=True)
    if echo:  # rank 0's output, live, on stdout (every rank's is in logs/)
        follower.start()
    # Signals stay caught until the final status is written: a second or third Ctrl-C while the
    # record is being finished must not leave it half-written (or print a traceback).
    with Signals() as sig:
        try:
            outcome = plan.backend.execute(plan, logs, sig, write_plan)
        except (HpcaiError, OSError) as exc:  # a rank or srun could not be started: recorded
            outcome = Outcome(lines=[f"error: {exc}"], returncode=1)
        finally:
            if not data:  # nothing started: the record still says what was meant to run
                write_plan()
        wall = round(time.time() - started, 3)
        done.set()
        if echo:
            follower.join(timeout=10)
        state, codes, failed, rc = outcome.state, outcome.codes, outcome.failed, outcome.returncode
        exit_code = 0 if state == "completed" else (130 if state == "cancelled" else
                                                     next((c for c in failed.values() if c), rc or 1))
        status = record.RunStatus(
            state=state, exit_code=exit_code, failed_ranks=list(failed), wall_s=wall,
            steps=[{"name": plan.backend.name, "exit_code": exit_code, "wall_s": wall,
                    "rank_exit_codes": {str(r): c for r, c in sorted(codes.items())}}],
            started=status.started, ended=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            message=_message(state, failed, run_dir, rc, outcome.lines, sig.received),
            launcher_pid=status.launcher_pid, launcher_host=status.launcher_host,
            launcher_start=status.launcher_start)
        deadline = time.monotonic() + 60
        while hasher.is_alive() and time.monotonic() < deadline and sig.received is None:
            hasher.join(timeout=0.2)  # Ctrl-C does not wait for a GB-sized hash
        data["image_digest"] = digest.get("d")
        record.release_space(run_dir)  # the final files take the space set aside for them
        writes.json(record.STATUS, asdict(status))
        writes.json(record.PLAN, data)
        if plan.payload != "cmd":  # a raw command has no parser to run
            _finalize_metrics(run_dir, writes)
        if plan.done_file:  # last: whoever waits on it finds the record final
            writes.text(Path(plan.done_file), state + "\n", "--done-file")
    _index(run_dir)
    say(f"run record: {plain(run_dir, lines=False)}")  # -o as given: one line
    problem = writes.problem()
    if problem:
        raise LaunchFailed(f"the run {state}, but {problem}", run_dir, 130 if sig.received else 1)
    if sig.received and state != "cancelled":  # Ctrl-C while the record was finished: stop here too
        raise LaunchFailed(f"interrupted; the run had {state} and its record is complete: {run_dir}", run_dir, 130)
    if check and state != "completed":
        raise LaunchFailed(status.message, run_dir, 130 if state == "cancelled" else 1)
    return run_dir


def _message(state: str, failed: dict[int, int], run_dir: Path, rc: int, lines: list[str],
             signum: int | None = None) -> str:
    if state == "completed":
        return "completed"
    if state == "cancelled":
        by = f" by {CANCELLED_BY[signum]}" if signum in CANCELLED_BY else ""
        return f"cancelled{by}; logs in {run_dir / record.LOGS}"
    if not failed:
        why = next((ln.strip() for ln in reversed(lines) if "error" in ln), "")
        return (f"the step failed (exit code {rc}) before any rank reported"
                + (f": {why}" if why else f"; see {run_dir / record.LOGS}"))
    first = next(iter(failed))
    names = ", ".join(f"rank {r} (exit code {c})" for r, c in failed.items())
    return f"{names} failed; log: {run_dir / record.LOGS / f'rank-{first}.err'}"
