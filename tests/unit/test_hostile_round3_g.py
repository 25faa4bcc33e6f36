"""Hostile corpus, round three (issue 25), part G: what a new user trips on. Each test is a property
over the registry it guards: every payload names one headline in `results parse`, its record, export
and its runner; every count of an export row is a whole number and Iterations is what ran; every
shipped site × payload profile plans an srun line with each option once; every line `say` prints
shows control characters as escapes; a malformed `--env` never echoes its value; per-GPU ports stay
below 65536."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from hpcai import output
from hpcai.bench_runner import bench_runner
from hpcai.payloads import available_payloads, load_payload
from hpcai.results import export, loading, runs
from hpcai.run import site as sites
from hpcai.run.backends.srun import once
from hpcai.run.slurm_options import option_name

pytestmark = pytest.mark.hostile

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
# one real log per payload; a payload added without one fails test_every_payload_has_a_sample
SAMPLES = {"ddp-bench": "ddp_bench_hpcai.log", "hf-clm": "hf_clm_hpcai.log", "hvd-synthetic": "hvd_pytorch.log",
           "megatron-gpt": "megatron.log", "mila-suite": "mila_suite_cpu.log", "mila-training": "mila_training_cpu.log", "mpi-allreduce": "mpi_allreduce.log",
           "nccl-tests": "nccl_allreduce_2.21.log", "openclip": "openclip_stderr.log",
           "osu": "osu_allreduce_latency.txt", "rccl-tests": "rccl_allreduce.log", "sanity": "sanity_label.log",
           "tf-cnn-benchmarks": "tf_cnn_benchmarks_fork.log", "tf-resnet50": "tf_cnn.log"}


def record(root: Path, payload: str, log: str, **plan) -> Path:
    run = root / "run"
    (run / "logs").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"payload": payload, "nodes": 1, "ntasks_per_node": 1,
                                               "payload_vars": {}, **plan}))
    (run / "logs" / "rank-0.out").write_text(log)
    return run


def headlines(metrics: list[dict]) -> list[str]:
    return [m["name"] for m in metrics if m.get("headline")]


# --- 1. one headline name per payload, everywhere ----------------------------------------------

def test_every_payload_has_a_sample():
    assert sorted(SAMPLES) == available_payloads()


@pytest.mark.parametrize("payload", available_payloads())
def test_results_parse_the_record_export_and_runner_name_one_headline(payload, tmp_path, hpcai):
    """hf-clm was `train_samples_per_second` in `results parse` and `samples_per_second` in its
    record; megatron-gpt `tflops_per_gpu` and `tokens_per_second`; sanity `ranks_reporting` and
    `world_size`. The manifest's `headline = true` is the one definition."""
    log = LOGS / SAMPLES[payload]
    parsed = hpcai("results", "parse", str(log), "--payload", payload, "--json")
    assert parsed.exit_code == 0, parsed.stderr
    named = headlines(json.loads(parsed.stdout)["metrics"])
    run = record(tmp_path, payload, log.read_text(errors="replace"))
    assert runs.finalize(run) is not None
    recorded = headlines(json.loads((run / "metrics.json").read_text())["metrics"])
    exported = export.row(loading.load(run))["Metric"]
    found = {m["name"]: m["value"] for m in json.loads((run / "metrics.json").read_text())["metrics"]}
    runner = bench_runner().headline(load_payload(payload).raw, found)  # its HPCAI_RESULT line's rule
    assert named == recorded == [exported] == [runner], (named, recorded, exported, runner)
    assert exported in {m.name for m in load_payload(payload).metrics if m.headline}


@pytest.mark.parametrize("payload, old, new", [
    ("hf-clm", "train_samples_per_second", "samples_per_second"),
    ("megatron-gpt", "tflops_per_gpu", "tokens_per_second"),
])
def test_records_of_older_hpcai_read_with_todays_names(payload, old, new, tmp_path):
    """A metrics.json written before the names were one: its old headline and alias names read as
    today's (the manifest's `key` is the alias), in show, export and compare alike."""
    run = record(tmp_path, payload, "")
    metrics = [{"name": old, "value": 5.0, "unit": "x", "better": "higher", "headline": True},
               {"name": "tokens_per_second", "value": 7.0, "unit": "tokens/s", "better": "higher"}]
    if payload == "hf-clm":
        metrics.pop()
    (run / "metrics.json").write_text(json.dumps({"parser": "p", "metrics": metrics, "details": {}}))
    rec = loading.load(run)
    assert rec.result.headline.name == new and export.row(rec)["Metric"] == new
    assert [m.name for m in rec.result.metrics if m.headline] == [new]


def test_a_bare_parser_name_keeps_the_parsers_own_names(hpcai):
    """`--payload hf-trainer` reads any Trainer log, not hf-clm's: the parser's names stay."""
    r = hpcai("results", "parse", str(LOGS / "hf_clm_hpcai.log"), "--payload", "hf-trainer", "--json")
    assert r.exit_code == 0 and headlines(json.loads(r.stdout)["metrics"]) == ["train_samples_per_second"]


# --- 2. export: iterations that ran, counts as whole numbers ------------------------------------

HF_EPOCHS = (LOGS / "hf_clm_hpcai.log").read_text().replace("'epoch': 1.0,", "'epoch': 3.0, 'train_steps': 30.0,")
COUNTS = ("Nodes", "Devices", "Tasks/Node", "Threads/Task", "GlobalBatchSize", "BatchSize/Device",
          "PipelineParallel", "TensorParallel", "DataParallel", "Iterations")


def csv_row(run: Path) -> dict[str, str]:
    return next(csv.DictReader(io.StringIO(export.to_csv([loading.load(run)]))))


@pytest.mark.parametrize("log, iterations", [
    (HF_EPOCHS, "30"),  # the run's own count (hf-clm prints the Trainer's global_step)
    ((LOGS / "hf_clm_hpcai.log").read_text(), "5"),  # runtime 12.5 s × 0.4 steps/s
])
def test_hf_clm_with_epochs_exports_the_steps_that_ran(log, iterations, tmp_path):
    """epochs=3 left `steps` at its unused default 50, which the export showed as Iterations."""
    run = record(tmp_path, "hf-clm", log, gpus_per_node=2,
                 payload_values={"steps": "50", "epochs": "3.0", "batch_size": "2"})
    runs.finalize(run)
    assert csv_row(run)["Iterations"] == iterations


@pytest.mark.parametrize("line, steps", [
    # an infinite count is none: runtime × steps/s then
    ("{'train_runtime': 10.0, 'train_samples_per_second': 1.0, 'train_steps': 1e999, 'train_steps_per_second': 0.5}", 5),
    ("{'train_runtime': 1e200, 'train_samples_per_second': 1.0, 'train_steps_per_second': 1e200}", None),
    ("{'train_runtime': 10.0, 'train_samples_per_second': 1.0, 'train_steps_per_second': 1e999}", None),
    ("{'train_runtime': 10.0, 'train_samples_per_second': 1.0, 'train_steps_per_second': 'nan'}", None),
    ("Total optimization steps = " + "9" * 5000 + "\n{'train_runtime': 2.0, 'train_samples_per_second': 1.0}", None),
    ("Total optimization steps = 1,200\n{'train_runtime': 2.0, 'train_samples_per_second': 1.0}", 1200),
])
def test_the_steps_that_ran_are_a_count_or_nothing(line, steps):
    from hpcai.results.parsers import parse_text

    assert parse_text("hf-trainer", line + "\n").details.get("train_steps") == steps


def test_an_older_epochs_record_shows_no_iterations_rather_than_the_steps_default(tmp_path):
    run = record(tmp_path, "hf-clm", "", payload_values={"steps": "50", "epochs": "3.0"})
    (run / "metrics.json").write_text(json.dumps({"parser": "hf-trainer", "details": {}, "metrics": [
        {"name": "samples_per_second", "value": 1.0, "unit": "samples/s", "headline": True}]}))
    assert csv_row(run)["Iterations"] == ""


def test_every_count_column_is_a_whole_number(tmp_path):
    """JSON records and parsers hold 4.0; a CSV reader then sees GBS `4.0`."""
    run = record(tmp_path, "megatron-gpt", "", nodes=1, ntasks_per_node=4, gpus_per_node=4, cpus_per_task=8,
                 payload_values={"micro_batch_size": "1.0", "tp": "2.0", "pp": "1", "train_iters": "20.0"})
    (run / "metrics.json").write_text(json.dumps({"parser": "megatron", "metrics": [
        {"name": "tokens_per_second", "value": 10.0, "unit": "tokens/s", "headline": True}],
        "details": {"global_batch_size": 4.0, "dp": 2.0, "iterations": [{"iteration": 20.0}]}}))
    row = csv_row(run)
    assert [row[c] for c in COUNTS] == ["1", "4", "4", "8", "4", "1", "1", "2", "2", "20"]


# --- 3. each srun option once ------------------------------------------------------------------

SITES = sorted(p.stem for p in Path(sites.__file__).parent.joinpath("sites").glob("*.toml"))
PROFILES = [(name, prof) for name in available_payloads() for prof in load_payload(name).raw.get("launch", {})]


def srun_options(argv: list[str]) -> list[str]:
    """srun's own tokens: from `srun` up to the first word that is no option (the command)."""
    end = next(i for i, token in enumerate(argv[1:], 1) if not token.startswith("-"))
    return argv[1:end]


def test_the_shipped_data_holds_profiles_with_srun_options():
    assert SITES and ("hf-clm", "hpe") in PROFILES


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("payload, profile", PROFILES)
def test_no_srun_option_twice_for_any_site_and_profile(site, payload, profile, tmp_path, hpcai):
    """`--profile hpe` on a site with distribution = "*:block" wrote --distribution=*:block and
    --cpu-bind=socket twice; a user's --srun-arg of the same option makes a third source."""
    res = hpcai("launch", "--json", "--site", site, "--backend", "srun", "--image", "x.sif", "-o",
                str(tmp_path / "r"), "--profile", profile, "--srun-arg=-m*:cyclic", payload)
    assert res.exit_code == 0, res.stderr
    options = srun_options(json.loads(res.stdout)["argv"])
    names = [option_name(o) for o in options]
    assert len(names) == len(set(names)), options
    assert "-m*:cyclic" in options  # the user's, the last source, wins


@pytest.mark.parametrize("argv, expected", [
    (["srun", "--distribution=*:block", "--cpu-bind=socket", "--distribution=*:block"],
     ["srun", "--distribution=*:block", "--cpu-bind=socket"]),
    (["srun", "--distribution=block", "-m", "cyclic", "--distrib=plane"], ["srun", "--distrib=plane"]),
    (["srun", "--constraint", "gpu", "--exclusive", "--constraint=cpu"], ["srun", "--constraint=cpu", "--exclusive"]),
    (["srun", "-lN5", "-lN5", "--exclusive"], ["srun", "-lN5", "--exclusive"]),  # grouped letters: only exact repeats
])
def test_once_keeps_the_first_place_and_the_last_value(argv, expected):
    assert once(argv) == expected


# --- 4. terminal lines, --env echoes, per-GPU ports --------------------------------------------

CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0), 0x2028, 0x2029,
                              *range(0x202a, 0x202f), *range(0x2066, 0x206a))]


@pytest.mark.parametrize("say", [output.say, output.warn])
def test_every_line_say_prints_shows_control_characters(say, capsys):
    """A site file's or a record's text reached the terminal through say/warn as it was: ESC ran."""
    say("site x: " + "".join(f"<{c}>" for c in CONTROLS))
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1
    assert not any(c in err[:-1] for c in CONTROLS), [c for c in CONTROLS if c in err[:-1]]
    assert "<\\x1b>" in err and "<\\u202e>" in err


@pytest.mark.parametrize("item", ["HF TOKEN=hf_s3cr3t\n", "=hf_s3cr3t", "HF-TOKEN=hf_s3cr3t", "1X=hf_s3cr3t",
                                  "A;B=hf_s3cr3t", "HF_TOKEN\n=hf_s3cr3t"])
def test_a_malformed_env_item_never_echoes_its_value(item, tmp_path, hpcai):
    res = hpcai("launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--env", item, "sanity")
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "s3cr3t" not in res.stderr + res.stdout and "expected KEY=VALUE" in res.stderr


@pytest.mark.parametrize("base, ok", [(65528, True), (65529, False), (65535, False)])
def test_per_gpu_ports_stay_below_65536_locally(base, ok, tmp_path, hpcai):
    res = hpcai("launch", "--dry-run", "--site", "local", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--per-gpu", "--gpus-per-node", "8", "--env", f"MASTER_PORT={base}", "sanity")
    assert (res.exit_code == 0) == ok, res.stderr
    if not ok:
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
        assert "past 65535" in res.stderr and "at most 65528" in res.stderr


def test_per_gpu_ports_from_a_site_or_a_job_id_stay_below_65536(tmp_path, hpcai, site_path, monkeypatch):
    monkeypatch.setenv("HPCAI_SITE_PATH", site_path("high", 'backend = "srun"\nmaster_port = 65535\n'))
    res = hpcai("launch", "--dry-run", "--site", "high", "--image", "x.sif", "-o", str(tmp_path / "r"),
                "--per-gpu", "--gpus-per-node", "4", "sanity")
    assert res.exit_code == 2 and "site high: master_port is 65535" in res.stderr, res.stderr
    # A job-id port (enroot's rule: 61000 + 4535 = 65535) is moved down to fit, as the shim moves
    # it (61000 + id % (4536 - 3)): the plan and the ranks agree, nothing to refuse.
    monkeypatch.setenv("SLURM_JOB_ID", "4535")
    res = hpcai("launch", "--dry-run", "--json", "--site", "generic-slurm", "--image", "x.sif",
                "-o", str(tmp_path / "r2"), "--per-gpu", "--gpus-per-node", "4", "sanity")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["master_port"] == 61000 + 4535 % 4533 == 61002
