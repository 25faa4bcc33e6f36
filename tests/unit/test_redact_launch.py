"""Secrets never appear in dry-run output, plan.json, sbatch scripts or argv."""

from __future__ import annotations

import json

from hpcai.redact import REDACTED, redact_argv, redact_env


def test_redact_helpers():
    assert redact_env({"HF_TOKEN": "x", "MY_PASSWORD": "y", "PATH": "/bin"}) == {
        "HF_TOKEN": REDACTED, "MY_PASSWORD": REDACTED, "PATH": "/bin"}
    assert redact_argv(["-e", "API_KEY=abc", "--set-env=AWS_SECRET=1", "N=1"]) == [
        "-e", f"API_KEY={REDACTED}", f"--set-env=AWS_SECRET={REDACTED}", "N=1"]


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
