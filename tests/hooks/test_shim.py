"""entrypoints/hpcai-shim, the per-rank shim of `hpcai launch`, run for real under dash and bash.

The engine after `--` is a stand-in script (tests/hooks/fake-engine below), because what is
checked is what the shim hands to docker/apptainer: argv, environment, signals, exit files.
Real containers through the shim are covered by tests/integration/test_launch_slurm.py.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hooklib import BASE_ENV, REPO

SHIM = REPO / "entrypoints" / "hpcai-shim"
SLURM = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_NODEID": "1",
         "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_ID": "99", "SLURM_STEP_NODELIST": "nid[003-004]",
         "SLINGSHOT_VNIS": "1234", "HOME": "/root"}
# Deadlines for a loaded machine (a CI runner with both cores busy): generous, as they only bound
# how long a broken shim can hang the run; no test waits for a fixed time that assumes speed.
DEADLINE = 60
RANKS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")
# Prints its argv and environment as JSON; `kill NAME` and `ps`/`rm` are recorded in $FAKE_LOG.
FAKE_ENGINE = """#!/usr/bin/env python3
import json, os, sys
log = os.environ.get("FAKE_LOG")
if log and sys.argv[1] in ("kill", "ps", "rm"):
    with open(log, "a") as fh:
        fh.write(" ".join(sys.argv[1:]) + "\\n")
    if sys.argv[1] == "ps":
        print("c1\\nc2")
    sys.exit(0)
print(json.dumps({"argv": sys.argv[1:], "env": dict(os.environ)}))
"""


@pytest.fixture
def engine(workdir):
    path = workdir / "fake-engine"
    path.write_text(FAKE_ENGINE.replace("/usr/bin/env python3", sys.executable))
    path.chmod(0o755)
    return str(path)


def shim(shell, options, cmd, env, **kw):
    return subprocess.run([shell, str(SHIM), *options, "--", *cmd], env={**BASE_ENV, **env},
                          capture_output=True, text=True, timeout=DEADLINE, check=False, **kw)


def ranks_of(shell, env, *options):
    res = shim(shell, list(options), ["sh", "-c", 'for v in "$@"; do eval "echo $v=\\${$v-}"; done', "-", *RANKS],
               env)
    assert res.returncode == 0, res.stderr
    return dict(line.split("=", 1) for line in res.stdout.splitlines())


def test_rank_variables_from_slurm(shell):
    assert ranks_of(shell, SLURM) == {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
                                      "NODE_RANK": "1", "MASTER_ADDR": "nid003", "MASTER_PORT": str(99 + 61000)}


def test_given_values_win_and_launcher_values_come_first(shell):
    got = ranks_of(shell, {**SLURM, "MASTER_ADDR": "given"}, "--master-addr", "nid777", "--port", "7010")
    assert got["MASTER_ADDR"] == "given" and got["MASTER_PORT"] == "7010"
    assert ranks_of(shell, SLURM, "--master-addr", "nid777")["MASTER_ADDR"] == "nid777"
    assert ranks_of(shell, {"SLURM_PROCID": "0"})["MASTER_PORT"] == "29500"  # no job id


def test_pmi_and_per_gpu(shell):
    pmi = ranks_of(shell, {"PMI_RANK": "3", "PMI_LOCAL_RANK": "1", "PMI_SIZE": "4", "PMI_LOCAL_SIZE": "2"})
    assert (pmi["RANK"], pmi["LOCAL_RANK"], pmi["WORLD_SIZE"], pmi["LOCAL_WORLD_SIZE"]) == ("3", "1", "4", "2")
    copy = ranks_of(shell, SLURM, "--per-gpu")
    assert copy == {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "NODE_RANK": "0",
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(99 + 61000 + 1)}  # + LOCAL_RANK


FLUX = {"FLUX_TASK_RANK": "5", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_SIZE": "8", "FLUX_JOB_NNODES": "2",
        "FLUX_JOB_ID": "f2Xb3sYw5", "PMI_RANK": "5", "PMI_SIZE": "8", "HOME": "/root"}


def stand_in_flux(workdir, host: str) -> dict[str, str]:
    """A `flux` on PATH that answers `flux hostlist --nth=0 local` with HOST and records its argv:
    Flux cannot be installed here (not in Debian), so this stands in for the broker's answer."""
    bin_dir = workdir / "flux-bin"
    bin_dir.mkdir(exist_ok=True)
    flux = bin_dir / "flux"
    flux.write_text(f'#!/bin/sh\necho "$*" >>"{workdir}/flux.argv"\n' + (f"echo {host}\n" if host else "exit 1\n"))
    flux.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_flux_task_asks_flux_for_the_first_host(shell, workdir):
    exit_dir = workdir / "logs"
    exit_dir.mkdir()
    got = ranks_of(shell, {**FLUX, **stand_in_flux(workdir, "tuolumne1001")}, "--exit-dir", str(exit_dir))
    assert got == {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "NODE_RANK": "1",
                   "MASTER_ADDR": "tuolumne1001", "MASTER_PORT": "29500"}
    assert (workdir / "flux.argv").read_text() == "hostlist --nth=0 local\n"
    assert sorted(p.name for p in exit_dir.iterdir()) == ["rank-5.exit"]  # its answer's file is gone


def test_flux_is_not_asked_when_the_address_is_known(shell, workdir):
    exit_dir = workdir / "logs"
    exit_dir.mkdir()
    path = stand_in_flux(workdir, "tuolumne1001")
    assert ranks_of(shell, {**FLUX, **path}, "--exit-dir", str(exit_dir), "--master-addr", "n7")["MASTER_ADDR"] == "n7"
    assert not (workdir / "flux.argv").exists()


def test_flux_without_an_answer_warns_and_leaves_the_address_unset(shell, workdir):
    exit_dir = workdir / "logs"
    exit_dir.mkdir()
    res = shim(shell, ["--exit-dir", str(exit_dir)], ["sh", "-c", 'echo "${MASTER_ADDR-unset}"'],
               {**FLUX, **stand_in_flux(workdir, "")})
    assert (res.returncode, res.stdout) == (0, "unset\n")
    assert res.stderr == "hpcai-shim: warning: flux hostlist --nth=0 local named no host: MASTER_ADDR is not set\n"


def test_suffix_applies_only_when_the_name_resolves(shell):
    assert ranks_of(shell, {**SLURM, "SLURM_STEP_NODELIST": "localhost"}, "--suffix", "")["MASTER_ADDR"] == "localhost"
    res = shim(shell, ["--suffix", "i"], ["sh", "-c", 'echo "$MASTER_ADDR"'],
               {**SLURM, "SLURM_STEP_NODELIST": "nosuchhost[1-2]"})
    assert res.stdout == "nosuchhost1\n" and "nosuchhost1i does not resolve" in res.stderr


def test_docker_gets_a_name_and_variable_names_not_values(shell, engine, workdir):
    (workdir / "SLURM_DECOY").write_text("")  # a --pass glob must not match files in the cwd
    hostile = ["a b", "it's", "$(touch /tmp/pwned)", "x;y", "new\nline"]
    res = shim(shell, ["--forward", "flags", "--name", "hpcai-{jobid}-r-{rank}", "--pass", "SLURM_*",
                       "--pass", "SLINGSHOT_*"], [engine, "run", "--rm", "img", *hostile],
               {**SLURM, "NOTE": "x\nexport SLURM_FAKE='1'\ndeclare -x SLINGSHOT_FAKE=2"}, cwd=workdir)
    assert res.returncode == 0, res.stderr
    argv = json.loads(res.stdout)["argv"]
    assert argv[:2] == ["run", "--name=hpcai-99-r-5"] and argv[-7:] == ["--rm", "img", *hostile]
    forwarded = [argv[i + 1] for i, t in enumerate(argv) if t == "-e"]
    assert {"SLINGSHOT_VNIS", "SLURM_PROCID", "RANK", "MASTER_ADDR"} <= set(forwarded)
    assert "HOME" not in forwarded and "SLURM_DECOY" not in forwarded
    assert "SLURM_FAKE" not in forwarded and "SLINGSHOT_FAKE" not in forwarded  # lines of a value
    assert len(forwarded) == len(set(forwarded)) and not any("=" in f for f in forwarded)


def test_charliecloud_ranks_of_a_node_name_their_peer_group(shell, engine):
    """ch-run --join-tag: one name per job, run and node (ch-run's own default, SLURM_STEP_ID, is
    "0" for every job's first step), the rank's environment inherited as it is."""
    res = shim(shell, ["--forward", "join-tag", "--name", "hpcai-{jobid}-r-{node}"],
               [engine, "--join-ct=4", "--set-env", "img.sqfs", "--", "x"], {**SLURM, "SLURMD_NODENAME": "nid004"})
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["argv"] == ["--join-tag=hpcai-99-r-nid004", "--join-ct=4", "--set-env", "img.sqfs", "--", "x"]
    assert out["env"]["RANK"] == "5" and out["env"]["SLURM_PROCID"] == "5"
    bare = json.loads(shim(shell, ["--forward", "join-tag", "--name", "g-{node}"], [engine, "i"], {}).stdout)
    host = Path("/proc/sys/kernel/hostname").read_text().strip().split(".")[0]
    assert bare["argv"] == [f"--join-tag=g-{host}", "i"]  # no Slurm: the kernel's host name


def test_apptainer_gets_apptainerenv(shell, engine):
    res = shim(shell, ["--forward", "env", "--prefix", "APPTAINER", "--pass", "SLINGSHOT_*"], [engine, "exec", "i", "x"],
               {**SLURM, "APPTAINERENV_RANK": "user"})
    out = json.loads(res.stdout)
    assert out["argv"] == ["exec", "i", "x"]
    assert out["env"]["APPTAINERENV_RANK"] == "user"  # never overwritten
    assert out["env"]["APPTAINERENV_WORLD_SIZE"] == "8" and out["env"]["APPTAINERENV_SLINGSHOT_VNIS"] == "1234"
    assert "APPTAINERENV_HOME" not in out["env"]


def test_exit_code_file_logs_and_stdin(shell, workdir):
    res = shim(shell, ["--forward", "join-tag", "--exit-dir", str(workdir)], ["sh", "-c", "cat; exit 4"],
               SLURM, input="from stdin\n")
    assert res.returncode == 4 and res.stdout == "from stdin\n"
    assert (workdir / "rank-5.exit").read_text() == "4\n"
    logs = workdir / "logs"
    res = shim(shell, ["--log-dir", str(logs)], ["sh", "-c", "echo out; echo err >&2"], SLURM)
    assert res.returncode == 0 and res.stdout == ""
    assert (logs / "rank-5.out").read_text() == "out\n" and (logs / "rank-5.err").read_text() == "err\n"


@pytest.fixture
def spawn():
    """spawn(argv, **popen_kw) -> Popen, in a process group of its own that is killed at teardown:
    a shim that failed a test (or a command it left) does not run on past it."""
    procs: list[subprocess.Popen] = []

    def start(argv, **kw):
        procs.append(subprocess.Popen(argv, start_new_session=True, **kw))
        return procs[-1]

    yield start
    for proc in procs:
        if proc.poll() is None:  # still running (its pid, the group's id, is not reused before this)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


def _ready(proc: subprocess.Popen) -> None:
    """Wait, up to DEADLINE, for the command's "ready" line on the shim's stdout."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=DEADLINE), "no ready line"
    assert proc.stdout.readline() == "ready\n"


def _default_signals() -> None:
    """In the shim's process before it execs: SIGINT and SIGTERM to their defaults. A shell
    cannot trap a signal ignored when it started, and a test run from a background job (`make
    test &`) has SIGINT ignored, which every child inherits; srun starts ranks with defaults."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_reach_the_child_and_its_code_is_kept(shell, workdir, sig, spawn):
    proc = spawn([shell, str(SHIM), "--exit-dir", str(workdir), "--", "sh", "-c",
                  "trap 'exit 9' TERM; echo ready; sleep 30 & wait"],
                 env={**BASE_ENV, **SLURM}, stdout=subprocess.PIPE, text=True,
                 preexec_fn=_default_signals)
    _ready(proc)
    proc.send_signal(sig)  # SIGINT arrives as SIGTERM: background commands of sh ignore SIGINT
    assert proc.wait(timeout=DEADLINE) == 9
    assert (workdir / "rank-5.exit").read_text() == "9\n"


@pytest.mark.hostile
def test_the_signal_test_passes_when_started_with_sigint_ignored():
    """As `make test &` runs it: a background job of a non-interactive shell starts with SIGINT
    ignored, and every child inherits that. The test above sets the dispositions it relies on."""
    code = ("import signal, sys, pytest; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            f"sys.exit(pytest.main([{__file__!r}, '-q', '-p', 'no:cacheprovider', "
            "'-k', 'test_signals_reach_the_child_and_its_code_is_kept']))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "4 passed" in res.stdout, res.stdout[-2000:]


def test_sigterm_kills_the_container_by_name(shell, workdir, engine, spawn):
    log = workdir / "engine.log"
    wrapper = workdir / "slow-engine"  # `run` blocks like an attached docker run
    wrapper.write_text(f"#!/bin/sh\n[ \"$1\" = run ] || exec {engine} \"$@\"\necho ready; sleep 30 & wait\n")
    wrapper.chmod(0o755)
    proc = spawn([shell, str(SHIM), "--forward", "flags", "--name", "hpcai-{jobid}-{rank}",
                  "--exit-dir", str(workdir), "--", str(wrapper), "run", "img"],
                 env={**BASE_ENV, **SLURM, "FAKE_LOG": str(log), "SLURMD_NODENAME": "nid003"},
                 stdout=subprocess.PIPE, text=True)
    _ready(proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=DEADLINE) == 128 + signal.SIGTERM
    assert log.read_text() == "kill hpcai-99-5\n"  # once, also when the signal came just after the fork
    assert (workdir / "rank-5.host").read_text() == "nid003\n"


def _proc_status(pid: int) -> dict[str, str]:
    """/proc/PID/status as a dict (SigCgt: the signals the process has handlers for)."""
    text = (Path("/proc") / str(pid) / "status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def test_a_signal_at_any_moment_ends_the_rank(shell, workdir, engine, spawn):
    """SIGTERM sent at every point of the shim's life, 60 times: before the command starts, between
    its fork and `_s_pid=$!` (the race that left a rank running in a full CI run), between the fork
    and the command's exec (a signal the forked shell catches there is lost), and during the wait.
    Each time the shim exits 143, writes its exit file, kills the container at most once (exactly
    once when the command started) and leaves no command behind."""
    wrapper = workdir / "slow-engine"
    wrapper.write_text(f"#!/bin/sh\n[ \"$1\" = run ] || exec {engine} \"$@\"\n"
                       "echo $$ >\"$PID_FILE\"; echo ready; exec sleep 300\n")
    wrapper.chmod(0o755)
    for attempt in range(60):
        pid_file, log = workdir / f"pid-{attempt}", workdir / f"engine-{attempt}.log"
        proc = spawn([shell, str(SHIM), "--forward", "flags", "--name", "hpcai-{rank}",
                      "--exit-dir", str(workdir), "--", str(wrapper), "run", "img"],
                     env={**BASE_ENV, **SLURM, "PID_FILE": str(pid_file), "FAKE_LOG": str(log)},
                     stdout=subprocess.DEVNULL)
        # From the moment its traps are set (the shell's own start-up cannot be guarded), 0-28 ms
        # on: before, during and after the command's start (on a loaded machine, wherever it is).
        deadline = time.monotonic() + DEADLINE
        while "SigCgt" not in (status := _proc_status(proc.pid)) or not int(status["SigCgt"], 16) & 1 << 14:
            assert time.monotonic() < deadline, f"attempt {attempt}: no SIGTERM trap"
            time.sleep(0.0005)
        time.sleep(attempt % 15 * 0.002)
        proc.send_signal(signal.SIGTERM)
        # the command sleeps 300 s: only the signal ends it, well within the deadline
        assert proc.wait(timeout=DEADLINE) == 143, f"attempt {attempt}"
        assert (workdir / "rank-5.exit").read_text() == "143\n"
        kills = log.read_text() if log.exists() else ""
        assert kills in ("", "kill hpcai-5\n"), f"attempt {attempt}"
        if pid_file.exists() and pid_file.read_text().strip():
            assert kills == "kill hpcai-5\n", f"attempt {attempt}"
            with pytest.raises(ProcessLookupError):
                os.kill(int(pid_file.read_text()), 0)


def test_a_signal_the_command_missed_is_sent_again(shell, workdir, spawn):
    """A signal sent between the command's fork and its exec is lost; the shim cannot see that
    happen, so while the child still carries its own name (here: the command is the same shell,
    so the name never tells) it sends the signal again until the command is gone. The command
    stands in for the lost one by ignoring its first SIGTERM."""
    proc = spawn([shell, str(SHIM), "--exit-dir", str(workdir), "--", shell, "-c",
                  "trap 'trap - TERM' TERM; echo ready; while :; do sleep 0.1; done"],
                 env={**BASE_ENV, **SLURM}, stdout=subprocess.PIPE, text=True,
                 preexec_fn=_default_signals)
    _ready(proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=DEADLINE) == 143
    assert (workdir / "rank-5.exit").read_text() == "143\n"


def test_a_command_that_has_the_signal_gets_it_once(shell, workdir, spawn):
    """Once the command runs under its own name (exec'd), a kill reaches it: no second copy that
    would interrupt a payload's orderly shutdown. The command takes its time after SIGTERM and
    exits with the number of SIGTERMs it got; the shim keeps that code."""
    code = ("import signal, sys, time\n"
            "got = []\n"
            "signal.signal(signal.SIGTERM, lambda *_: got.append(1))\n"
            "print('ready', flush=True)\n"
            "while not got: time.sleep(0.01)\n"
            "time.sleep(2)  # past the shim's first re-sends, were there any (at 0.1, 0.3, 0.7, 1.5 s)\n"
            "sys.exit(len(got))\n")
    proc = spawn([shell, str(SHIM), "--exit-dir", str(workdir), "--", sys.executable, "-c", code],
                 env={**BASE_ENV, **SLURM}, stdout=subprocess.PIPE, text=True,
                 preexec_fn=_default_signals)
    _ready(proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=DEADLINE) == 1
    assert (workdir / "rank-5.exit").read_text() == "1\n"


def test_cleanup_removes_labelled_containers(shell, workdir, engine):
    log = workdir / "engine.log"
    res = shim(shell, ["--cleanup", "hpcai.run=r1"], [engine], {"FAKE_LOG": str(log)})
    assert res.returncode == 0
    assert log.read_text() == "ps -aq --filter label=hpcai.run=r1\nrm -f c1 c2\n"


@pytest.mark.parametrize("options, message", [
    (["--bogus", "1"], "bad option '--bogus'"), (["--forward"], "option --forward needs a value"),
    (["--forward", "flags"], "no command after --"), (["--forward", "flags", "--", "docker"], "no 'ENGINE run' after --")])
def test_bad_options_exit_2(shell, options, message):
    res = subprocess.run([shell, str(SHIM), *options], env=BASE_ENV, capture_output=True, text=True,
                         timeout=30, check=False)
    assert (res.returncode, res.stderr) == (2, f"hpcai-shim: {message}\n")


def test_plans_point_at_this_file():
    from hpcai.run.host import Host

    assert Host().shim() == ["/bin/sh", str(SHIM)]
