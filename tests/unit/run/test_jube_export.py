"""`hpcai sweep … --jube FILE.xml` (hpcai.run.jube): the file as JUBE's own parser reads it, and
hostile values that reach the step's command intact or are refused.

JUBE runs for real here (`jube run`, `jube result`; tests/infra/jube-up.sh installs 2.7.1), with a
stand-in for hpcai in the step, which records the arguments it was given: no Slurm, no image. The
run on the Slurm test cluster is tests/integration/test_jube.py.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hpcai.errors import UsageError
from hpcai.run import jube as hj

jubeio = pytest.importorskip("jube.jubeio", reason="JUBE is not installed (tests/infra/jube-up.sh)")

SLURM = ("--site", "generic-slurm", "--runtime", "apptainer")  # a SIF path: planned without any engine
HOSTILE = ["a'b\"c", "<x&y>", "$HOME", "$(touch pwned)", "`touch pwned2`", "a b;c|d", "$$x", "${x}", "a$'", "]]>",
           "--x", "\u00e9\u4e2d"]


def read_benchmark(path: Path):
    """JUBE's own reading of the file: its one benchmark."""
    benchmarks = jubeio.Parser(str(path)).benchmarks_from_xml()[0]
    assert len(benchmarks) == 1
    return next(iter(benchmarks.values()))


def params(bench) -> dict[str, tuple[list[str], str, bool]]:
    """{name: (values, type, exported)} of the points' parameterset, as JUBE holds them."""
    return {p.name: (p.value.split(p.separator), p.parameter_type, p.export)
            for p in bench.parametersets[hj.POINTS].all_parameters}


def test_file_shape_as_jube_reads_it(hpcai, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = hpcai("sweep", "--jube", "b.xml", "--nodes", "1,2,4", "--var", "iters=10,5", "--var", "warmup=1",
                "--repeat", "2", *SLURM, "--image", "imgs/x.sif", "--ntasks-per-node", "1", "--time", "5",
                "-o", "jube-runs", "mpi-allreduce")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == str(tmp_path / "b.xml")
    bench = read_benchmark(tmp_path / "b.xml")
    assert bench.name == "hpcai-mpi-allreduce"
    assert bench._outpath == str(tmp_path / "jube-runs")  # -o: where `jube run` puts its runs (no public getter)
    # the sweep's axes, in the order that makes JUBE's workpackages follow the sweep's points
    assert params(bench) == {"iters": (["10", "5"], "int", True), "warmup": (["1"], "int", True),
                             "nodes": (["1", "2", "4"], "int", True), "repetition": (["1", "2"], "int", False)}
    run, export = [op.do for op in bench.steps[hj.STEP].operations]
    hpcai_exe = f"{sys.executable} -m hpcai"  # this hpcai, by absolute path (pytest runs it in-process)
    assert run == (f"env -u iters -u warmup -u nodes {hpcai_exe} submit --image {tmp_path}/imgs/x.sif "
                   "--ntasks-per-node 1 --time 5 --site generic-slurm --runtime apptainer --nodes \"$$nodes\" "
                   '--output-dir record --done-file ready -- mpi-allreduce "iters=$$iters" "warmup=$$warmup"')
    # asynchronous, as CARAML's steps are: the export runs in `jube continue` once the job wrote `ready`
    assert [op.async_filename for op in bench.steps[hj.STEP].operations] == ["ready", None]
    assert export == f"{hpcai_exe} results export record --json --output hpcai-result.json"
    assert hj.TABLE in bench.results and "hpcai_result" in bench.patternsets
    text = (tmp_path / "b.xml").read_text()
    assert '<table name="hpcai" style="pretty" sort="iters,warmup,nodes,repetition">' in text
    assert '<pattern name="value" type="float">"Value": $jube_pat_fp</pattern>' in text


def test_a_non_slurm_site_launches(hpcai, tmp_path):
    res = hpcai("sweep", "--jube", str(tmp_path / "l.xml"), "--nodes", "1", "--site", "local", "--runtime",
                "apptainer", "--image", "/x.sif", "sanity")
    assert res.exit_code == 0, res.stderr
    run = read_benchmark(tmp_path / "l.xml").steps[hj.STEP].operations[0].do
    assert " launch --image /x.sif --site local " in run and "--wait" not in run and "--done-file" not in run
    res = hpcai("sweep", "--jube", str(tmp_path / "s.xml"), "--submit", "--nodes", "1", "--site", "local",
                "--runtime", "apptainer", "--image", "/x.sif", "sanity")
    assert res.exit_code == 2 and "needs a Slurm, PBS Pro or Flux site" in res.stderr and not (tmp_path / "s.xml").exists()


@pytest.mark.parametrize("extra, message", [
    (("--dry-run",), "runs nothing already"),
    (("--var", "model=a\nb"), "control characters"),
    (("--var", "model= a"), "JUBE strips spaces"),
    (("--env", "NOTE=a\rb"), "control characters"),
    (("--var", "model=a$"), "cannot be written for JUBE"),
    (("--srun-arg=--password=hunter2",), "secret"),
])
def test_refused_before_any_file(hpcai, tmp_path, extra, message):
    res = hpcai("sweep", "--jube", str(tmp_path / "b.xml"), "--nodes", "1", *SLURM, "--image", "/x.sif", *extra,
                "openclip")
    assert res.exit_code == 2 and message in res.stderr, res.stderr
    assert not (tmp_path / "b.xml").exists()


def test_a_yaml_name_is_refused(hpcai, tmp_path):
    res = hpcai("sweep", "--jube", str(tmp_path / "b.yaml"), "--nodes", "1", *SLURM, "--image", "/x.sif", "sanity")
    assert res.exit_code == 2 and "give a .xml file" in res.stderr


@pytest.mark.parametrize("name", ["Model", "nodes", "status", "jube_x", "a-b"])
def test_axis_names_jube_and_the_shell_take(name):
    with pytest.raises(UsageError, match="lower-case word"):
        hj.check_axes({name: ["1"]})


@pytest.mark.parametrize("value", ["a\nb", "a\tb", "\x1b[31m", "\udc80", "\uffff", "a$", "$ b", "$$"])
def test_text_refuses_what_one_line_of_xml_cannot_hold(value):
    with pytest.raises(UsageError):
        hj.text("--var x", value)


def test_a_secret_env_value_stays_out_of_the_file(hpcai, tmp_path):
    res = hpcai("sweep", "--jube", str(tmp_path / "b.xml"), "--nodes", "1", *SLURM, "--image", "/x.sif",
                "--env", "API_TOKEN=sekrit-value", "sanity")
    assert res.exit_code == 0, res.stderr
    text = (tmp_path / "b.xml").read_text()
    assert "sekrit-value" not in text and " --env API_TOKEN " in text  # copied from JUBE's environment


STUB = """#!{python}
# hpcai as the step sees it: records its arguments (and which axes leaked into its environment)
import json, os, sys
args = sys.argv[1:]
if args[0] == "results":
    argv = json.load(open("argv.json"))["argv"]
    nodes = int(argv[argv.index("--nodes") + 1])
    row = {{"JobID": "7", "Nodes": nodes, "Metric": "m", "Value": 1.25 * nodes, "Unit": "u/s", "Status": "completed"}}
    open("hpcai-result.json", "w").write(json.dumps([row], indent=2))
else:
    json.dump({{"argv": args, "leaked": [k for k in ("model", "nodes") if k in os.environ]}}, open("argv.json", "w"))
    if "--done-file" in args:  # the job's end, at once
        open(args[args.index("--done-file") + 1], "w").write("completed")
"""


def test_hostile_values_reach_hpcai_intact_through_jube(tmp_path):
    """XML, JUBE's `$` substitution and /bin/sh each read the file once: every value arrives as the
    one argument it was, and nothing in it runs."""
    base = {"image": "/x.sif", "site": "generic-slurm", "runtime": "apptainer", "env": ("NOTE=" + HOSTILE[0] + "$X",)}
    js = hj.make("openclip", [2], {"model": HOSTILE}, 1, base, None, False, None, None)
    stub = tmp_path / "hpcai-stub"
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(0o755)
    bench_file = tmp_path / "b.xml"
    hj.write(bench_file, replace(js, hpcai=(str(stub),)))
    jube_exe = [sys.executable, str(Path(sys.executable).parent / "jube")]
    run = subprocess.run([*jube_exe, "run", str(bench_file), "-o", str(tmp_path / "out")], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    cont = subprocess.run([*jube_exe, "continue", str(tmp_path / "out")], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # the done files are there: the exports run
    assert cont.returncode == 0, cont.stdout[-3000:] + cont.stderr[-3000:]
    got = {}
    for f in (tmp_path / "out").glob("000000/*_run/work/argv.json"):
        seen = json.loads(f.read_text())
        argv = seen["argv"]
        assert seen["leaked"] == []  # env -u: the axes stay out of the job's environment
        assert argv[argv.index("--env") + 1] == "NOTE=" + HOSTILE[0] + "$X"
        got[(int(argv[argv.index("--nodes") + 1]), argv[-1])] = argv[:2]
    assert sorted(got) == sorted((2, f"model={v}") for v in HOSTILE)
    assert set(map(tuple, got.values())) == {("submit", "--image")}
    assert not list(tmp_path.rglob("pwned*"))

    res = subprocess.run([*jube_exe, "result", "-a", "-s", "csv", str(tmp_path / "out")], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout.strip())))
    assert sorted((r["model"], int(r["nodes"])) for r in rows) == sorted((v, 2) for v in HOSTILE)
    assert {(r["status"], r["metric"], float(r["value"]) / int(r["nodes"]), r["unit"]) for r in rows} == {
        ("completed", "m", 1.25, "u/s")}
