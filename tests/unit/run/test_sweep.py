"""Sweeps: points from --nodes/--var, the scaling table, and run_sweep over the launch API.

run_sweep is exercised here against a stand-in for `hpcai.run.launch` (the real launch runs in the
integration test on the Slurm cluster); the stand-in writes records the way the launcher does.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from hpcai.errors import UsageError
from hpcai.run import sweep
from hpcai.results.sweep import aggregate
from hpcai.results.loading import load_all


def test_points_nodes_fastest():
    pts = sweep.points([1, 2], {"batch_size": ["32", "64"]})
    assert [(p["nodes"], p["payload_vars"]["batch_size"]) for p in pts] == [
        (1, "32"), (2, "32"), (1, "64"), (2, "64")]
    assert sweep.points([4], {}) == [{"nodes": 4, "payload_vars": {}}]


@pytest.mark.parametrize("text", ["", "1,x", "0,2"])
def test_bad_nodes(text):
    with pytest.raises(UsageError, match="--nodes"):
        sweep.parse_nodes(text)


def test_bad_var():
    with pytest.raises(UsageError, match="NAME=V1,V2"):
        sweep.parse_vars(["batch_size"])


def fake_run_launch(opts) -> Path:
    """Stands in for hpcai.run.launch.run_launch (injected into run_sweep): a record as the launcher
    writes it, with a Horovod log whose throughput scales at 90 % per added node."""
    from hpcai import record

    run = record.new_run_dir(Path(opts.runs_root), f"{opts.payload}-n{opts.nodes}")
    (run / "logs").mkdir(parents=True)
    pvars = dict(a.split("=", 1) for a in opts.payload_args)
    (run / "plan.json").write_text(json.dumps({"payload": opts.payload, "nodes": opts.nodes, "ntasks_per_node": 1,
                                               "payload_vars": pvars, "image": opts.image, "site": "test"}))
    (run / "status.json").write_text(json.dumps({"state": "completed"}))
    total = 100.0 * opts.nodes * (0.9 if opts.nodes > 1 else 1.0) * int(pvars.get("batch_size", 1)) / 32
    (run / "logs" / "rank-0.out").write_text(f"Total img/sec on {opts.nodes} GPU(s): {total} +-1.0\n")
    return run


@pytest.fixture
def fake_launch(monkeypatch):
    """For the CLI: run_sweep's default launch function is hpcai.run.launch.run_launch."""
    from hpcai.run import launch

    monkeypatch.setattr(launch, "run_launch", lambda opts, check=True: fake_run_launch(opts))


def test_run_sweep_records_and_scaling_table(tmp_path):
    runs = sweep.run_sweep("hvd-synthetic", [1, 2, 4], {"batch_size": ["32", "64"]}, tmp_path / "sw",
                           {"image": "img:1", "partition": "debug"}, launch=fake_run_launch)
    assert len(runs) == 6 and all((r / "plan.json").is_file() for r in runs)
    listed = json.loads((tmp_path / "sw" / "sweep.json").read_text())["runs"]
    assert [r["nodes"] for r in listed] == [1, 2, 4, 1, 2, 4]
    table = aggregate(load_all([tmp_path / "sw"]))
    assert [(p.series, p.nodes) for p in table][:3] == [("hvd-synthetic batch_size=32", 1),
                                                        ("hvd-synthetic batch_size=32", 2),
                                                        ("hvd-synthetic batch_size=32", 4)]
    assert [p.efficiency for p in table[:3]] == pytest.approx([1.0, 0.9, 0.9])
    assert table[3].mean == pytest.approx(200.0)


def test_sweep_needs_image(tmp_path):
    with pytest.raises(UsageError, match="--image"):
        sweep.run_sweep("osu", [1], {}, tmp_path / "sw", {}, launch=fake_run_launch)


def test_cli_sweep_dry_run_and_show_scaling(tmp_path, hpcai, fake_launch):
    r = hpcai("sweep", "--nodes", "1,2", "--var", "batch_size=32,64", "--dry-run", "hvd-synthetic")
    assert r.exit_code == 0 and r.stdout.splitlines() == [
        "hvd-synthetic nodes=1 batch_size=32", "hvd-synthetic nodes=2 batch_size=32",
        "hvd-synthetic nodes=1 batch_size=64", "hvd-synthetic nodes=2 batch_size=64"]
    r = hpcai("sweep", "--nodes", "1,2", "--image", "img:1", "-o", str(tmp_path / "sw"), "hvd-synthetic")
    assert r.exit_code == 0, r.stderr
    show = hpcai("results", "show", str(tmp_path / "sw"))
    assert "scaling" in show.stdout and "0.90" in show.stdout
    bad = hpcai("sweep", "--nodes", "one", "osu")
    assert bad.exit_code == 2 and "--nodes must be" in bad.stderr


# `sweep --submit/--no-submit` goes through the real planner and `hpcai submit`'s own script writer
# (hpcai.run.submit.submit_plan); only sbatch itself is a stand-in here (the real one runs in
# tests/integration/test_sweep_submit.py).

def _exec_argv(script: Path) -> list[str]:
    last = script.read_text().splitlines()[-1]
    return shlex.split(last)


def test_cli_sweep_no_submit_writes_one_script_per_point(tmp_path, hpcai):
    hostile = "dbg'; echo pwned"  # a partition and a sweep folder the shell must not split
    sw = tmp_path / "s w'$x"
    r = hpcai("sweep", "--no-submit", "--nodes", "1,2", "--var", "min_bytes=8,16", "--site", "generic-slurm",
              "--runtime", "docker", "--partition", hostile, "--image", "img:1", "-o", str(sw), "mpi-allreduce")
    assert r.exit_code == 0, r.stderr
    runs = json.loads((sw / "sweep.json").read_text())["runs"]
    assert [(p["nodes"], p["payload_vars"]["min_bytes"], p["job_id"]) for p in runs] == [
        (1, "8", None), (2, "8", None), (1, "16", None), (2, "16", None)]
    assert r.stdout.splitlines() == [p["script"] for p in runs]  # like `hpcai submit --no-submit`
    assert len({p["run_dir"] for p in runs}) == 4
    for p in runs:
        script = Path(p["script"])
        assert script.parent == Path(p["run_dir"]) and script.parent.parent == sw
        text = script.read_text()
        assert f"#SBATCH --nodes={p['nodes']}\n" in text
        assert f"#SBATCH --partition={shlex.quote(hostile)}\n" in text
        assert f"#SBATCH --output={shlex.quote(p['run_dir'])}/slurm-%j.out\n" in text
        argv = _exec_argv(script)
        assert argv[:4] == ["exec", sys.executable, "-m", "hpcai"] and argv[4] == "launch"
        assert argv[argv.index("--output-dir") + 1] == p["run_dir"]
        assert argv[argv.index("--nodes") + 1] == str(p["nodes"])
        assert argv[argv.index("--partition") + 1] == hostile
        assert argv[-3:] == ["--", "mpi-allreduce", f"min_bytes={p['payload_vars']['min_bytes']}"]  # quoting survives
        assert not (script.parent / "plan.json").exists()  # the job writes the record, not the sweep
    with pytest.raises(UsageError, match="no run records"):  # nothing ran yet: nothing to aggregate
        load_all([sw])


def test_cli_sweep_submit_calls_sbatch_per_point(tmp_path, hpcai, monkeypatch):
    # Stand-in sbatch: logs its argv and answers like `sbatch --parsable`.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.log"
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\necho "$@" >> {log}\nwc -l < {log} | tr -d " "\n')
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    sif = tmp_path / "img.sif"  # apptainer only as text here: the plan needs the file, not the engine
    sif.write_bytes(b"")  # (--userns: as root here Apptainer runs only in that mode)
    r = hpcai("sweep", "--submit", "--nodes", "1,4", "--site", "generic-slurm", "--runtime", "apptainer",
              "--userns", "--image", str(sif), "-o", str(tmp_path / "sw"), "mpi-allreduce")
    assert r.exit_code == 0, r.stderr
    runs = json.loads((tmp_path / "sw" / "sweep.json").read_text())["runs"]
    assert r.stdout.split() == ["1", "2"] and [p["job_id"] for p in runs] == ["1", "2"]
    assert log.read_text().splitlines() == [f"--parsable {p['script']}" for p in runs]
    assert all((Path(p["run_dir"]) / "job_id").read_text() == p["job_id"] + "\n" for p in runs)
    assert all("--userns" in _exec_argv(Path(p["script"])) for p in runs)  # the mode reaches every job


def test_cli_sweep_submit_needs_slurm_site(tmp_path, hpcai):
    r = hpcai("sweep", "--no-submit", "--nodes", "1", "--site", "local", "--runtime", "docker",
              "--image", "img:1", "-o", str(tmp_path / "sw"), "mpi-allreduce")
    assert r.exit_code == 2 and "needs a Slurm, PBS Pro or Flux site" in r.stderr and "local backend" in r.stderr
    assert not (tmp_path / "sw").exists()  # no half-written series: the folder it made is gone


def test_cli_sweep_takes_the_launch_options_each_point_needs(tmp_path, hpcai, monkeypatch):
    """--account (or HPCAI_ACCOUNT), --time, --bind, --env, --gpus-per-node, --profile reach every point's job."""
    monkeypatch.setenv("HPCAI_ACCOUNT", "proj42")
    sw = tmp_path / "sw"
    r = hpcai("sweep", "--no-submit", "--nodes", "1,2", "--site", "generic-slurm", "--runtime", "docker",
              "--image", "img:1", "--time", "00:10:00", "--bind", "/scratch:/data", "--env", "FOO=bar",
              "--gpus-per-node", "2", "--profile", "quick", "-o", str(sw), "mpi-allreduce")
    assert r.exit_code == 0, r.stderr
    for p in json.loads((sw / "sweep.json").read_text())["runs"]:
        text = Path(p["script"]).read_text()
        assert "#SBATCH --account=proj42\n" in text and "#SBATCH --time=00:10:00\n" in text
        argv = _exec_argv(Path(p["script"]))
        for flag, value in (("--account", "proj42"), ("--time", "00:10:00"), ("--bind", "/scratch:/data"),
                            ("--env", "FOO=bar"), ("--gpus-per-node", "2"), ("--profile", "quick")):
            assert argv[argv.index(flag) + 1] == value, flag


def test_repeat_gives_every_point_n_records(tmp_path, hpcai):
    dry = hpcai("sweep", "--dry-run", "--nodes", "1,2", "--repeat", "2", "--image", "x", "sanity")
    assert dry.stdout.splitlines() == ["sanity nodes=1 repetition=1", "sanity nodes=1 repetition=2",
                                       "sanity nodes=2 repetition=1", "sanity nodes=2 repetition=2"]
    sw = tmp_path / "sw"
    r = hpcai("sweep", "--no-submit", "--nodes", "1,2", "--repeat", "2", "--site", "generic-slurm",
              "--image", "img.sif", "-o", str(sw), "sanity")
    assert r.exit_code == 0, r.stderr
    runs = json.loads((sw / "sweep.json").read_text())["runs"]
    assert [(p["nodes"], p["repetition"]) for p in runs] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert len({p["run_dir"] for p in runs}) == 4


def test_submit_repeat_writes_one_record_per_job(tmp_path, hpcai):
    r = hpcai("submit", "--no-submit", "--repeat", "3", "--site", "generic-slurm", "--image", "img.sif",
              "-o", str(tmp_path / "rep"), "sanity")
    assert r.exit_code == 0, r.stderr
    scripts = [Path(line) for line in r.stdout.splitlines()]
    assert len({s.parent for s in scripts}) == 3 and all(s.parent.parent == tmp_path / "rep" for s in scripts)
    for s in scripts:  # each job writes its own record
        argv = _exec_argv(s)
        assert argv[argv.index("--output-dir") + 1] == str(s.parent)


def test_sweep_submit_refuses_a_value_no_script_can_hold_before_writing_anything(tmp_path, hpcai):
    sw = tmp_path / "sw"
    r = hpcai("sweep", "--no-submit", "--nodes", "1,2", "--site", "generic-slurm", "--image", "img.sif",
              "--partition", "gpu\nid", "-o", str(sw), "sanity")
    assert r.exit_code == 2 and r.stderr.startswith("error: --partition 'gpu\\nid': control characters")
    assert not sw.exists()  # no reserved record folders, no sweep folder left behind


@pytest.mark.hostile
def test_a_sweep_folder_is_never_reused(tmp_path, hpcai_exe):
    """issue 12: re-using a sweep folder overwrote sweep.json. The second sweep into it is refused
    in one line and the first one's list of runs is kept byte for byte."""
    import subprocess

    argv = [*hpcai_exe, "sweep", "--no-submit", "--nodes", "1", "--site", "generic-slurm", "--image", "img.sif",
            "-o", str(tmp_path / "sw"), "sanity"]
    assert subprocess.run(argv, capture_output=True, text=True).returncode == 0
    before = (tmp_path / "sw" / "sweep.json").read_bytes()
    res = subprocess.run(argv, capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'sw'} already holds a sweep (sweep.json); a sweep never overwrites another: "
        "choose a new --output-dir"]
    assert (tmp_path / "sw" / "sweep.json").read_bytes() == before
    assert len([p for p in (tmp_path / "sw").iterdir() if p.is_dir()]) == 1  # no second point reserved


def test_default_sweep_folders_of_one_second_are_distinct(tmp_path):
    first = sweep.claim(tmp_path / "sweep-x", "osu", unique=True)
    second = sweep.claim(tmp_path / "sweep-x", "osu", unique=True)
    assert (first.name, second.name) == ("sweep-x", "sweep-x.2")
    assert json.loads((second / "sweep.json").read_text()) == {
        "payload": "osu", "created": json.loads((second / "sweep.json").read_text())["created"], "runs": []}


def test_time_to_solution_scales_strongly(tmp_path):
    """MMoCLIP's total_time_secs (lower is better) for one fixed epoch: efficiency is
    (T(n0)·n0) / (T(n)·n), and the plot's left panel says time to solution."""
    import json as _json

    from hpcai.results import plot
    from hpcai import record

    for nodes, secs in ((1, 100.0), (2, 55.0), (4, 30.0)):
        run = record.new_run_dir(tmp_path / "sw", f"openclip-n{nodes}")
        (run / "logs").mkdir(parents=True)
        (run / "plan.json").write_text(_json.dumps({"payload": "openclip", "nodes": nodes, "ntasks_per_node": 4,
                                                    "payload_vars": {}, "image": "i", "site": "test"}))
        (run / "status.json").write_text(_json.dumps({"state": "completed"}))
        (run / "metrics.json").write_text(_json.dumps({"parser": "openclip", "details": {}, "warnings": [], "metrics": [
            {"name": "total_time_secs", "value": secs, "unit": "s", "better": "lower", "headline": True}]}))
    table = aggregate(load_all([tmp_path / "sw"]))
    assert [(p.nodes, p.better) for p in table] == [(1, "lower"), (2, "lower"), (4, "lower")]
    assert [p.efficiency for p in table] == pytest.approx([1.0, 100 / 110, 100 / 120])
    fig = plot.scaling([("openclip", table)])
    assert [ax.get_title() for ax in fig.axes] == ["openclip: time to solution", "openclip: efficiency"]
    assert list(fig.axes[1].lines[0].get_ydata()) == pytest.approx([1.0, 100 / 110, 100 / 120])
