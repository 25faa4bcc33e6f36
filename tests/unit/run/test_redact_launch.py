"""Secrets never appear in dry-run output, plan.json, sbatch scripts or argv."""

from __future__ import annotations

import json

import pytest

from hpcai.redact import REDACTED, holds_secret, redact_argv, redact_env

pytestmark = pytest.mark.hostile  # issue 12's corpus


def test_redact_helpers():
    assert redact_env({"HF_TOKEN": "x", "MY_PASSWORD": "y", "PATH": "/bin"}) == {
        "HF_TOKEN": REDACTED, "MY_PASSWORD": REDACTED, "PATH": "/bin"}
    assert redact_argv(["-e", "API_KEY=abc", "--set-env=AWS_SECRET=1", "N=1"]) == [
        "-e", f"API_KEY={REDACTED}", f"--set-env=AWS_SECRET={REDACTED}", "N=1"]


def test_secrets_by_shape():
    assert redact_argv(["tool", "--password", "p1", "--api-key=k2", "--token", "t3", "--env", "X=1",
                        "https://u:pw@host/x"]) == [
        "tool", "--password", REDACTED, f"--api-key={REDACTED}", "--token", REDACTED, "--env", "X=1",
        f"https://u:{REDACTED}@host/x"]
    assert redact_env({"DATABASE_URL": "postgres://u:PW@h/db", "SMTP_PASS": "x",
                       "AZURE_STORAGE_CONNECTION_STRING": "a=1;AccountKey=abc;b=2", "URL": "https://h/x"}) == {
        "DATABASE_URL": f"postgres://u:{REDACTED}@h/db", "SMTP_PASS": REDACTED,
        "AZURE_STORAGE_CONNECTION_STRING": REDACTED, "URL": "https://h/x"}
    assert holds_secret("Server=x;Password=p;") and not holds_secret("https://example.org/a:b")


def test_dry_run_and_sbatch_hide_values_by_shape(hpcai, tmp_path):
    args = ["--site", "generic-slurm", "--image", "x.sif", "--env", "DATABASE_URL=postgres://u:PW9@h/db",
            "--env", "SMTP_PASS=smtp9", "--cmd", "--", "tool", "--password", "cmdpw9"]
    dry = hpcai("launch", "--dry-run", "-o", str(tmp_path / "r"), *args)
    assert dry.exit_code == 0, dry.stderr
    for secret in ("PW9", "smtp9", "cmdpw9"):
        assert secret not in dry.stdout + dry.stderr
    sub = hpcai("submit", "--no-submit", "-o", str(tmp_path / "s"), *args)
    assert sub.exit_code == 0, sub.stderr
    text = (tmp_path / "s" / "submit.sbatch").read_text()
    assert "PW9" not in text and "smtp9" not in text and "--env DATABASE_URL " in text
    assert "cmdpw9" not in text and '--password "${HPCAI_SECRET_ARG_1}"' in text
    # nothing dropped silently: the script takes them from the submitting environment, and says so
    assert "note: the script copies DATABASE_URL, HPCAI_SECRET_ARG_1, SMTP_PASS from the environment" in sub.stderr


def test_the_batch_script_rebuilds_a_secret_command_from_the_jobs_environment(hpcai, tmp_path):
    """issue 12: `submit --cmd -- tool --password V` wrote V in clear on the script's exec line.
    The line now reads each hidden token from HPCAI_SECRET_ARG_n, which sbatch passes to the job;
    run by bash with them set, it gives the command exactly as typed."""
    import os
    import subprocess
    import sys

    cmd = ["tool", "--password", "pw 1'$x", "--api-key=k3y", "postgres://u:pw2@h/db", "plain"]
    sub = hpcai("submit", "--no-submit", "--site", "generic-slurm", "--image", "x.sif",
                "-o", str(tmp_path / "s"), "--cmd", "--", *cmd)
    assert sub.exit_code == 0, sub.stderr
    script = (tmp_path / "s" / "submit.sbatch").read_text()
    assert not any(secret in script for secret in ("pw 1", "k3y", "pw2"))
    line = script.splitlines()[-1].replace(f"exec {sys.executable} -m hpcai launch", "printf '%s\\n'", 1)
    env = {**os.environ, "HPCAI_SECRET_ARG_1": "pw 1'$x", "HPCAI_SECRET_ARG_2": "--api-key=k3y",
           "HPCAI_SECRET_ARG_3": "postgres://u:pw2@h/db"}
    out = subprocess.run(["bash", "-c", "set -eu; " + line], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.splitlines()[-len(cmd):] == cmd
    unset = subprocess.run(["bash", "-c", "set -eu; " + line], capture_output=True, text=True,
                           env={k: v for k, v in env.items() if k != "HPCAI_SECRET_ARG_2"})
    assert unset.returncode != 0 and "HPCAI_SECRET_ARG_2: unbound variable" in unset.stderr  # never run without it


def test_sites_show_redacts_a_sites_token(hpcai, tmp_path, monkeypatch):
    (tmp_path / "tok.toml").write_text('backend = "local"\nruntime = "docker"\n[env]\nWANDB_API_KEY = "wk-123"\n'
                                       'PLAIN = "ok"\n')
    monkeypatch.setenv("HPCAI_SITE_PATH", str(tmp_path))
    for args in (["sites", "show", "tok"], ["sites", "show", "tok", "--json"]):
        res = hpcai(*args)
        assert res.exit_code == 0, res.stderr
        assert "wk-123" not in res.stdout and "ok" in res.stdout


def test_dry_run_json_and_record_hide_secret_values(hpcai, tmp_path):
    args = ["launch", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"),
            "--env", "HF_TOKEN=hf_abcdef", "--env", "WANDB_API_KEY=k123", "--env", "OK=visible"]
    dry = hpcai(*args, "--dry-run", "sanity")
    assert dry.exit_code == 0, dry.stderr
    assert "hf_abcdef" not in dry.stdout + dry.stderr and "k123" not in dry.stdout + dry.stderr
    assert "OK=visible" in dry.stdout
    as_json = hpcai(*args, "--json", "sanity")
    plan = json.loads(as_json.stdout)
    assert plan["env"]["HF_TOKEN"] == REDACTED and plan["env"]["OK"] == "visible"
    assert "hf_abcdef" not in as_json.stdout


def test_sbatch_script_holds_no_secret(hpcai, tmp_path):
    res = hpcai("submit", "--no-submit", "--site", "generic-slurm", "--image", "x.sif",
                "-o", str(tmp_path / "r"), "--env", "HF_TOKEN=hf_abcdef", "sanity")
    assert res.exit_code == 0, res.stderr
    text = (tmp_path / "r" / "submit.sbatch").read_text()
    assert "hf_abcdef" not in text and "--env HF_TOKEN " in text


@pytest.mark.parametrize("value", ["Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "ghp_0123456789abcdefghij0123456789abcdef",
                                   "https://user:pw@host/repo.git"])
def test_a_secret_shaped_cmd_value_is_hidden_and_warned_about(hpcai, tmp_path, value):
    """Its printed forms hide it; argv still carries it, which `ps` shows: one warning says so."""
    res = hpcai("launch", "--dry-run", "--site", "local", "--runtime", "docker", "--image", "img",
                "-o", str(tmp_path / "r"), "--no-entrypoint", "--cmd", "--", "curl", "-H", value)
    assert res.exit_code == 0, res.stderr
    assert value not in res.stdout + res.stderr
    assert res.stderr.count("shaped like a secret") == 1 and "--env NAME" in res.stderr
    plain = hpcai("launch", "--dry-run", "--site", "local", "--runtime", "docker", "--image", "img",
                  "-o", str(tmp_path / "p"), "--no-entrypoint", "--cmd", "--", "curl", "-H", "Accept: text/plain")
    assert plain.exit_code == 0 and "shaped like a secret" not in plain.stderr
