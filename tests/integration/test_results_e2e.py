"""End to end: runs -> records -> `results show/export/compare/plot` -> a PNG whose Figure has
the expected number of series.

`test_slurm_sweep_to_plot` runs the mpi-allreduce payload for real on the Slurm test cluster
(tests/infra/slurm-up.sh) through `hpcai sweep` (1 and 2 nodes), with the CPU image from the
build engineer's `pytorch_cpu_image` fixture. `test_hand_built_records_from_real_logs` needs no
engine: its records are built by hand (clearly: no launcher ran) around the real captured logs
in tests/fixtures/samples, so the results pipeline is covered on every machine.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

PASSING = """
[references."mpi-allreduce"]
"*" = { busbw_max_size = [1.0, -0.99, 1.0e6, "MB/s"], latency_min_size = [1.0e4, -1.0, 0.0, "us"] }
"""
FAILING = """
[references."mpi-allreduce"]
"*" = { busbw_max_size = [1.0e12, -0.1, 0.1, "MB/s"] }
"""


def _figure_series(paths: list[str], kind: str = "auto") -> int:
    from hpcai.results import plot
    from hpcai.results.loading import load_all

    return plot.series_count(plot.auto(load_all([Path(p) for p in paths]), kind))


@pytest.mark.slurm
@pytest.mark.docker
@pytest.mark.timeout(900)
def test_slurm_sweep_to_plot(tmp_path, hpcai_exe, pytorch_cpu_image):
    image = pytorch_cpu_image
    sweep_dir = tmp_path / "sweep"
    run = subprocess.run([*hpcai_exe, "sweep", "--nodes", "1,2", "--ntasks-per-node", "1",
                          "--site", "generic-slurm", "--runtime", "docker", "--mpi", "pmix", "--image", image,
                          "--var", "max_bytes=65536", "--var", "iters=5", "--var", "warmup=1",
                          "-o", str(sweep_dir), "mpi-allreduce"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    records = json.loads((sweep_dir / "sweep.json").read_text())["runs"]
    assert [r["nodes"] for r in records] == [1, 2]
    for r in records:
        metrics = json.loads((Path(r["run_dir"]) / "metrics.json").read_text())
        assert metrics.get("error") is None, metrics
        head = next(m for m in metrics["metrics"] if m["headline"])
        assert head["name"] == "busbw_max_size" and head["value"] > 0 and head["unit"] == "MB/s"

    show = subprocess.run([*hpcai_exe, "results", "show", str(sweep_dir)], capture_output=True, text=True)
    assert show.returncode == 0 and "busbw_max_size" in show.stdout and "scaling" in show.stdout

    export = subprocess.run([*hpcai_exe, "results", "export", "--csv", str(sweep_dir)], capture_output=True, text=True)
    rows = list(csv.DictReader(io.StringIO(export.stdout)))
    assert [r["Nodes"] for r in rows] == ["1", "2"] and all(r["Metric"] == "busbw_max_size" for r in rows)
    assert all(r["Image"] == image and r["HpcaiVersion"] for r in rows)

    (tmp_path / "ok.toml").write_text(PASSING)
    (tmp_path / "bad.toml").write_text(FAILING)
    base = [*hpcai_exe, "results", "compare", str(sweep_dir), "--min-runs", "1", "-b"]
    ok = subprocess.run([*base, str(tmp_path / "ok.toml"), "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert {r["verdict"] for r in json.loads(ok.stdout)["rows"]} == {"pass"}
    bad = subprocess.run([*base, str(tmp_path / "bad.toml")], capture_output=True, text=True)
    assert bad.returncode == 1 and "fail" in bad.stdout

    png = tmp_path / "busbw.png"
    plotted = subprocess.run([*hpcai_exe, "results", "plot", str(sweep_dir), "-o", str(png)],
                             capture_output=True, text=True)
    assert plotted.returncode == 0, plotted.stderr
    assert png.read_bytes()[:4] == b"\x89PNG" and "(2 series)" in plotted.stderr
    assert _figure_series([str(sweep_dir)]) == 2  # busbw vs size: one line per run
    assert _figure_series([str(sweep_dir)], "scaling") == 2  # throughput + efficiency


def _hand_built(root: Path, name: str, payload: str, log: Path, nodes: int = 1) -> Path:
    """A record as hpcai launch writes it, around a real captured log (no launcher ran)."""
    run = root / name
    (run / "logs").mkdir(parents=True)
    plan = {"payload": payload, "site": "hand-built", "partition": "sample", "nodes": nodes,
            "ntasks_per_node": 1, "gpus_per_node": 1, "payload_vars": {"model": "gpt2", "block_size": "1024"},
            "image": "nvcr.io/nvidia/pytorch:24.03-py3 (as logged)", "hpcai_version": "hand-built"}
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "status.json").write_text(json.dumps({"state": "completed"}))
    (run / "logs" / "rank-0.out").write_text(log.read_text())
    return run


def test_hand_built_records_from_real_logs(tmp_path, hpcai):
    runs = tmp_path / "runs"
    _hand_built(runs, "hf-1", "hf-clm", SAMPLES / "hf_run_clm.log")
    _hand_built(runs, "hf-2", "hf-clm", LOGS / "hf_torchrun_stderr.log")
    show = hpcai("results", "show", str(runs))
    # recorded under hf-clm's documented name (the HF log says train_samples_per_second)
    assert show.exit_code == 0 and show.stdout.count("samples_per_second") == 2
    assert "train_samples_per_second" not in show.stdout

    rows = list(csv.DictReader(io.StringIO(hpcai("results", "export", "--csv", str(runs)).stdout)))
    assert len(rows) == 2 and float(rows[0]["Value"]) == pytest.approx(39.2663, rel=1e-4)
    # 6·N·D with the log's own parameter count: 39.27 samples/s × 6 × 124,439,808 × 1024 / 1 GPU
    assert float(rows[0]["Avg_TFLOPs/GPU"]) == pytest.approx(39.26633 * 6 * 124439808 * 1024 / 1e12, rel=1e-4)

    (tmp_path / "b.toml").write_text('[references."hf-clm"]\n"*" = { samples_per_second = [40.0, -0.1, 0.1, "samples/s"] }\n')
    cmp = hpcai("results", "compare", str(runs / "hf-1"), "-b", str(tmp_path / "b.toml"), "--min-runs", "1", "--json")
    assert cmp.exit_code == 0 and json.loads(cmp.stdout)["rows"][0]["verdict"] == "pass"

    png = tmp_path / "bars.png"
    plotted = hpcai("results", "plot", str(runs), "-o", str(png))
    assert plotted.exit_code == 0 and png.stat().st_size > 1000
    assert _figure_series([str(runs)]) == 1  # one bar series, one bar per configuration


@pytest.mark.slurm
@pytest.mark.docker
def test_energy_wrapper_under_srun_keeps_exit_codes(tmp_path, hpcai_exe):
    """`launch --energy` on 2 nodes × 2 tasks: one wrapper measures per node (here: no power
    source, so it says so and runs unmeasured), and the payload's exit code survives the wrapper."""
    run_dir = tmp_path / "r1"
    script = 'echo rank $SLURM_PROCID; [ "$SLURM_PROCID" = 2 ] && exit 3; exit 0'
    res = subprocess.run([*hpcai_exe, "launch", "--site", "generic-slurm", "--runtime", "docker", "-N", "2",
                          "--ntasks-per-node", "2", "--energy", "--image", "debian:bookworm-slim", "--no-entrypoint",
                          "-o", str(run_dir), "--cmd", "--", "sh", "-c", script],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert status["failed_ranks"] == [2] and status["exit_code"] == 3
    codes = {p.name: p.read_text().strip() for p in (run_dir / "energy").glob("exit-code-*.txt")}
    assert len(codes) == 2 and sorted(codes.values()) == ["0", "3"]  # one measurer per node
    logs = "".join(p.read_text() for p in (run_dir / "logs").glob("rank-*.err"))
    assert logs.count("hpcai-energy: no power source or jpwr") == 2
