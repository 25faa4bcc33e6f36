"""PBS Pro batch jobs (issue 31 item 3): `hpcai submit` on an mpiexec site writes a qsub script in
ALCF's Polaris shape, golden-tested; a site's pbs_options may not set what hpcai sets. PBS Pro
cannot be installed here (it is not in Debian), so qsub and qstat are STAND-IN scripts that log
their arguments and answer as PBS Pro 2022 does (an id, `qstat -x -F json -f`)."""

from __future__ import annotations

import json
import os
import shlex

import pytest
from plan_helpers import CRAY, check_golden, submit_secret_and_wait

from hpcai.errors import UsageError
from hpcai.run import pbs
from hpcai.run.plan import LaunchOptions, plan_launch
from hpcai.run.site import parse_site
from hpcai.run.submit import batch_script


def test_golden_pbs_script_for_polaris():
    opts = LaunchOptions(image="/eagle/proj/IMG.sif", payload="nccl-tests", payload_args=("min_bytes=1M",), nodes=2,
                         site="alcf-polaris", time="1:00:00", partition="debug", account="proj",
                         output_dir="/eagle/proj/runs/r1", env=("HF_TOKEN=hf_x", "A=1"))
    plan = plan_launch(opts, host=CRAY, check=False)
    text = batch_script(plan, opts, "/usr/bin/python3")
    check_golden("submit-alcf-polaris.pbs", text)
    assert "hf_x" not in text
    assert "#PBS -l select=2:system=polaris\n" in text and "#PBS -l walltime=01:00:00\n" in text
    assert "#PBS -l filesystems=home:eagle\n" in text  # one word each, as qsub splits a directive
    last = shlex.split(text.splitlines()[-1])
    assert last[:5] == ["exec", "/usr/bin/python3", "-m", "hpcai", "launch"] and "--site" in last


@pytest.mark.parametrize("option", ["-l select=4", "-lwalltime=1:00:00", "-l place=pack", "-q prod", "-A other",
                                    "-o /tmp/x", "-j oe", "-V", "-N name", "-qprod"])
def test_a_site_may_not_set_what_hpcai_sets(option):
    with pytest.raises(UsageError, match=r"t\.toml: pbs_options .*hpcai sets"):
        parse_site("t", f'pbs_options = ["{option}"]\n', "t.toml")


@pytest.mark.parametrize("option", ["-l filesystems=home:grand", "-l debug=true", "-m abe", "-r y"])
def test_other_pbs_options_pass(option):
    assert parse_site("t", f'pbs_options = ["{option}"]\n', "t.toml").pbs_options == (option,)


@pytest.fixture
def pbs_tools(tmp_path, monkeypatch):
    """Stand-in qsub (prints 4242.polaris-pbs-01) and qstat (job_state from $PBS_STATE; 'Unknown
    Job Id' when it is unset), each logging its arguments and the HPCAI_SECRET_* it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "pbs.log"
    qstat = ('[ -n "$PBS_STATE" ] || { echo "qstat: Unknown Job Id $5" >&2; exit 153; }\n'
             'printf \'{"Jobs": {"%s": {"job_state": "%s"}}}\\n\' "$5" "$PBS_STATE"')
    for name, body in (("qsub", 'echo "secret=$HPCAI_SECRET_ARG_1" >> ' + str(log) + '\necho 4242.polaris-pbs-01'),
                       ("qstat", qstat)):
        tool = bin_dir / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n{body}\n')
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


def test_submit_on_a_pbs_site_qsubs_and_waits_with_qstat(hpcai, pbs_tools, tmp_path, monkeypatch):
    monkeypatch.setenv("PBS_STATE", "F")
    res, run = submit_secret_and_wait(hpcai, "alcf-polaris", tmp_path)
    assert res.stdout.strip() == "4242.polaris-pbs-01" and (run / "job_id").read_text() == "4242.polaris-pbs-01\n"
    calls = pbs_tools.read_text().splitlines()
    assert calls[0] == f"qsub {run / 'submit.pbs'}" and calls[1] == "secret=s3cret"  # -V hands it to the job
    assert "qstat -x -F json -f 4242.polaris-pbs-01" in calls
    assert "s3cret" not in (run / "submit.pbs").read_text()
    assert "job 4242.polaris-pbs-01: the job ended without a final status" in res.stderr


def test_qstat_states(pbs_tools, monkeypatch):
    for state, done in (("Q", False), ("R", False), ("E", False), ("F", True), ("X", True)):
        monkeypatch.setenv("PBS_STATE", state)
        assert pbs.ended("1.server") is done, state
    monkeypatch.delenv("PBS_STATE")
    assert pbs.ended("1.server")  # PBS no longer knows it: ended


def test_slurm_only_options_and_a_local_site_are_one_line(hpcai, tmp_path):
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"")
    for extra, said in ((("--clusters", "a"), "--clusters is Slurm's; this job goes to qsub (the mpiexec backend)"),
                        (("--rest", "http://127.0.0.1:6820"), "--rest is Slurm's")):
        res = hpcai("submit", "--no-submit", "--site", "alcf-polaris", "--image", str(sif), *extra,
                    "-o", str(tmp_path / "r"), "--cmd", "--", "true")
        assert res.exit_code == 2 and said in res.stderr and res.stderr.count("\n") == 1, res.stderr
        assert not (tmp_path / "r").exists()
    assert json.loads(hpcai("launch", "--json", "--site", "alcf-polaris", "--image", str(sif), "-N", "2",
                            "-o", str(tmp_path / "j"), "--cmd", "--", "true").stdout)["argv"][0] == "mpiexec"
