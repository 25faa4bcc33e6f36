"""Export: CARAML-style CSV columns with provenance, JSON with every metric; show table; parse CLI."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from hpcai.results.export import COLUMNS

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def make_run(root: Path, name: str, payload: str, log: str, **plan_extra) -> Path:
    run = root / name
    (run / "logs").mkdir(parents=True)
    plan = {"payload": payload, "site": "jureca", "partition": "dc-gpu", "nodes": 2, "ntasks_per_node": 4,
            "gpus_per_node": 4, "payload_vars": {"batch_size": "8", "model": "gpt2", "block_size": "1024"},
            "image": "hpcai/pytorch-ngc:24.05", "image_digest": "sha256:abc", "job_id": "4242",
            "image_labels": {"hpcai.nccl": "2.21.5", "org.opencontainers.image.title": "x"},
            "hpcai_version": "0.1.0", "argv": ["srun", "python", "run_clm.py"], **plan_extra}
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "status.json").write_text(json.dumps({"state": "completed", "wall_s": 200.5}))
    (run / "logs" / "rank-0.out").write_text(log)
    return run


def test_csv_caraml_columns_and_provenance(tmp_path, hpcai):
    make_run(tmp_path, "r1", "hf-clm", (LOGS / "hf_torchrun_stderr.log").read_text())
    r = hpcai("results", "export", str(tmp_path), "--csv")
    assert r.exit_code == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert list(rows[0]) == COLUMNS
    row = rows[0]
    assert (row["JobID"], row["System"], row["Nodes"], row["Devices"], row["Tasks/Node"]) == \
        ("4242", "jureca:dc-gpu", "2", "8", "4")
    # the log's "Total train batch size … = 32" wins over batch_size × devices
    assert row["GlobalBatchSize"] == "32" and row["BatchSize/Device"] == "8"
    assert (row["Metric"], row["Value"], row["Unit"]) == ("samples_per_second", "147.57", "samples/s")
    # 6·N·D: 147.57 samples/s × 6 × 124,439,808 params × 1024 tokens / 8 GPUs
    assert float(row["Avg_TFLOPs/GPU"]) == pytest.approx(147.57 * 6 * 124439808 * 1024 / 8 / 1e12)
    assert row["ImageDigest"] == "sha256:abc" and row["HpcaiVersion"] == "0.1.0"
    assert json.loads(row["ComponentVersions"]) == {"hpcai.nccl": "2.21.5"}
    assert row["Runtime(s)"] == "200.5" and row["EnergyFile"] == ""


def test_energy_file_names_the_combined_table_as_caraml_does(tmp_path, hpcai):
    """CARAML's EnergyFile column names its combined_energy.csv; without one (an older record), the
    energy folder; without that, nothing."""
    with_table = make_run(tmp_path, "r1", "hf-clm", (LOGS / "hf_torchrun_stderr.log").read_text())
    folder_only = make_run(tmp_path, "r2", "hf-clm", (LOGS / "hf_torchrun_stderr.log").read_text())
    (with_table / "energy").mkdir()
    (with_table / "energy" / "combined_energy.csv").write_text(",nodename,rank,pynvml:0\n0,n1,0,1.5\n")
    (folder_only / "energy").mkdir()
    r = hpcai("results", "export", str(tmp_path), "--csv")
    assert r.exit_code == 0, r.stderr
    files = sorted(row["EnergyFile"] for row in csv.DictReader(io.StringIO(r.stdout)))
    assert files == sorted([str(with_table / "energy" / "combined_energy.csv"), str(folder_only / "energy")])


def test_json_export_has_formula_and_argv(tmp_path, hpcai):
    make_run(tmp_path, "r1", "hf-clm", (LOGS / "hf_torchrun_stderr.log").read_text())
    data = json.loads(hpcai("results", "export", str(tmp_path), "--json").stdout)
    tflops = next(m for m in data[0]["metrics"] if m["name"] == "tflops_per_gpu")
    assert "6" in tflops["formula"] and "n_params" in tflops["formula"]
    assert data[0]["argv"] == ["srun", "python", "run_clm.py"]


def test_export_needs_one_format_and_existing_runs(tmp_path, hpcai):
    make_run(tmp_path, "r1", "osu", (LOGS / "osu_allreduce_latency.txt").read_text())
    assert hpcai("results", "export", str(tmp_path)).exit_code == 2
    missing = hpcai("results", "export", str(tmp_path / "nope"), "--csv")
    assert missing.exit_code == 2 and "no such run record" in missing.stderr


def test_show_lists_runs_and_failed_parse(tmp_path, hpcai):
    make_run(tmp_path, "good", "osu", (LOGS / "osu_allreduce_latency.txt").read_text())
    make_run(tmp_path, "bad", "osu", "srun: error: nid001: task 0: Exited with exit code 1\n")
    r = hpcai("results", "show", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    assert "latency_8B" in r.stdout and "2×4" in r.stdout and "no '# OSU" in r.stdout
    assert not (tmp_path / "bad" / "metrics.json").exists()  # reading never writes into a record
    from hpcai.results.runs import finalize

    assert finalize(tmp_path / "bad") is None  # the launcher's end-of-run step records the failure
    metrics = json.loads((tmp_path / "bad" / "metrics.json").read_text())
    assert metrics["metrics"] == [] and "osu: no" in metrics["error"]  # never zeros


def test_parse_cli_json_and_errors(tmp_path, hpcai):
    r = hpcai("results", "parse", "--payload", "nccl-tests", str(LOGS / "nccl_allreduce_2.21.log"), "--json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["metrics"][0] == {"name": "busbw_avg", "value": 61.2345, "unit": "GB/s", "better": "higher",
                                  "headline": True}
    assert "rows" not in data["details"] and data["tables"] == {"rows": 6}  # rows only with --rows
    wrong = hpcai("results", "parse", "-p", "osu", str(LOGS / "hvd_pytorch.log"))
    assert wrong.exit_code == 2 and wrong.stderr.startswith("error: osu: no") and wrong.stderr.count("\n") == 1
    (tmp_path / "empty.log").write_text("")
    empty = hpcai("results", "parse", "-p", "osu", str(tmp_path / "empty.log"))
    assert empty.exit_code == 2 and "log is empty" in empty.stderr
    unknown = hpcai("results", "parse", "-p", "bogus", str(tmp_path / "empty.log"))
    assert unknown.exit_code == 2 and "unknown parser 'bogus'; valid:" in unknown.stderr


def test_parse_cli_derives_tflops_from_given_facts(hpcai):
    r = hpcai("results", "parse", "-p", "hf-clm", str(LOGS / "hf_torchrun_stderr.log"), "--var", "seq_len=1024",
              "--gpus", "4", "--json")
    assert r.exit_code == 0, r.stderr
    tflops = next(m for m in json.loads(r.stdout)["metrics"] if m["name"] == "tflops_per_gpu")
    assert tflops["value"] == pytest.approx(147.57 * 6 * 124439808 * 1024 / 4 / 1e12)
    bad = hpcai("results", "parse", "-p", "hf-clm", str(LOGS / "hf_torchrun_stderr.log"), "--var", "seq_len")
    assert bad.exit_code == 2 and "NAME=VALUE" in bad.stderr


def test_per_gpu_copies_sum_throughputs_and_skip_hidden_records(tmp_path):
    from hpcai.results.runs import finalize
    from hpcai.results.loading import load_all

    run = make_run(tmp_path, "pg", "hvd-synthetic", "Img/sec per GPU: 100.0 +-1.0\nTotal img/sec on 1 GPU(s): 100.0 +-1.0\n",
                   per_gpu=True)
    (run / "logs" / "rank-1.out").write_text("Img/sec per GPU: 110.0 +-1.0\nTotal img/sec on 1 GPU(s): 110.0 +-1.0\n")
    (run / "logs" / "rank-1.exit").write_text("0\n")  # launcher bookkeeping, not a log
    (tmp_path / ".20261122-hidden-tmp").mkdir()  # a record still being written
    (tmp_path / ".20261122-hidden-tmp" / "plan.json").write_text("{}")
    result = finalize(run)
    assert result.headline.value == 210.0 and result.details["per_gpu_copies"] == 2
    assert result.get("img_per_sec_per_device").value == 210.0  # a rate: summed as well
    assert [r.path.name for r in load_all([tmp_path])] == ["pg"]


def test_caraml_columns_from_resolved_variables_and_software_version(tmp_path, hpcai):
    """Model/Dataset/BatchSize come from the values the run resolved (defaults, profiles), not only from
    explicit var=value; Version is the software's, not the image path (issue 11)."""
    make_run(tmp_path, "hf", "hf-clm", (LOGS / "hf_clm_hpcai.log").read_text(), payload_vars={},
             payload_values={"model": "gpt2-tiny", "dataset": "synthetic", "batch_size": "4", "steps": "5"},
             image_labels={"hpcai.component.framework": "torch==2.13.0", "hpcai.base": "debian:bookworm-slim"},
             cpus_per_task=7)
    make_run(tmp_path, "mg", "megatron", (LOGS / "megatron_caraml.log").read_text(),
             payload_vars={"seq_len": "2048", "tp": "2", "pp": "4", "model_size": "800M"},
             image_labels={"hpcai.base": "nvcr.io/nvidia/pytorch:26.03-py3"})
    rows = {r["RunDir"].rsplit("/", 1)[-1]: r for r in
            csv.DictReader(io.StringIO(hpcai("results", "export", str(tmp_path), "--csv").stdout))}
    hf, mg = rows["hf"], rows["mg"]
    assert (hf["Version"], hf["Model"], hf["Dataset"], hf["BatchSize/Device"], hf["Iterations"],
            hf["Threads/Task"]) == ("torch==2.13.0", "gpt2-tiny", "synthetic", "4", "5", "7")
    assert hf["GlobalBatchSize"] == "32"  # 4 per device × 8 devices
    assert (mg["Version"], mg["ModelSize"], mg["TensorParallel"], mg["PipelineParallel"], mg["DataParallel"]) == \
        ("pytorch 26.03-py3", "800M", "2", "4", "1")
    assert float(mg["Tokens/second"]) > 0 and float(mg["Time/iteration(s)"]) > 0 and mg["Iterations"]
