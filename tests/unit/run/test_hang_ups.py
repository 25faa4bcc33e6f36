"""Hang-ups and killed launchers (hostile corpus, round three, issue 25).

A closed terminal (SIGHUP) cancels a run as SIGTERM does: the ranks are ended and the record says
`cancelled` and why. A launcher killed outright (SIGKILL) cannot write a final status, so its
record keeps the launcher's pid, host and process start time, and `hpcai results show` says
`running (launcher gone)` once that process is gone. Every process is real: the CLI runs as a
subprocess, the ranks are docker containers of the local `debian:bookworm-slim`
(tests/infra/docker-up.sh), signals are sent by the kernel. The srun backend's hang-up is tested on
the Slurm cluster (tests/integration/test_hang_ups_slurm.py); Ctrl-C in
tests/unit/cli/test_ctrl_c.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from hangups import clean_up, containers, nap, run_dir, sleepers, start_on_a_terminal, wait_for

from hpcai import record

pytestmark = pytest.mark.hostile

IMAGE = "debian:bookworm-slim"
START_S = 90  # a loaded 2-core machine may take this long to start a few containers


# --- helpers: a local run whose ranks sleep, and what is left of it ----------------------------------

def launch_argv(hpcai_exe, run: Path, nap: str, ranks: int = 2) -> list[str]:
    """A local launch of RANKS containers that sleep NAP seconds (a number no other process has)."""
    return [*hpcai_exe, "launch", "--site", "local", "--runtime", "docker", "--image", IMAGE, "--no-entrypoint",
            "-o", str(run), "--ntasks-per-node", str(ranks), "--cmd", "--", "sleep", nap]


def wait_for_ranks(run: Path, nap_arg: str, ranks: int, proc: subprocess.Popen) -> None:
    """Until every rank's container runs its sleep (so a signal next reaches running ranks)."""
    def up() -> bool:  # a docker client and a sleep each
        return len(containers(run)) == ranks and len(sleepers(nap_arg, proc.pid)) >= 2 * ranks
    assert wait_for(up, START_S, proc), f"ranks did not start (hpcai exit {proc.poll()})"


def status_of(run: Path) -> dict:
    return json.loads((run / "status.json").read_text())


# --- 1. SIGHUP ends the run like SIGTERM -------------------------------------------------------------

@pytest.mark.docker
@pytest.mark.parametrize("how", ["terminal closed", "kill -HUP"])
def test_a_hang_up_cancels_the_run_and_ends_every_rank(hpcai_exe, tmp_path, how):
    """SIGHUP from a terminal that closes (the launcher's output then fails with EIO) or from
    `kill -HUP`: the ranks are stopped and status.json is final, `cancelled` by a hang-up."""
    nap_arg = nap()
    run = run_dir(tmp_path, nap_arg)
    argv = launch_argv(hpcai_exe, run, nap_arg)
    master = None
    if how == "terminal closed":
        proc, master = start_on_a_terminal(argv, tmp_path)
    else:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                start_new_session=True)
    try:
        wait_for_ranks(run, nap_arg, 2, proc)
        assert status_of(run)["state"] == "running"
        if how == "terminal closed":
            os.close(master)  # the kernel sends SIGHUP to the session leader, hpcai
            master = None
        else:
            proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=60)
        err = "" if how == "terminal closed" else proc.stderr.read()
        assert wait_for(lambda: not sleepers(nap_arg) and not containers(run), 30), "ranks left running"
    finally:
        if master is not None:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        clean_up(run, nap_arg)
    assert proc.returncode == 130, err
    status = status_of(run)
    assert status["state"] == "cancelled" and status["exit_code"] == 130, status
    assert status["message"] == f"cancelled by a hang-up (SIGHUP); logs in {run / 'logs'}"
    assert not (run / ".reserve").exists()
    if err:
        assert "Traceback" not in err
        assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [f"error: {status['message']}"]


# --- 2. a launcher killed outright is recognised later -----------------------------------------------

def results_show(hpcai_exe, run: Path) -> str:
    res = subprocess.run([*hpcai_exe, "results", "show", str(run)], capture_output=True, text=True, timeout=120,
                         check=False)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    return res.stdout


@pytest.mark.docker
def test_a_record_left_running_by_a_killed_launcher_says_launcher_gone(hpcai_exe, tmp_path):
    nap_arg = nap()
    run = run_dir(tmp_path, nap_arg)
    proc = subprocess.Popen(launch_argv(hpcai_exe, run, nap_arg), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True)
    try:
        wait_for_ranks(run, nap_arg, 2, proc)
        status = status_of(run)
        assert status["launcher_pid"] == proc.pid and status["launcher_host"] == socket.gethostname()
        assert status["launcher_start"] == record.process_start(proc.pid)
        live = results_show(hpcai_exe, run)
        assert re.search(r"│ running\b", live) and "launcher" not in live, live
        proc.kill()  # SIGKILL: nothing of hpcai runs any more, the record says "running"
        proc.wait()
        assert status_of(run)["state"] == "running"
        gone = results_show(hpcai_exe, run)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        clean_up(run, nap_arg)  # the ranks a SIGKILL leaves: stopped here
    assert "running (launcher gone)" in gone, gone


def write_record(run: Path, **status) -> Path:
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"payload": "cmd", "nodes": 1, "ntasks_per_node": 1}))
    (run / "status.json").write_text(json.dumps({"state": "running", **status}))
    return run


def test_launcher_note_says_gone_elsewhere_or_nothing(tmp_path):
    """The rule on every shape of record: this host and this live process is running; the same
    pid with another start (pid reuse) or no such pid is gone; another host is named, never
    guessed; a record without the fields (older hpcai) or with damaged ones says nothing more."""
    me = record.this_launcher()
    here = socket.gethostname()
    assert me == {"launcher_pid": os.getpid(), "launcher_host": here, "launcher_start": record.process_start("self")}
    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: a pid that no process has now
    cases = [
        (me, ""),
        ({**me, "launcher_start": me["launcher_start"] + "0"}, "launcher gone"),  # the pid, reused
        ({**me, "launcher_pid": dead.pid}, "launcher gone"),
        ({**me, "launcher_host": "nid001"}, "launcher on nid001"),
        ({}, ""),
        ({**me, "launcher_pid": "1"}, ""), ({**me, "launcher_pid": True}, ""), ({**me, "launcher_pid": -1}, ""),
        ({**me, "launcher_host": None}, ""), ({**me, "launcher_start": 7}, ""),
    ]
    for fields, note in cases:
        assert record.launcher_note({"state": "running", **fields}) == note, fields
        assert record.launcher_note({"state": "cancelled", **fields}) == ""
    old = write_record(tmp_path / "old")  # written before these fields: loads, shown as it says
    assert record.read_status(old).launcher_pid is None
    from hpcai.results.loading import load

    assert load(old).shown_state == "running"
    assert load(write_record(tmp_path / "gone", **{**me, "launcher_pid": dead.pid})).shown_state == \
        "running (launcher gone)"


def test_a_zombie_launcher_is_gone():
    """Killed and not yet reaped by its parent: it runs nothing, it is gone."""
    proc = subprocess.Popen(["sleep", "60"])
    start = record.process_start(proc.pid)
    assert start is not None
    proc.kill()
    assert wait_for(lambda: "Z" in Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[:1], 10)
    assert record.process_start(proc.pid) is None
    status = {"state": "running", "launcher_pid": proc.pid, "launcher_host": socket.gethostname(),
              "launcher_start": start}
    assert record.launcher_note(status) == "launcher gone"
    proc.wait()
