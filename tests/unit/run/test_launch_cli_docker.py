"""Real runs of `hpcai launch` on the local backend with the docker runtime (marker docker).

The image is the local `debian:bookworm-slim` (tests/infra/docker-up.sh) with --no-entrypoint and
--cmd, so each test costs a few container starts. The CLI runs as a subprocess so that exit codes
and signals are the real ones.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

pytestmark = pytest.mark.docker

IMAGE = "debian:bookworm-slim"


def containers(label: str) -> list[str]:
    res = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=hpcai.run={label}"],
                         capture_output=True, text=True, check=True)
    return res.stdout.split()


def launch(hpcai_exe, run, *args, timeout=120):
    argv = [*hpcai_exe, "launch", "--site", "local", "--runtime", "docker", "--image", IMAGE,
            "--no-entrypoint", "-o", str(run), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def test_rank_variables_and_record(hpcai_exe, tmp_path):
    run = tmp_path / "ranks"
    res = launch(hpcai_exe, run, "--ntasks-per-node", "3", "--env", "HF_TOKEN=hf_secret_value", "--cmd", "--",
                 "sh", "-c", 'echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $HF_TOKEN"')
    assert res.returncode == 0, res.stderr
    for rank in range(3):
        out = (run / "logs" / f"rank-{rank}.out").read_text().split()
        assert out == [str(rank), str(rank), "3", "3", "127.0.0.1", "hf_secret_value"]
    assert res.stdout.split()[:2] == ["0", "0"]  # rank 0's output is echoed
    plan = json.loads((run / "plan.json").read_text())
    status = json.loads((run / "status.json").read_text())
    assert plan["runtime"] == "docker" and plan["image_digest"].startswith("sha256:")
    assert status["state"] == "completed" and status["exit_code"] == 0 and status["wall_s"] > 0
    assert "hf_secret_value" not in (run / "plan.json").read_text()
    assert containers(run.name) == []


def test_failing_rank_ends_the_others_and_is_named(hpcai_exe, tmp_path):
    run = tmp_path / "fail"
    start = time.monotonic()
    res = launch(hpcai_exe, run, "--ntasks-per-node", "3", "--cmd", "--", "sh", "-c",
                 'if [ "$RANK" = 1 ]; then echo boom >&2; exit 3; fi; exec sleep 120')
    elapsed = time.monotonic() - start
    assert res.returncode == 1
    assert f"error: rank 1 (exit code 3) failed; log: {run}/logs/rank-1.err" in res.stderr
    assert elapsed < 60, elapsed  # the sleepers were stopped, not waited for
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed" and status["failed_ranks"] == [1] and status["exit_code"] == 3
    assert (run / "logs" / "rank-1.err").read_text().strip() == "boom"
    assert containers(run.name) == []


def test_ctrl_c_stops_every_rank_and_leaves_no_container(hpcai_exe, tmp_path):
    run = tmp_path / "cancel"
    argv = [*hpcai_exe, "launch", "--site", "local", "--runtime", "docker", "--image", IMAGE,
            "--no-entrypoint", "-o", str(run), "--ntasks-per-node", "2", "--cmd", "--", "sleep", "300"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while len(containers(run.name)) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(containers(run.name)) == 2, "containers did not start"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "cancelled" in err
    assert containers(run.name) == []
    assert json.loads((run / "status.json").read_text())["state"] == "cancelled"


def test_hostile_arguments_reach_the_container_unchanged(hpcai_exe, tmp_path):
    hostile = ["a b", "it's", 'say "hi"', "x; echo pwned", "$(id)", "`id`", "l1\nl2", "*"]
    run = tmp_path / "hostile"
    res = launch(hpcai_exe, run, "--env", "V=$(id);x", "--cmd", "--", "sh", "-c",
                 'for a in "$@"; do printf "<%s>" "$a"; done; printf "<%s>" "$V"', "sh", *hostile)
    assert res.returncode == 0, res.stderr
    text = (run / "logs" / "rank-0.out").read_text()
    assert text == "".join(f"<{a}>" for a in hostile) + "<$(id);x>"


def test_missing_image_fails_before_anything_starts(hpcai_exe, tmp_path):
    res = subprocess.run([*hpcai_exe, "launch", "--site", "local", "--image", "hpcai-no-such-image:0",
                          "-o", str(tmp_path / "r"), "sanity"], capture_output=True, text=True, check=False)
    assert res.returncode == 2
    assert "error: unknown docker image 'hpcai-no-such-image:0'; valid: " in res.stderr
    assert IMAGE in res.stderr and not (tmp_path / "r").exists()


@pytest.mark.hostile
def test_an_image_name_like_an_option_is_refused(hpcai_exe, tmp_path):
    """The image is asked about (from the raw command line, before anything is parsed) after `--`:
    `docker image inspect -- -H…` names an image, it never sets docker's options; then the launch
    refuses it (errors.operand), as every runtime does (tests/unit/cli/test_option_injection.py)."""
    res = subprocess.run([*hpcai_exe, "launch", "--site", "local", "--runtime", "docker", "--image=-Hunix:///x",
                          "-o", str(tmp_path / "r"), "sanity"], capture_output=True, text=True, check=False)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("error: --image '-Hunix:///x': starts with '-'")
    assert not (tmp_path / "r").exists()


def test_per_gpu_copies_are_worlds_of_one(hpcai_exe, tmp_path):
    """--per-gpu without GPUs here: the copies' variables are what matters (no --gpus flag)."""
    run = tmp_path / "pergpu"
    res = launch(hpcai_exe, run, "--gpus-per-node", "2", "--per-gpu", "--cmd", "--",
                 "sh", "-c", 'echo "$RANK $WORLD_SIZE $HPCAI_COPY $MASTER_PORT"')
    assert res.returncode == 0, res.stderr
    copies = [(run / "logs" / f"rank-{r}.out").read_text().split() for r in range(2)]
    assert [c[:3] for c in copies] == [["0", "1", "0"], ["0", "1", "1"]]
    assert int(copies[1][3]) == int(copies[0][3]) + 1  # own rendezvous port per copy
    assert json.loads((run / "plan.json").read_text())["per_gpu"] is True


def test_repeat_runs_n_records_and_names_the_failed_ones(hpcai_exe, tmp_path):
    """--repeat N (the Mila suite's repeated runs): N records in --output-dir, each its own run."""
    folder = tmp_path / "rep"
    res = launch(hpcai_exe, folder, "--repeat", "3", "--cmd", "--", "sh", "-c", "echo run $RANK")
    assert res.returncode == 0, res.stderr
    records = sorted(p for p in folder.iterdir() if (p / "plan.json").is_file())
    assert len(records) == 3 and res.stderr.count("repetition ") == 3
    for r in records:
        assert json.loads((r / "status.json").read_text())["state"] == "completed"
        assert (r / "logs" / "rank-0.out").read_text() == "run 0\n"
    bad = launch(hpcai_exe, tmp_path / "bad", "--repeat", "2", "--cmd", "--", "false")
    assert bad.returncode == 1
    assert "error: 2 of 2 repetitions failed: " in bad.stderr  # both ran, both named
    assert len([p for p in (tmp_path / "bad").iterdir() if (p / "status.json").is_file()]) == 2
    zero = launch(hpcai_exe, tmp_path / "zero", "--repeat", "0", "--cmd", "--", "true")
    assert zero.returncode == 2 and zero.stderr.strip() == "error: --repeat must be at least 1, got 0"


def test_done_file_is_written_last_with_the_final_state(hpcai_exe, tmp_path):
    """--done-file (JUBE's done_file): written once the record is final, whatever the outcome."""
    ok, bad = tmp_path / "ok", tmp_path / "bad"
    res = launch(hpcai_exe, ok, "--done-file", str(tmp_path / "ok.done"), "--cmd", "--", "true")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "ok.done").read_text() == "completed\n"
    assert json.loads((ok / "status.json").read_text())["state"] == "completed"
    assert (tmp_path / "ok.done").stat().st_mtime >= (ok / "status.json").stat().st_mtime
    res = launch(hpcai_exe, bad, "--done-file", str(tmp_path / "bad.done"), "--cmd", "--", "false")
    assert res.returncode == 1 and (tmp_path / "bad.done").read_text() == "failed\n"
    # --repeat: once, by the last repetition, after its record is final
    res = launch(hpcai_exe, tmp_path / "rep", "--repeat", "2", "--done-file", str(tmp_path / "rep.done"),
                 "--cmd", "--", "true")
    assert res.returncode == 0, res.stderr
    last = max((tmp_path / "rep").iterdir(), key=lambda d: (d / "status.json").stat().st_mtime)
    assert (tmp_path / "rep.done").stat().st_mtime >= (last / "status.json").stat().st_mtime
    assert (tmp_path / "rep.done").read_text() == "completed\n"


def test_done_file_where_it_cannot_be_written_is_refused_before_anything_runs(hpcai_exe, tmp_path):
    (tmp_path / "target").write_text("x")
    (tmp_path / "link.done").symlink_to(tmp_path / "target")
    for name, why in (("no/such/folder/x.done", "does not exist"), ("link.done", "link")):
        run = tmp_path / f"r-{why.replace(' ', '-')}"
        res = launch(hpcai_exe, run, "--done-file", str(tmp_path / name), "--cmd", "--", "true")
        assert res.returncode == 2 and why in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not run.exists()
    assert (tmp_path / "target").read_text() == "x"
