"""The local backend end to end with the real Apptainer: `hpcai launch --site local --runtime apptainer`.

Ranks run in a small real SIF of the Debian base (`debian_sif`, /bin/sh and coreutils, no python),
so every payload here is `--cmd -- sh -c …`. As root on these machines Apptainer runs only in
user-namespace mode (root's bounding set lacks CAP_SYS_RESOURCE: docs/development.md, "Apptainer
on the test machine"), so every launch passes `--userns`, and one test proves that a launch
without it is refused before anything starts. What the argv of a rank was is read from the run
record's plan.json; what reached a rank is read inside the container, from its log.

Under `--containall` a rank sees only what is bound, so the tests that leave marker files bind
their own folder (`--bind`). `--containall` also gives each rank its own PID namespace: ranks are
found on the host by a command line no other process has, not by the PID they see.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sifcache import cached_sif

pytestmark = [pytest.mark.apptainer, pytest.mark.docker]

BASE = os.environ.get("HPCAI_DEBIAN_BASE", "debian:bookworm-slim")  # as tests/infra/docker-up.sh


def apptainer_build(part: Path, source: str) -> None:
    """`apptainer build --fakeroot --force PART SOURCE`, its SquashFS uncompressed."""
    # --fakeroot: root cannot build a def here otherwise (its bounding set lacks a capability), and a
    # SIF converted as root keeps the base's /dev nodes, which a localimage build on it under
    # --fakeroot cannot unpack (tests/integration/test_pmi_apptainer.py builds on the Debian SIF).
    # Uncompressed: a build then takes seconds instead of a minute on 2 busy cores (170 MB, not 63).
    res = subprocess.run(["apptainer", "build", "--fakeroot", "--force", "--mksquashfs-args", "-noI -noD -noF -noX",
                          str(part), source], capture_output=True, text=True, timeout=600, check=False)
    if res.returncode != 0:
        pytest.fail(f"apptainer build {source} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")


def debian_sif_path() -> Path:
    """The Debian base from the local Docker engine as a SIF (docker-daemon, as `hpcai sif`
    converts), made once and cached by the Docker image's Id."""
    image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", BASE], capture_output=True,
                              text=True, check=True).stdout.strip()
    return cached_sif(f"debian-fakeroot-{image_id.removeprefix('sha256:')[:12]}.sif",
                      lambda part: apptainer_build(part, f"docker-daemon://{BASE}"))


@pytest.fixture(scope="session")
def debian_sif() -> Path:
    """debian_sif_path(), looked up once per session."""
    return debian_sif_path()


def run(hpcai_exe, image, run_dir, *args, bind: Path | None = None, **kw) -> subprocess.CompletedProcess:
    """`hpcai launch --site local --runtime apptainer --userns --image IMAGE -o RUN_DIR [--bind BIND] ARGS`."""
    return subprocess.run(launch_argv(hpcai_exe, image, run_dir, *args, bind=bind), capture_output=True, text=True,
                          timeout=120, **kw)


def launch_argv(hpcai_exe, image, run_dir, *args, bind: Path | None = None) -> list[str]:
    out = ["-o", str(run_dir)] if run_dir else []
    binds = ["--bind", str(bind)] if bind else []
    return [*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--userns", "--image", str(image),
            *out, *binds, *args]


def test_ranks_env_and_secret_kept_out_of_argv(hpcai_exe, debian_sif, tmp_path):
    run_dir = tmp_path / "r"
    res = run(hpcai_exe, debian_sif, run_dir, "--ntasks-per-node", "2", "--no-entrypoint",
              "--env", "DB_PASSWORD=pw123", "--env", "NCCL_SOCKET_IFNAME=hsn0,hsn1", "--cmd", "--",
              "sh", "-c", 'echo "$RANK/$WORLD_SIZE $NCCL_SOCKET_IFNAME $DB_PASSWORD $APPTAINER_CONTAINER"')
    assert res.returncode == 0, res.stderr
    for rank in (0, 1):  # inside the real container (Apptainer sets APPTAINER_CONTAINER to the image)
        assert (run_dir / "logs" / f"rank-{rank}.out").read_text() == f"{rank}/2 hsn0,hsn1 pw123 {debian_sif}\n"
    plan = json.loads((run_dir / "plan.json").read_text())
    argv = plan["argv"]
    exe = argv.index("apptainer")
    assert argv[exe:exe + 5] == ["apptainer", "exec", "--userns", "--containall", "--cleanenv"]
    assert argv[exe + 5] == str(debian_sif)
    # the environment reaches the ranks as APPTAINERENV_ (--cleanenv keeps it; commas are not split)
    assert "APPTAINERENV_NCCL_SOCKET_IFNAME=hsn0,hsn1" in argv[:exe] and "APPTAINERENV_RANK=0" in argv[:exe]
    assert not any("pw123" in a for a in argv)  # the secret travelled in the environment
    assert plan["env"]["DB_PASSWORD"] == "***" and plan["image_digest"].startswith("sha256:")
    assert "pw123" not in (run_dir / "plan.json").read_text() and "pw123" not in res.stderr


SHAPED_SECRETS = {"DATABASE_URL": "postgres://app:Pw0rd-db@db.example/prod", "SMTP_PASS": "smtp-pw-77",
                  "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=azk3y=="}


@pytest.mark.hostile
def test_secrets_by_name_and_shape_never_in_argv_files_or_output(hpcai_exe, debian_sif, tmp_path):
    """Issue 12: URL user-info, *_PASS, connection strings; --password V in --cmd. The values reach
    the ranks (through the environment, into the real container) and nothing hpcai writes or prints."""
    run_dir = tmp_path / "r"
    values = list(SHAPED_SECRETS.values())
    env_args = [a for k, v in SHAPED_SECRETS.items() for a in ("--env", f"{k}={v}")]
    res = run(hpcai_exe, debian_sif, run_dir, "--no-entrypoint", *env_args, "--cmd", "--",
              "sh", "-c", 'echo "$DATABASE_URL $SMTP_PASS $AZURE_STORAGE_CONNECTION_STRING $0 $1"',
              "--password", "cmd-pw-9")
    assert res.returncode == 0, res.stderr
    assert (run_dir / "logs" / "rank-0.out").read_text() == f"{' '.join(values)} --password cmd-pw-9\n"
    written = "".join(p.read_text() for p in run_dir.rglob("*.json"))
    for secret in [*values, "cmd-pw-9"]:  # (stdout is the command's own output: it echoes them)
        assert secret not in written and secret not in res.stderr
    plan = json.loads((run_dir / "plan.json").read_text())
    assert not any(v in a for a in plan["argv"] for v in values)
    assert plan["env"]["DATABASE_URL"] == "postgres://app:***@db.example/prod"
    assert plan["command"][-2:] == ["--password", "***"]
    assert "warning: --cmd passes a value after --password" in res.stderr
    # records are private to the user
    assert (run_dir.stat().st_mode & 0o777, (run_dir / "logs").stat().st_mode & 0o777) == (0o700, 0o700)
    assert (run_dir / "plan.json").stat().st_mode & 0o777 == 0o600


def ranks_running(marker: str) -> list[int]:
    """Host PIDs of the processes whose whole command line is MARKER (alive, not zombies)."""
    res = subprocess.run(["pgrep", "-x", "-f", marker], capture_output=True, text=True, check=False)
    pids = [int(p) for p in res.stdout.split()]
    return [p for p in pids if Path(f"/proc/{p}").exists()
            and "zombie" not in Path(f"/proc/{p}/status").read_text(errors="replace").lower()]


def start_ranks(hpcai_exe, image, run_dir: Path, ranks: int, script: str, marker: Path) -> subprocess.Popen:
    """A local launch of RANKS copies of `sh -c SCRIPT MARKER` (MARKER's folder bound), returned
    once each rank has written MARKER.<rank> (so a signal sent next reaches running ranks)."""
    argv = launch_argv(hpcai_exe, image, run_dir, "--ntasks-per-node", str(ranks), "--no-entrypoint", "--cmd", "--",
                       "sh", "-c", script, str(marker), bind=marker.parent)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(marker.parent.glob(f"{marker.name}.*"))) < ranks and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


def test_sigterm_ends_every_rank(hpcai_exe, debian_sif, tmp_path):
    run_dir = tmp_path / "r"
    sleeper = f"sleep 300.{os.getpid()}"  # a command line no other process has
    proc = start_ranks(hpcai_exe, debian_sif, run_dir, 3, f"echo up > $0.$RANK; exec {sleeper}", tmp_path / "up")
    deadline = time.monotonic() + 30
    while len(ranks_running(sleeper)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # each rank's shell has written its marker and is about to exec the sleep
    assert len(ranks_running(sleeper)) == 3, proc.stderr.read() if proc.poll() is not None else "not started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "cancelled" in err
    assert ranks_running(sleeper) == []
    assert json.loads((run_dir / "status.json").read_text())["state"] == "cancelled"


@pytest.mark.hostile
def test_rank_that_cannot_start_is_reported(hpcai_exe, debian_sif, tmp_path):
    res = run(hpcai_exe, debian_sif, tmp_path / "r", "--no-entrypoint", "--cmd", "--", "/no/such/binary")
    assert res.returncode == 1 and "rank 0 (exit code" in res.stderr
    assert "/no/such/binary" in (tmp_path / "r" / "logs" / "rank-0.err").read_text()  # Apptainer's own words


@pytest.mark.hostile
def test_a_launch_as_root_without_userns_is_refused_and_starts_nothing(hpcai_exe, debian_sif, tmp_path):
    """Root without --userns needs every capability in its bounding set, which these machines lack:
    exit 2 and one line naming --userns before any rank starts or any record is made."""
    from hpcai.run.runtimes.apptainer import root_caps_missing

    missing = root_caps_missing()
    argv = [*hpcai_exe, "launch", "--site", "local", "--runtime", "apptainer", "--image", str(debian_sif),
            "--bind", str(tmp_path), "--no-entrypoint", "--cmd", "--", "touch", str(tmp_path / "ran")]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    if not missing:  # a machine whose root has every capability: the check lets the launch through
        assert "--userns" not in res.stderr, res.stderr
        return
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        f"error: apptainer as root without --userns needs every capability, and this host's bounding set lacks "
        f"{', '.join(missing)}: run in user-namespace mode with --userns (or apptainer_userns = true in the site "
        "file)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no record (no runs/), and `touch` never ran


N_TOGETHER = 30  # the figure


@pytest.mark.hostile
def test_launches_started_together_never_share_a_record(hpcai_exe, debian_sif, tmp_path):
    """issue 12: 30 launches started at once from one folder made 17 records, some holding another
    run's plan. Each must get its own folder, the one it names, holding its own complete run."""
    work = tmp_path / "work"
    work.mkdir()
    procs = [subprocess.Popen(launch_argv(hpcai_exe, debian_sif, None, "--no-entrypoint", "--cmd", "--",
                                          "echo", f"run-{i}"),
                              cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
def test_two_runs_given_one_output_dir_at_once_never_share_it(hpcai_exe, debian_sif, tmp_path):
    run_dir = tmp_path / "shared"
    argv = launch_argv(hpcai_exe, debian_sif, run_dir, "--no-entrypoint", "--cmd", "--", "sleep", "1")
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
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
def test_full_disk_before_the_run_starts_nothing(hpcai_exe, debian_sif, tmp_path, small_disk):
    subprocess.run(["sh", "-c", FILL.format(mnt=small_disk)], check=False)
    res = run(hpcai_exe, debian_sif, small_disk / "r", "--no-entrypoint", "--cmd", "--",
              "touch", str(tmp_path / "ran"), bind=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        f"error: cannot write the run record in {small_disk / 'r'}: No space left on device; nothing was started"]
    assert not (tmp_path / "ran").exists() and sorted(p.name for p in small_disk.iterdir()) == ["fill"]


@pytest.mark.hostile
def test_disk_filled_by_the_run_still_gets_its_final_status(hpcai_exe, debian_sif, small_disk):
    run_dir = small_disk / "r"
    res = run(hpcai_exe, debian_sif, run_dir, "--no-entrypoint", "--cmd", "--",
              "sh", "-c", f"{FILL.format(mnt=small_disk)}; test -s {small_disk}/fill", bind=small_disk)
    assert res.returncode == 0, res.stderr
    assert (small_disk / "fill").stat().st_size > 0  # the rank, in its container, filled the disk
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    assert json.loads((run_dir / "plan.json").read_text())["image_digest"].startswith("sha256:")
    assert sorted(p.name for p in run_dir.iterdir()) == ["logs", "plan.json", "status.json"]  # no temp files


@pytest.mark.hostile
def test_record_that_cannot_be_finished_says_so_in_one_line(hpcai_exe, debian_sif, small_disk):
    """The run also takes the space set aside for its record: the final files cannot be written;
    the launch says which, in one line, exit 1, and leaves no temporary files."""
    run_dir = small_disk / "r"
    res = run(hpcai_exe, debian_sif, run_dir, "--no-entrypoint", "--cmd", "--",
              "sh", "-c", f"rm {run_dir}/.reserve; {FILL.format(mnt=small_disk)}", bind=small_disk)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        f"error: the run completed, but could not write status.json, plan.json in {run_dir}: "
        "No space left on device")
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.hostile
@pytest.mark.parametrize("signals", [1, 3])
def test_ctrl_c_once_or_thrice_ends_with_a_final_status(hpcai_exe, debian_sif, tmp_path, signals):
    run_dir = tmp_path / "r"
    proc = start_ranks(hpcai_exe, debian_sif, run_dir, 2, "trap '' INT; echo up > $0.$RANK; sleep 5",
                       tmp_path / "up")
    assert len(list(tmp_path.glob("up.*"))) == 2
    for _ in range(signals):  # the ranks ignore SIGINT: hpcai's SIGTERM to them is what ends them
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [
        f"error: cancelled by Ctrl-C (SIGINT); logs in {run_dir / 'logs'}"]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "cancelled"


@pytest.fixture
def few_inodes(tmp_path):
    """Room for data but only 8 inodes: the third rank's log cannot be made."""
    yield from _tmpfs(tmp_path / "inodes", "size=4m,nr_inodes=8")


@pytest.mark.hostile
def test_a_rank_log_that_cannot_be_made_leaves_no_rank_running(hpcai_exe, debian_sif, few_inodes):
    sleeper = f"sleep 31.{os.getpid()}"  # a command line no other process has
    res = run(hpcai_exe, debian_sif, few_inodes / "r", "--ntasks-per-node", "3", "--no-entrypoint",
              "--cmd", "--", "sh", "-c", sleeper)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "cannot start rank" in res.stderr and "No space left on device" in res.stderr
    assert json.loads((few_inodes / "r" / "status.json").read_text())["state"] == "failed"
    time.sleep(0.5)
    # neither the ranks' sleep nor their apptainer (whose argv holds it) outlived the launch
    assert subprocess.run(["pgrep", "-f", sleeper], capture_output=True).returncode == 1, "a rank was orphaned"


@pytest.mark.hostile
def test_stderr_on_a_full_device_leaves_no_record_running(hpcai_exe, debian_sif, tmp_path):
    """A plan warning written to a stderr on /dev/full: one failure, and no record saying running."""
    argv = launch_argv(hpcai_exe, debian_sif, tmp_path / "r", "--no-entrypoint", "--cmd", "--",
                       "true", "--password", "x")
    with open("/dev/full", "w") as full:
        res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=full, text=True, timeout=120)
    assert res.returncode == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.hostile
def test_ctrl_c_while_the_record_is_finished_stops_the_repeats(hpcai_exe, debian_sif, tmp_path):
    """The ranks are done, the image (6 GB, sparse: the Debian SIF with zeros after its end, which
    Apptainer runs as it is) is still being hashed: Ctrl-C there ends the launch with 130 after a
    complete record, and the second repetition never starts."""
    big = tmp_path / "big.sif"
    shutil.copyfile(debian_sif, big)
    subprocess.run(["truncate", "-s", "6G", str(big)], check=True)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # no digest from an earlier test
    argv = launch_argv(hpcai_exe, big, tmp_path / "rep", "--repeat", "2", "--no-entrypoint", "--cmd", "--",
                       "sh", "-c", f"echo ran >> {tmp_path}/ran", bind=tmp_path)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ran").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the rank has ended; the hash of 6 GB takes seconds
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert (tmp_path / "ran").read_text() == "ran\n"  # the rank ran in the real container, once
    records = [p for p in (tmp_path / "rep").iterdir() if p.is_dir()]
    assert len(records) == 1
    assert json.loads((records[0] / "status.json").read_text())["state"] == "completed"
    assert f"error: interrupted; the run had completed and its record is complete: {records[0]}" in err
