"""Flux (issue 31 item 3): the flux backend's `flux run` token lists, `hpcai submit`'s `flux batch`
script for the LLNL-style site (golden), a site's flux_options, `--scheduler`, and submitting and
waiting. Flux is not in Debian and cannot be installed here, so `flux` is the STAND-IN of
tests/fixtures/flux/flux, which logs its arguments and answers as flux-core's manuals say
(flux-batch(1), flux-jobs(1)); real ranks through it: test_flux_launch_docker.py.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from plan_helpers import CRAY, FakeHost, check_golden, submit_secret_and_wait

from hpcai.errors import UsageError
from hpcai.run import flux_batch
from hpcai.run.backends import get_backend
from hpcai.run.backends.flux import argv
from hpcai.run.model import Geometry
from hpcai.run.plan import LaunchOptions, plan_launch
from hpcai.run.site import parse_site
from hpcai.run.submit import backend_for, batch_script

STANDIN = Path(__file__).parents[2] / "fixtures" / "flux"
G = Geometry(nodes=2, ntasks_per_node=4, cpus_per_task=24, gpus_per_node=4, cpu_bind="per-task",
             partition="pbatch", account="guests", time="1:00:00")


def test_flux_run_outside_an_allocation():
    assert argv(G) == ["flux", "run", "-N", "2", "-n", "8", "-c", "24", "-g", "1", "--exclusive", "-o", "exit-on-error",
                       "-o", "cpu-affinity=per-task", "--queue=pbatch", "--bank=guests", "--time-limit=3600s"]


def test_flux_run_inside_an_allocation_takes_its_queue_bank_and_time():
    got = argv(replace(G, in_allocation=True, mpi="pmix", nodelist="tuolumne[1001-1002]"))
    assert got[-4:] == ["cpu-affinity=per-task", "-o", "pmi=pmix", "--requires=host:tuolumne[1001-1002]"]
    assert not [t for t in got if t.startswith(("--queue", "--bank", "--time"))]


@pytest.mark.parametrize(("mpi", "pmi"), [("pmi2", "simple"), ("pmix", "pmix"), ("cray_shasta", "cray-pals"),
                                          ("none", "off")])
def test_each_mpi_type_names_a_flux_pmi_server(mpi, pmi):
    assert f"pmi={pmi}" in argv(replace(G, mpi=mpi))


def test_gpus_are_split_per_task():
    assert argv(replace(G, ntasks_per_node=1))[8:10] == ["-g", "4"]
    per_gpu = argv(replace(G, per_gpu=True))
    assert per_gpu[8:10] == ["-g", "1"] and "gpu-affinity=per-task" in per_gpu
    assert "-g" not in argv(replace(G, gpus_per_node=0))
    with pytest.raises(UsageError, match="4 GPUs per node do not split evenly between 3 ranks"):
        argv(replace(G, ntasks_per_node=3))
    with pytest.raises(UsageError, match="--mpi pspmix is Slurm's alone; under Flux one of: pmi2, pmix"):
        argv(replace(G, mpi="pspmix"))


def test_inside_flux_batch_is_an_allocation():
    # flux-environment(7): the initial program of `flux batch` has FLUX_URI, and no FLUX_JOB_ID
    opts = LaunchOptions(image="/p/IMG.sif", payload="sanity", nodes=2, site="llnl-elcap", output_dir="/p/r")
    login, batch = FakeHost(commands=("flux",)), FakeHost(env={"FLUX_URI": "local:///tmp/flux-a/local-0"},
                                                          commands=("flux",))
    assert plan_launch(opts, host=login, check=False).geometry.in_allocation is False
    plan = plan_launch(opts, host=batch, check=False)
    assert plan.geometry.in_allocation and plan.argv[:2] == ["flux", "run"] and "--queue=pbatch" not in plan.argv


def test_golden_flux_batch_script_for_el_capitan():
    opts = LaunchOptions(image="/p/lustre5/me/IMG.sif", payload="nccl-tests", payload_args=("min_bytes=1M",), nodes=2,
                         site="llnl-elcap", time="1:00:00", account="guests", output_dir="/p/lustre5/me/runs/r1",
                         env=("HF_TOKEN=hf_x", "A=1"))
    plan = plan_launch(opts, host=CRAY, check=False)
    text = batch_script(plan, opts, "/usr/bin/python3")
    check_golden("submit-llnl-elcap.flux", text)
    assert "hf_x" not in text
    lines = text.splitlines()
    # RFC 36: the directives are one group, right after the shebang
    assert [ln.startswith("# flux: ") for ln in lines[1:8]] == [True] * 7 and lines[8] == "#"
    assert "# flux: --time-limit=3600s" in lines and "# flux: --bank=guests" in lines
    assert "# flux: --output=/p/lustre5/me/runs/r1/flux-{{id}}.out" in lines
    last = shlex.split(lines[-1])
    assert last[:5] == ["exec", "/usr/bin/python3", "-m", "hpcai", "launch"] and "--site" in last


@pytest.mark.parametrize("option", ["-N 4", "-N4", "--nodes=4", "--exclusive", "-t 10m", "--time-limit=1h",
                                    "-q pdebug", "--queue=pdebug", "--bank=other", "-B other", "--job-name=x",
                                    "--output=/tmp/x", "--error=/tmp/y", "--requires=host:a1"])
def test_a_site_may_not_set_what_hpcai_sets(option):
    with pytest.raises(UsageError, match=r"t\.toml: flux_options .*hpcai sets"):
        parse_site("t", f'flux_options = ["{option}"]\n', "t.toml")


def test_other_flux_options_pass_quoted_word_by_word():
    site = parse_site("t", 'flux_options = ["--setattr=thp=always", "-o mpibind=off", "--env=A=#1"]\n', "t.toml")
    assert site.flux_options == ("--setattr=thp=always", "-o mpibind=off", "--env=A=#1")
    plan = plan_launch(LaunchOptions(image="/p/IMG.sif", payload="sanity", site="llnl-elcap", output_dir="/p/r"),
                       host=CRAY, check=False)
    text = flux_batch.script(plan, site, "exec true", lambda what, v: shlex.quote(v))
    assert "# flux: -o mpibind=off\n" in text and "# flux: '--env=A=#1'\n" in text  # `#` starts a comment there


def test_scheduler_picks_the_backend_and_refuses_another():
    assert [backend_for(s, None) for s in ("slurm", "pbs", "flux", None)] == ["srun", "mpiexec", "flux", None]
    assert backend_for(None, "local") == "local" and backend_for("flux", "flux") == "flux"
    with pytest.raises(UsageError, match="--scheduler 'lsf' is not one hpcai writes jobs for; one of: slurm, pbs, "
                                         "flux"):
        backend_for("lsf", None)
    with pytest.raises(UsageError, match="--scheduler pbs starts ranks with the mpiexec backend, not --backend srun"):
        backend_for("pbs", "srun")
    assert get_backend("flux").batch == "flux" and get_backend("flux").allocation_var == "FLUX_URI"


@pytest.fixture
def flux_tools(tmp_path, monkeypatch):
    log = tmp_path / "flux.log"
    monkeypatch.setenv("PATH", f"{STANDIN}:{os.environ['PATH']}")
    monkeypatch.setenv("FLUX_STANDIN_LOG", str(log))
    monkeypatch.delenv("FLUX_URI", raising=False)
    return log


def test_submit_flux_batches_and_waits_with_flux_jobs(hpcai, flux_tools, tmp_path, monkeypatch):
    monkeypatch.setenv("FLUX_STANDIN_STATE", "INACTIVE TIMEOUT")
    res, run = submit_secret_and_wait(hpcai, "llnl-elcap", tmp_path)
    assert res.stdout.strip() == "fStandIn1" and (run / "job_id").read_text() == "fStandIn1\n"
    calls = flux_tools.read_text().splitlines()
    # the secret reaches the job through the environment flux batch copies; ids in ASCII
    assert calls[:2] == [f"batch {run / 'submit.flux'}", "secret=s3cret ascii=1"]
    assert "jobs -n -o {state} {result} fStandIn1" in calls
    assert "s3cret" not in (run / "submit.flux").read_text()
    assert "job fStandIn1: the job ended without a final status (Flux says TIMEOUT)" in res.stderr


def test_flux_jobs_states(flux_tools, monkeypatch):
    for said, got in (("RUN", ("RUN", "")), ("SCHED", ("SCHED", "")), ("INACTIVE COMPLETED", ("INACTIVE", "COMPLETED"))):
        monkeypatch.setenv("FLUX_STANDIN_STATE", said)
        assert flux_batch.state("f1") == got
    monkeypatch.setenv("FLUX_STANDIN_STATE", "RUN")
    with pytest.raises(Exception, match="job f1 still run after 0 s"):
        flux_batch.wait("f1", 0, poll_s=0)
    monkeypatch.delenv("FLUX_STANDIN_STATE")
    assert flux_batch.state("f1") == ("INACTIVE", "")  # Flux no longer knows it: ended


def test_scheduler_option_writes_that_schedulers_script(hpcai, tmp_path):
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"")
    for scheduler, name, first in (("pbs", "submit.pbs", "#PBS -N hpcai-sanity"), ("flux", "submit.flux",
                                                                                  "# flux: --job-name=hpcai-sanity")):
        run = tmp_path / scheduler
        res = hpcai("submit", "--site", "generic-slurm", "--scheduler", scheduler, "--image", str(sif), "-o", str(run),
                    "--no-submit", "sanity")
        assert res.exit_code == 0, res.stderr
        text = (run / name).read_text()
        assert first in text and f"--backend {get_backend(scheduler).name if scheduler == 'flux' else 'mpiexec'}" in text
    res = hpcai("submit", "--site", "generic-slurm", "--scheduler", "flux", "--backend", "srun", "--image", str(sif),
                "--no-submit", "sanity")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "drop one of them" in res.stderr


def test_slurm_only_options_are_refused_for_flux(hpcai, tmp_path):
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"")
    for extra in (("--clusters", "a"), ("--rest", "http://127.0.0.1:6820")):
        res = hpcai("submit", "--site", "llnl-elcap", "--image", str(sif), "-o", str(tmp_path / "r"), *extra,
                    "--no-submit", "sanity")
        assert res.exit_code == 2 and "is Slurm's; this job goes to flux batch (the flux backend)" in res.stderr
        assert not (tmp_path / "r").exists()


def test_a_sweep_submits_one_flux_job_per_point_and_follows_each(hpcai, flux_tools, tmp_path, monkeypatch):
    monkeypatch.setenv("FLUX_STANDIN_STATE", "INACTIVE FAILED")
    sif, folder = tmp_path / "x.sif", tmp_path / "sw"
    sif.write_bytes(b"")
    res = hpcai("sweep", "sanity", "--nodes", "1,2", "--site", "llnl-elcap", "--userns", "--image", str(sif),
                "-o", str(folder), "--submit", "--wait", "--wait-timeout", "30")
    assert res.exit_code == 1, res.stderr  # the stand-in jobs never wrote a final status
    calls = flux_tools.read_text().splitlines()
    scripts = sorted(folder.glob("*/submit.flux"))
    assert len(scripts) == 2 and [c for c in calls if c.startswith("batch ")] == [f"batch {s}" for s in scripts]
    assert sum(c.startswith("jobs -n -o") for c in calls) == 2
    assert res.stderr.count("the job ended without a final status (Flux says FAILED)") == 2


def test_srun_options_are_refused_off_slurm(hpcai, tmp_path):
    for site in ("llnl-elcap", "alcf-polaris", "local"):
        res = hpcai("launch", "--site", site, "--image", str(tmp_path / "x.sif"), "--srun-arg=--exclusive", "--dry-run",
                    "sanity")
        assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "--srun-arg is for srun" in res.stderr, res.stderr
