"""What the hang-up and killed-launcher tests (tests/unit/run/test_hang_ups.py and
tests/integration/test_hang_ups_slurm.py) share: ranks that sleep for a number no other
process has, finding what is left of them (host processes, docker containers by the run's label),
polling with a deadline, and a session with a terminal of its own that can be hung up."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import termios
import time
from pathlib import Path


def nap() -> str:
    """A `sleep` argument (seconds) no other process has, to find the ranks by."""
    return f"300.{os.getpid()}{time.monotonic_ns() % 100000}"


def run_dir(tmp_path: Path, nap_arg: str) -> Path:
    return tmp_path / f"r{nap_arg.replace('.', '')}"  # unique: names the containers' label hpcai.run


def sleepers(nap_arg: str, launcher: int = 0) -> list[int]:
    """Live host processes whose command line holds NAP other than the LAUNCHER (the ranks' docker
    clients and the sleeps in their containers), zombies left out."""
    res = subprocess.run(["pgrep", "-f", nap_arg], capture_output=True, text=True, check=False)
    alive = []
    for pid in set(map(int, res.stdout.split())) - {launcher}:
        try:
            if "zombie" not in Path(f"/proc/{pid}/status").read_text().lower():
                alive.append(pid)
        except OSError:
            pass
    return alive


def containers(run: Path) -> list[str]:
    res = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=hpcai.run={run.name}"],
                         capture_output=True, text=True, check=True)
    return res.stdout.split()


def wait_for(what, deadline_s: float, proc: subprocess.Popen | None = None) -> bool:
    """Poll WHAT() until true or DEADLINE_S passed (generous: a loaded 2-core machine); stop
    early when PROC has ended (what it left is then checked once more)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if what():
            return True
        if proc is not None and proc.poll() is not None:
            return bool(what())
        time.sleep(0.2)
    return bool(what())


def clean_up(run: Path, nap_arg: str) -> None:
    """Remove what a launcher killed outright leaves: its containers and its ranks' clients."""
    left = containers(run)
    if left:
        subprocess.run(["docker", "rm", "-f", *left], capture_output=True, check=False)
    for pid in sleepers(nap_arg):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str] | None = None
                        ) -> tuple[subprocess.Popen, int]:
    """ARGV as a terminal session's leader, as a login shell is: its own session whose
    controlling terminal is a new pty (returned: its master side, whose closing hangs it up)."""
    master, slave = os.openpty()

    def take_the_terminal() -> None:  # after setsid (start_new_session): the pty becomes its terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                            start_new_session=True, preexec_fn=take_the_terminal)
    os.close(slave)
    return proc, master
