"""hpcai.run.rest without a server: Slurm's time limits in minutes, the address check, and the
job description (what it carries, what it refuses, the token kept out of the job's environment).
The requests themselves go to a real slurmrestd in tests/integration/test_rest_submit.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hpcai.errors import UsageError
from hpcai.run import rest, timelimits


@pytest.mark.parametrize("limit, minutes", [("30", 30), ("0:10:00", 10), ("1:30", 2), ("2-0", 2880),
                                            ("1-01:02:03", 1503), ("00:00:30", 1), ("90:00", 90)])
def test_slurm_time_limits_in_minutes(limit, minutes):
    assert timelimits.minutes(limit) == minutes


@pytest.mark.parametrize("bad", ["1h", "-5", "1:2:3:4", ""])
def test_a_time_slurm_would_not_take_is_one_line(bad):
    with pytest.raises(UsageError, match="not a time Slurm takes"):
        timelimits.minutes(bad)


@pytest.mark.parametrize("url", ["ftp://host:6820", "http://user:pw@host:6820", "http://host:6820/?a=1", "host:6820",
                                 "http://"])
def test_an_address_that_is_not_slurmrestds_is_refused(url):
    with pytest.raises(UsageError, match="--rest"):
        rest.check_url(url)


def test_pbs_walltime_is_hh_mm_ss():
    assert [timelimits.hms(t) for t in ("30", "1-02:03:04", "90:30")] == ["00:30:00", "26:03:04", "01:30:30"]


def test_a_good_address_is_kept_without_its_last_slash():
    assert rest.check_url("https://slurm.example.org:6820/") == "https://slurm.example.org:6820"


def plan(**geometry):
    g = dict(nodes=2, ntasks_per_node=4, cpus_per_task=8, gpus_per_node=4, partition="gpu", account="proj",
             time="0:30:00", nodelist="")
    g.update(geometry)
    return SimpleNamespace(payload="nccl-tests", run_dir="/runs/r1", geometry=SimpleNamespace(**g))


def test_the_description_carries_the_plan_and_keeps_the_token_out(monkeypatch):
    monkeypatch.setenv("SLURM_JWT", "eyJ.secret.token")
    monkeypatch.setenv("SLURM_JOB_ID", "99")  # an outer allocation's: not the new job's
    monkeypatch.setenv("MY_VAR", "kept")
    desc = rest.job_description(plan(), SimpleNamespace(clusters=""), (), {"HPCAI_SECRET_ARG_1": "s3cret"})
    assert (desc["nodes"], desc["tasks_per_node"], desc["cpus_per_task"], desc["gpus_per_node"]) == (2, 4, 8, "gpu:4")
    assert (desc["partition"], desc["account"], desc["time_limit"]) == ("gpu", "proj", 30)
    assert desc["standard_output"] == "/runs/r1/slurm-%j.out" and desc["name"] == "hpcai-nccl-tests"
    env = desc["environment"]
    assert env["MY_VAR"] == "kept" and env["HPCAI_SECRET_ARG_1"] == "s3cret"
    assert not any(k.startswith("SLURM_") for k in env) and "eyJ.secret.token" not in env.values()


@pytest.mark.parametrize("site, clusters, nodelist, said", [
    (("--qos=high",), "", "", "the site's sbatch_options (--qos=high)"),
    ((), "beta", "", "--clusters (beta)"),
    ((), "", "nid[001-002]", "--nodelist (nid[001-002])"),
])
def test_what_the_description_cannot_carry_is_refused(site, clusters, nodelist, said):
    with pytest.raises(UsageError, match="cannot go through slurmrestd") as refused:
        rest.job_description(plan(nodelist=nodelist), SimpleNamespace(clusters=clusters), site, {})
    assert said in str(refused.value)
