"""The local backend end to end with a FAKE `apptainer` (Apptainer cannot be installed here).

The mock stands in for the apptainer binary only: it records its argv, turns APPTAINERENV_X into X
like Apptainer does (also under --cleanenv), and execs the command after the image. Everything
else — planning, process start, rank variables, failure handling, signals, the run record — is the
real code. Real Apptainer runs are in tests marked `apptainer`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FAKE = '''#!{python}
import json, os, sys
args = sys.argv[1:]
verb, args = args[0], args[1:]
flags = []
while args and args[0].startswith("-"):
    flag = args.pop(0)
    flags.append(flag)
    if flag in ("--bind", "-B"):
        flags.append(args.pop(0))
image, cmd = args[0], args[1:]
env = {{k[len("APPTAINERENV_"):]: v for k, v in os.environ.items() if k.startswith("APPTAINERENV_")}}
if "--cleanenv" in flags:
    env = {{**env, "PATH": "/usr/bin:/bin"}}
else:
    env = {{**os.environ, **env}}
with open(os.environ["FAKE_LOG"] + "." + env.get("RANK", "x"), "w") as fh:
    json.dump({{"argv": sys.argv, "verb": verb, "flags": flags, "image": image}}, fh)
os.execvpe(cmd[0], cmd, env)
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "apptainer"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    image = tmp_path / "img.sif"
    image.write_bytes(b"not really a SIF")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_LOG": str(tmp_path / "call")}
    return image, env


def run(hpcai_exe, env, image, run_dir, *args, **kw):
    argv = [*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--image", str(image),
            "-o", str(run_dir), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, **kw)


def test_ranks_env_and_secret_kept_out_of_argv(hpcai_exe, fake, tmp_path):
    image, env = fake
    run_dir = tmp_path / "r"
    res = run(hpcai_exe, env, image, run_dir, "--ntasks-per-node", "2", "--no-entrypoint",
              "--env", "DB_PASSWORD=pw123", "--env", "NCCL_SOCKET_IFNAME=hsn0,hsn1", "--cmd", "--",
              "sh", "-c", 'echo "$RANK/$WORLD_SIZE $NCCL_SOCKET_IFNAME $DB_PASSWORD"')
    assert res.returncode == 0, res.stderr
    assert (run_dir / "logs" / "rank-1.out").read_text() == "1/2 hsn0,hsn1 pw123\n"
    call = json.loads((tmp_path / "call.1").read_text())
    assert call["verb"] == "exec" and "--containall" in call["flags"] and call["image"] == str(image)
    assert not any("pw123" in a for a in call["argv"])  # the secret travelled in the environment
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["env"]["DB_PASSWORD"] == "***" and plan["image_digest"].startswith("sha256:")
    assert "pw123" not in (run_dir / "plan.json").read_text()


SHAPED_SECRETS = {"DATABASE_URL": "postgres://app:Pw0rd-db@db.example/prod", "SMTP_PASS": "smtp-pw-77",
                  "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=azk3y=="}


@pytest.mark.hostile
def test_secrets_by_name_and_shape_never_in_argv_files_or_output(hpcai_exe, fake, tmp_path):
    """Issue 12: URL user-info, *_PASS, connection strings; --password V in --cmd. The values reach
    the ranks (through the environment) and nothing hpcai writes or prints."""
    image, env = fake
    run_dir = tmp_path / "r"
    values = list(SHAPED_SECRETS.values())
    env_args = [a for k, v in SHAPED_SECRETS.items() for a in ("--env", f"{k}={v}")]
    res = run(hpcai_exe, env, image, run_dir, "--no-entrypoint", *env_args, "--cmd", "--",
              "sh", "-c", 'echo "$DATABASE_URL $SMTP_PASS"', "--password", "cmd-pw-9")
    assert res.returncode == 0, res.stderr
    assert (run_dir / "logs" / "rank-0.out").read_text() == f"{values[0]} {values[1]}\n"
    call = json.loads((tmp_path / "call.0").read_text())
    assert not any(v in a for a in call["argv"] for v in values)
    written = "".join(p.read_text() for p in run_dir.rglob("*.json"))
    for secret in [*values, "cmd-pw-9"]:  # (stdout is the command's own output: it echoes them)
        assert secret not in written and secret not in res.stderr
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["env"]["DATABASE_URL"] == "postgres://app:***@db.example/prod"
    assert plan["command"][-2:] == ["--password", "***"]
    assert "warning: --cmd passes a value after --password" in res.stderr
    # records are private to the user
    assert (run_dir.stat().st_mode & 0o777, (run_dir / "logs").stat().st_mode & 0o777) == (0o700, 0o700)
    assert (run_dir / "plan.json").stat().st_mode & 0o777 == 0o600


def start_ranks(hpcai_exe, fake, run_dir: Path, ranks: int, script: str, marker: Path) -> subprocess.Popen:
    """A local launch of RANKS copies of `sh -c SCRIPT MARKER`, returned once each rank has written
    MARKER.<rank> (so a signal sent next reaches running ranks)."""
    image, env = fake
    argv = [*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--image", str(image),
            "-o", str(run_dir), "--ntasks-per-node", str(ranks), "--no-entrypoint", "--cmd", "--",
            "sh", "-c", script, str(marker)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(list(marker.parent.glob(f"{marker.name}.*"))) < ranks and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


def test_sigterm_ends_every_rank(hpcai_exe, fake, tmp_path):
    run_dir = tmp_path / "r"
    proc = start_ranks(hpcai_exe, fake, run_dir, 3, "echo $$ > $0.$RANK; exec sleep 300", tmp_path / "pid")
    pids = [int(p.read_text()) for p in tmp_path.glob("pid.*")]
    assert len(pids) == 3
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "cancelled" in err
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert json.loads((run_dir / "status.json").read_text())["state"] == "cancelled"


@pytest.mark.hostile
def test_rank_that_cannot_start_is_reported(hpcai_exe, fake, tmp_path):
    image, env = fake
    res = run(hpcai_exe, env, image, tmp_path / "r", "--no-entrypoint", "--cmd", "--", "/no/such/binary")
    assert res.returncode == 1 and "rank 0 (exit code" in res.stderr


N_TOGETHER = 30  # the figure


@pytest.mark.hostile
def test_launches_started_together_never_share_a_record(hpcai_exe, fake, tmp_path):
    """issue 12: 30 launches started at once from one folder made 17 records, some holding another
    run's plan. Each must get its own folder, the one it names, holding its own complete run."""
    image, env = fake
    work = tmp_path / "work"
    work.mkdir()
    procs = [subprocess.Popen([*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--image",
                               str(image), "--no-entrypoint", "--cmd", "--", "echo", f"run-{i}"],
                              env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(N_TOGETHER)]
    named = {}
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        named[i] = Path(err.rsplit("run record: ", 1)[1].split()[0])
    assert len(set(named.values())) == N_TOGETHER and len(list((work / "runs").iterdir())) == N_TOGETHER
    for i, run_dir in named.items():
        assert (run_dir / "logs" / "rank-0.out").read_text() == f"run-{i}\n"
        assert json.loads((run_dir / "plan.json").read_text())["command"][-1] == f"run-{i}"
        assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
        assert sorted(p.name for p in run_dir.iterdir()) == ["logs", "plan.json", "status.json"]


@pytest.mark.hostile
def test_two_runs_given_one_output_dir_at_once_never_share_it(hpcai_exe, fake, tmp_path):
    image, env = fake
    run_dir = tmp_path / "shared"
    argv = [*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--image", str(image),
            "-o", str(run_dir), "--no-entrypoint", "--cmd", "--", "sleep", "1"]
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2]
    refused = next(err for code, err in results if code == 2).strip()
    # one line either way: the record is already written (plan.json) or still being written (logs/)
    assert "\n" not in refused and f"{run_dir} already holds" in refused
    assert refused.endswith(("a run never overwrites another", "a run never shares a record"))


# --- faults: a full disk, repeated Ctrl-C --------------------------------------------------------

def _tmpfs(folder: Path, options: str):
    """A small tmpfs at FOLDER for the test (root only: CI runs as root), unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], check=True)
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def small_disk(tmp_path):
    """1 MiB, filled to the last block by FILL."""
    yield from _tmpfs(tmp_path / "small", "size=1m")


FILL = "dd if=/dev/zero of={mnt}/fill bs=4k 2>/dev/null; true"  # dd ends with ENOSPC


@pytest.mark.hostile
def test_full_disk_before_the_run_starts_nothing(hpcai_exe, fake, tmp_path, small_disk):
    image, env = fake
    subprocess.run(["sh", "-c", FILL.format(mnt=small_disk)], check=False)
    res = run(hpcai_exe, env, image, small_disk / "r", "--no-entrypoint", "--cmd", "--",
              "touch", str(tmp_path / "ran"))
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        f"error: cannot write the run record in {small_disk / 'r'}: No space left on device; nothing was started"]
    assert not (tmp_path / "ran").exists() and sorted(p.name for p in small_disk.iterdir()) == ["fill"]


@pytest.mark.hostile
def test_disk_filled_by_the_run_still_gets_its_final_status(hpcai_exe, fake, tmp_path, small_disk):
    image, env = fake
    res = run(hpcai_exe, env, image, small_disk / "r", "--no-entrypoint", "--cmd", "--",
              "sh", "-c", FILL.format(mnt=small_disk))
    assert res.returncode == 0, res.stderr
    run_dir = small_disk / "r"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    assert json.loads((run_dir / "plan.json").read_text())["image_digest"].startswith("sha256:")
    assert sorted(p.name for p in run_dir.iterdir()) == ["logs", "plan.json", "status.json"]  # no temp files


@pytest.mark.hostile
def test_record_that_cannot_be_finished_says_so_in_one_line(hpcai_exe, fake, tmp_path, small_disk):
    """The run also takes the space set aside for its record: the final files cannot be written;
    the launch says which, in one line, exit 1, and leaves no temporary files."""
    image, env = fake
    run_dir = small_disk / "r"
    res = run(hpcai_exe, env, image, run_dir, "--no-entrypoint", "--cmd", "--",
              "sh", "-c", f"rm {run_dir}/.reserve; {FILL.format(mnt=small_disk)}")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        f"error: the run completed, but could not write status.json, plan.json in {run_dir}: "
        "No space left on device")
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.hostile
@pytest.mark.parametrize("signals", [1, 3])
def test_ctrl_c_once_or_thrice_ends_with_a_final_status(hpcai_exe, fake, tmp_path, signals):
    run_dir = tmp_path / "r"
    proc = start_ranks(hpcai_exe, fake, run_dir, 2, "trap '' INT; echo up > $0.$RANK; sleep 2", tmp_path / "up")
    for _ in range(signals):  # the ranks ignore SIGINT: hpcai's SIGTERM to them is what ends them
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [
        f"error: cancelled; logs in {run_dir / 'logs'}"]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "cancelled"


@pytest.fixture
def few_inodes(tmp_path):
    """Room for data but only 8 inodes: the third rank's log cannot be made."""
    yield from _tmpfs(tmp_path / "inodes", "size=4m,nr_inodes=8")


@pytest.mark.hostile
def test_a_rank_log_that_cannot_be_made_leaves_no_rank_running(hpcai_exe, fake, few_inodes):
    image, env = fake
    marker = f"sleep 31.{os.getpid()}"  # a command line no other process has
    res = run(hpcai_exe, env, image, few_inodes / "r", "--ntasks-per-node", "3", "--no-entrypoint",
              "--cmd", "--", "sh", "-c", marker)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "cannot start rank" in res.stderr and "No space left on device" in res.stderr
    assert json.loads((few_inodes / "r" / "status.json").read_text())["state"] == "failed"
    time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1, "a rank was orphaned"


@pytest.mark.hostile
def test_stderr_on_a_full_device_leaves_no_record_running(hpcai_exe, fake, tmp_path):
    """A plan warning written to a stderr on /dev/full: one failure, and no record saying running."""
    image, env = fake
    argv = [*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--image", str(image),
            "-o", str(tmp_path / "r"), "--no-entrypoint", "--cmd", "--", "true", "--password", "x"]
    with open("/dev/full", "w") as full:
        res = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=full, text=True, timeout=60)
    assert res.returncode == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.hostile
def test_ctrl_c_while_the_record_is_finished_stops_the_repeats(hpcai_exe, fake, tmp_path):
    """The ranks are done, the image (6 GB, sparse) is still being hashed: Ctrl-C there ends the
    launch with 130 after a complete record, and the second repetition never starts."""
    image, env = fake
    big = tmp_path / "big.sif"
    subprocess.run(["truncate", "-s", "6G", str(big)], check=True)
    env = {**env, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # no digest from an earlier test
    argv = [*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--image", str(big),
            "-o", str(tmp_path / "rep"), "--repeat", "2", "--no-entrypoint", "--cmd", "--", "true"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not list((tmp_path / "rep").glob("*/plan.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # `true` has ended; the hash of 6 GB takes seconds
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    records = [p for p in (tmp_path / "rep").iterdir() if p.is_dir()]
    assert len(records) == 1
    assert json.loads((records[0] / "status.json").read_text())["state"] == "completed"
    assert f"error: interrupted; the run had completed and its record is complete: {records[0]}" in err
