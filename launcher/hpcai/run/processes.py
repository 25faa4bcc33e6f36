"""What every backend's execution shares: the outcome it reports, signals turned into a flag,
process groups ended with a grace period, the rank shim's exit files, and failed ranks named
from exit codes alone."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

GRACE_S = 10.0          # between SIGTERM and SIGKILL
KILLED = {130, 137, 143}  # exit codes of ranks we (or Slurm) ended, not ranks that failed


@dataclass
class Outcome:
    """How a backend's ranks ended."""

    state: str = "failed"                                      # completed | failed | cancelled
    codes: dict[int, int] = field(default_factory=dict)        # rank -> exit code
    failed: dict[int, int] = field(default_factory=dict)       # ranks that failed by themselves
    lines: list[str] = field(default_factory=list)             # the launcher's own stderr (srun's)
    returncode: int = 0                                        # the launcher's (srun's) exit code


# The signals that cancel a run, and how its record says why. SIGHUP is a closed terminal or a
# dropped ssh session: its default would end hpcai alone, leaving the ranks (each in a session of
# its own) running and the record saying "running" for ever.
CANCELLED_BY = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM",
                signal.SIGHUP: "a hang-up (SIGHUP)"}


class Signals:
    """Turn SIGINT/SIGTERM/SIGHUP into a flag the run loop acts on (restored afterwards)."""

    def __init__(self) -> None:
        self.received: int | None = None  # the first signal: it says why the run was cancelled
        self.on_signal = None  # called once, in the main thread, when the first signal arrives
        self._old: dict[int, object] = {}
        self._ttys: list[int] = []

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            # Asked now: once the terminal has hung up, isatty() on it fails like any other call.
            self._ttys = [fd for fd in (1, 2) if os.isatty(fd)]
            for sig in CANCELLED_BY:
                self._old[sig] = signal.signal(sig, self._set)
        return self

    def _set(self, signum, _frame) -> None:
        if signum == signal.SIGHUP:
            self._drop_terminal()
        if self.received is not None:
            return
        self.received = signum
        if self.on_signal:
            self.on_signal()

    def _drop_terminal(self) -> None:
        """A hung-up terminal fails every write (EIO): what was meant for it goes nowhere, so that
        stopping the ranks and writing the record never stop on it (a file or pipe is kept)."""
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in self._ttys:
            os.dup2(null, fd)
        os.close(null)

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            # After a Ctrl-C the process is ending (a cancelled run stops repeats and sweeps too):
            # a second or third one must not interrupt the report with a traceback.
            signal.signal(sig, signal.SIG_IGN if self.received else old)


def stop(procs: list[subprocess.Popen], names: list[str], engine: str | None) -> None:
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


def read_exit_files(log_dir: Path) -> dict[int, int]:
    """{rank: exit code} from the rank-N.exit files the rank shim writes."""
    codes = {}
    for p in log_dir.glob("rank-*.exit"):
        try:
            codes[int(p.stem.split("-", 1)[1])] = int(p.read_text().strip())
        except ValueError:
            continue
    return codes


def failed_by_code(codes: dict[int, int]) -> dict[int, int]:
    """{rank: exit code} of the ranks whose own code says they failed (130/137/143 mean ended
    after another failed); when only ended ranks are left (cancelled from outside), all of them."""
    failed = {r: c for r, c in codes.items() if c and c not in KILLED}
    if not failed:
        failed = {r: c for r, c in codes.items() if c}
    return dict(sorted(failed.items()))
