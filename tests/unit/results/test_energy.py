"""Energy: jpwr CSV into Wh/W/J, the wrapper argv, the payload exit code kept, the no-power path.

No power source exists here: the "no power source" path runs for real; the measuring path uses a
stand-in `jpwr` script (a mock, like GPUs) that behaves as jpwr's CLI does: it runs the command
after `--`, drops its exit code, and writes `power.<host>.<pid>.csv` into --df-out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcai.results import energy
from hpcai.run import energy as wrapper
from hpcai.results.metrics import HIGHER, Metric, ParseResult

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

FAKE_JPWR = """#!/bin/sh
# stand-in for jpwr's CLI: --methods M... --df-out DIR --df-filetype csv -- cmd...
out=""
while [ "$1" != "--" ]; do
  if [ "$1" = "--df-out" ]; then out="$2"; fi
  shift
done
shift
"$@"
mkdir -p "$out"
printf ',timestamps,pynvml:0\\n0,10.0,50.0\\n1,12.0,150.0\\n' > "$out/power.$(hostname).$$.csv"
exit 0
"""


def test_power_csv_to_wh_and_average_watts(tmp_path):
    (tmp_path / "nid001").mkdir()
    (tmp_path / "nid001" / "power.nid001.42.csv").write_text((LOGS / "jpwr_power.csv").read_text())
    s = energy.summarize(tmp_path)
    # trapezoids: GPU0 100+150+200+150 = 600 J, GPU1 110+160+210+160 = 640 J over 4 s
    assert s["energy_wh"] == pytest.approx(1240 / 3600)
    assert s["avg_power_w"] == pytest.approx(310.0) and s["seconds"] == pytest.approx(4.0)
    assert s["files"]["nid001/power.nid001.42.csv"]["devices"] == ["pynvml:0", "pynvml:1"]


def test_gh200_module_power_not_added_to_gpu_power(tmp_path):
    (tmp_path / "power.csv").write_text(",timestamps,pynvml:0,gh:Module0\n0,0,100,300\n1,1,100,300\n")
    assert energy.summarize(tmp_path)["avg_power_w"] == pytest.approx(300.0)


def test_joules_per_sample_added_to_result(tmp_path):
    (tmp_path / "power.csv").write_text((LOGS / "jpwr_power.csv").read_text())
    result = ParseResult("hf-trainer", [Metric("train_samples_per_second", 31.0, "samples/s", HIGHER, True)])
    energy.add_to_result(tmp_path, result)
    assert result.get("energy_wh").value == pytest.approx(1240 / 3600)
    assert result.get("joules_per_sample").value == pytest.approx(310.0 / 31.0)
    assert result.get("joules_per_sample").unit == "J/sample"


def test_no_energy_dir_adds_nothing(tmp_path):
    result = ParseResult("osu", [Metric("latency_8B", 2.0, "us", "lower", True)])
    energy.add_to_result(tmp_path / "energy", result)
    assert [m.name for m in result.metrics] == ["latency_8B"]


def test_wrap_argv_shape():
    argv = wrapper.wrap_argv(["srun", "x", "--flag"], "/runs/r1/energy", ["pynvml"])
    assert argv[:3] == [sys.executable, "-m", "hpcai.run.energy"]
    assert argv[3:7] == ["--dir", "/runs/r1/energy", "--methods", "pynvml"]
    assert argv[7:] == ["--", "srun", "x", "--flag"]
    assert "auto" in wrapper.wrap_argv(["a"], "/e")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_LOCALID", "LOCAL_RANK",
                                                          "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")}
    return {**env, **extra}


@pytest.mark.skipif(bool(wrapper.detect_power_source()), reason="this machine has a power source")
def test_no_power_source_says_so_and_keeps_exit_code(tmp_path):
    methods, reason = wrapper.preflight()
    assert methods == [] and "no power source" in reason and "the run continues" in reason
    argv = wrapper.wrap_argv([sys.executable, "-c", "print('payload ran'); raise SystemExit(3)"], str(tmp_path))
    res = subprocess.run(argv, capture_output=True, text=True, env=_env(SLURM_LOCALID="0"))
    assert res.returncode == 3 and "payload ran" in res.stdout and "not measuring" in res.stderr
    (exit_file,) = tmp_path.glob("exit-code-*.txt")
    assert exit_file.read_text().strip() == "3"


def test_other_local_ranks_just_run_the_payload(tmp_path):
    argv = wrapper.wrap_argv([sys.executable, "-c", "raise SystemExit(5)"], str(tmp_path), ["pynvml"])
    res = subprocess.run(argv, capture_output=True, text=True, env=_env(SLURM_LOCALID="1"))
    assert res.returncode == 5 and not list(tmp_path.glob("exit-code-*"))


@pytest.mark.skipif(bool(wrapper.detect_power_source()), reason="this machine has a power source")
def test_one_measurer_per_node_without_local_rank_variable(tmp_path):
    argv = wrapper.wrap_argv([sys.executable, "-c", "pass"], str(tmp_path))
    first = subprocess.run(argv, capture_output=True, text=True, env=_env())
    second = subprocess.run(argv, capture_output=True, text=True, env=_env())
    assert first.returncode == second.returncode == 0
    assert len(list(tmp_path.glob("exit-code-*.txt"))) == 1  # only the lock holder measured


def test_jpwr_path_recovers_payload_exit_code(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "jpwr").write_text(FAKE_JPWR)
    (bin_dir / "jpwr").chmod(0o755)
    edir = tmp_path / "energy"
    argv = wrapper.wrap_argv([sys.executable, "-c", "raise SystemExit(7)"], str(edir), ["pynvml"])
    res = subprocess.run(argv, capture_output=True, text=True,
                         env=_env(SLURM_LOCALID="0", PATH=f"{bin_dir}:{os.environ['PATH']}"))
    assert res.returncode == 7, res.stderr  # jpwr itself exited 0
    s = energy.summarize(edir)
    assert s["energy_wh"] == pytest.approx(200 / 3600) and s["avg_power_w"] == pytest.approx(100.0)


def test_finalize_adds_energy_to_run_metrics(tmp_path):
    import json

    from hpcai.results.runs import finalize

    (tmp_path / "logs").mkdir()
    (tmp_path / "plan.json").write_text(json.dumps({"payload": "hvd-synthetic", "nodes": 1}))
    (tmp_path / "logs" / "rank-0.out").write_text("Total img/sec on 4 GPU(s): 310.0 +-1.0\n")
    (tmp_path / "energy" / "nid001").mkdir(parents=True)
    (tmp_path / "energy" / "nid001" / "power.nid001.1.csv").write_text((LOGS / "jpwr_power.csv").read_text())
    result = finalize(tmp_path)
    assert result.get("joules_per_img").value == pytest.approx(1.0)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert {m["name"] for m in saved["metrics"]} >= {"energy_wh", "avg_power_w", "joules_per_img"}


# issue 12: a malformed power CSV ended in a ValueError traceback after a successful run. Now the
# damaged file is named (line, column) and left out; the run's metrics and the other nodes' stay.
DAMAGED_CSV = {
    "not a number": ",timestamps,pynvml:0\n0,10.0,50.0\n1,11.0,abc\n",
    "nan": ",timestamps,pynvml:0\n0,10.0,50.0\n1,nan,150.0\n",
    "inf": ",timestamps,pynvml:0\n0,10.0,inf\n1,11.0,150.0\n",
    "no timestamps": ",time,pynvml:0\n0,10.0,50.0\n",
    "empty": "",
    "not utf-8": b",timestamps,pynvml:0\n0,10.0,\xff\xfe\n",
    "nul byte": ",timestamps,pynvml:0\n0,10.0,5\x000\n",
}


@pytest.mark.hostile
@pytest.mark.parametrize("kind", DAMAGED_CSV)
def test_damaged_power_csv_is_named_and_skipped_the_run_keeps_its_metrics(tmp_path, kind):
    import json

    from hpcai.results.runs import finalize

    (tmp_path / "logs").mkdir()
    (tmp_path / "plan.json").write_text(json.dumps({"payload": "hvd-synthetic", "nodes": 2}))
    (tmp_path / "logs" / "rank-0.out").write_text("Total img/sec on 4 GPU(s): 310.0 +-1.0\n")
    for node in ("nid001", "nid002"):
        (tmp_path / "energy" / node).mkdir(parents=True)
    (tmp_path / "energy" / "nid001" / "power.nid001.1.csv").write_text((LOGS / "jpwr_power.csv").read_text())
    bad = tmp_path / "energy" / "nid002" / "power.nid002.1.csv"
    data = DAMAGED_CSV[kind]
    bad.write_bytes(data if isinstance(data, bytes) else data.encode())
    result = finalize(tmp_path)
    assert result.headline.value == pytest.approx(310.0)
    energy_details = result.details["energy"]
    assert list(energy_details["skipped"]) == ["nid002/power.nid002.1.csv"]
    assert energy_details["skipped"]["nid002/power.nid002.1.csv"].startswith("power.nid002.1.csv: ")
    assert list(energy_details["files"]) == ["nid001/power.nid001.1.csv"]  # the good node still counts


def test_every_power_csv_damaged_gives_no_energy_figure(tmp_path):
    (tmp_path / "power.csv").write_text(",timestamps,pynvml:0\n0,10.0,x\n")
    result = ParseResult("hf-trainer", [Metric("train_samples_per_second", 31.0, "samples/s", HIGHER, True)])
    energy.add_to_result(tmp_path, result)
    assert result.get("energy_wh") is None and "line 2, column 'pynvml:0'" in str(result.details["energy"])
