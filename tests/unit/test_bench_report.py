"""benchmarks/_report.py and benchmarks/report.py: figures recorded by a script, the table, the
verdicts (PASS, FAIL, never PASS unmeasured), report.json and the comparison of two reports. Real
runs on small inputs: a benchmark-like script run as a process, report.py's main on its figures."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import _report  # noqa: E402
import report  # noqa: E402


@pytest.mark.parametrize("measured,target,better,status", [
    (0.4, 1.0, "lower", "PASS"), (1.0, 1.0, "lower", "PASS"), (1.2, 1.0, "lower", "FAIL"),
    (60, 50, "higher", "PASS"), (50, 50, "higher", "PASS"), (40, 50, "higher", "FAIL"),
    (0, 0, "lower", "PASS"), (2, 0, "lower", "FAIL"),
    (None, 1.0, "lower", "not run"), (None, 50, "higher", "not run"),
])
def test_verdict(measured, target, better, status):
    assert _report.verdict(measured, target, better) == status


def test_verdict_refuses_an_unknown_direction():
    with pytest.raises(ValueError, match="better"):
        _report.verdict(1.0, 1.0, "smaller")


def test_record_ratio():
    rec = _report.record("x", 0.5, 2.0, "s")
    assert rec["ratio"] == 0.25 and rec["status"] == "PASS"
    assert _report.record("x", None, 2.0, "s")["ratio"] is None  # not measured: no ratio
    assert _report.record("x", 3, 0, "files")["ratio"] is None  # target 0: no ratio, still FAIL
    assert _report.record("x", 3, 0, "files")["status"] == "FAIL"


def run_script(tmp_path: Path, body: str, out: Path | None) -> subprocess.CompletedProcess:
    """A benchmark-like script in benchmarks/'s place (it imports _report the way they do)."""
    script = tmp_path / "bench_x.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(BENCH)!r})\n" + textwrap.dedent(body))
    env = {"PATH": "/usr/bin:/bin"}
    if out:
        env[_report.OUT_ENV] = str(out)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=True)


SCRIPT = """
    from _report import figure, not_run
    figure("render", 0.4, 1.0, "s", note="42 files")
    figure("parse", 40.5, 50, "MB/s", better="higher")
    not_run("image", 1.10, "x", why="no image")
    figure("render", 0.3, 1.0, "s", note="second run")  # a later record replaces the first
"""


def test_figures_are_printed_and_appended_as_json_lines(tmp_path):
    out = tmp_path / "figures.jsonl"
    res = run_script(tmp_path, SCRIPT, out)
    assert "figure: render: 0.4 s (target <= 1 s): PASS - 42 files" in res.stdout
    assert "figure: parse: 40.5 MB/s (target >= 50 MB/s): FAIL" in res.stdout
    assert "figure: image: - (target <= 1.1 x): not run - no image" in res.stdout
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["name"] for line in lines)
    figures = _report.read_jsonl(out)
    assert [(f["name"], f["measured"], f["status"]) for f in figures] == [
        ("render", 0.3, "PASS"), ("parse", 40.5, "FAIL"), ("image", None, "not run")]


def test_without_the_variable_only_the_line_is_printed(tmp_path):
    res = run_script(tmp_path, SCRIPT, None)
    assert res.stdout.count("figure: ") == 4
    assert not list(tmp_path.glob("*.jsonl"))


def test_a_record_claiming_pass_without_a_measurement_is_not_run(tmp_path):
    jsonl = tmp_path / "f.jsonl"
    jsonl.write_text(json.dumps({"name": "x", "measured": None, "target": 1, "unit": "s", "status": "PASS"}) + "\n")
    assert _report.read_jsonl(jsonl)[0]["status"] == "not run"  # the verdict is recomputed


def test_table_columns_and_values():
    figures = [_report.record("render", 0.4, 1.0, "s"), _report.record("parse", 40.5, 50, "MB/s", "higher"),
               _report.record("image", None, 1.1, "x", note="--quick")]
    text = _report.table(figures)
    header, rule, *rows = text.splitlines()
    assert header.split() == ["figure", "target", "measured", "ratio", "result", "note"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert rows[0].split() == ["render", "<=", "1", "s", "0.4", "s", "0.40", "PASS"]
    assert rows[1].split() == ["parse", ">=", "50", "MB/s", "40.5", "MB/s", "0.81", "FAIL"]
    assert rows[2].split() == ["image", "<=", "1.1", "x", "-", "-", "not", "run", "--quick"]
    md = _report.table(figures, markdown=True).splitlines()
    assert md[0] == "| figure | target | measured | ratio | result | note |" and md[1].startswith("| --- |")
    assert _report.summary(figures) == "1 PASS, 1 FAIL, 1 not run"


def test_machine_facts():
    m = _report.machine()
    assert m["cores"] >= 1 and m["cpu"] and m["kernel"] and m["date"].endswith("Z")
    assert m["git_sha"] is None or len(m["git_sha"]) == 12
    assert str(m["cores"]) in _report.machine_line(m)


def test_report_from_jsonl_fills_in_every_expected_figure(tmp_path, capsys):
    jsonl = tmp_path / "f.jsonl"
    recs = [_report.record("render: whole matrix, both formats", 0.41, 1.0, "s"),
            _report.record("parse: nccl-tests log, CLI (slowest size)", 41.0, 50, "MB/s", "higher"),
            _report.record("extra: a figure no target lists", 2.0, 3.0, "s")]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "report.json"
    assert report.main(["--jsonl", str(jsonl), "--out", str(out)]) == 1  # a FAIL: exit 1
    data = json.loads(out.read_text())
    names = [f["name"] for f in data["figures"]]
    assert names[:len(report.EXPECTED)] == list(report.EXPECTED) and names[-1] == "extra: a figure no target lists"
    by = {f["name"]: f for f in data["figures"]}
    assert by["render: whole matrix, both formats"]["status"] == "PASS"
    assert by["parse: nccl-tests log, CLI (slowest size)"]["status"] == "FAIL"
    unmeasured = [f for f in data["figures"] if f["measured"] is None]
    assert len(unmeasured) == len(report.EXPECTED) - 2 and all(f["status"] == "not run" for f in unmeasured)
    assert by["image: size / a minimal image"]["note"] == "not run"  # its step (image_size.py) did not run
    assert {"cpu", "cores", "memory_gib", "kernel", "date", "git_sha"} <= set(data["machine"])
    printed = capsys.readouterr().out
    assert "2 PASS, 1 FAIL" in printed and f"written: {out}" in printed


def test_quick_steps_are_not_run_with_the_reason():
    why = {step: f"--quick (needs {step.needs})" for step in report.STEPS if step.quick is None}
    figures = report.complete([], why)
    by = {f["name"]: f for f in figures}
    assert by["launch: 8-rank true job / hand srun (docker)"]["note"].startswith("--quick (needs an image")
    assert by["render: whole matrix, both formats"]["note"] == "not run"  # no reason given for its step
    assert all(f["status"] == "not run" for f in figures)


def test_a_failed_step_and_a_quick_step_say_why(tmp_path, monkeypatch):
    """report.py runs real scripts: one that fails before recording, one --quick leaves half of."""
    (tmp_path / "crash.py").write_text("import sys\nsys.exit('no image here')\n")
    (tmp_path / "half.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(BENCH)!r})
        from _report import figure
        figure("light", 1.0, 2.0, "s")
        if "--light" not in sys.argv:
            figure("heavy", 3.0, 2.0, "s")
    """))
    monkeypatch.setattr(report, "HERE", tmp_path)
    steps = (report.Step("crash.py"), report.Step("half.py", (), ("--light",), "a build"))
    monkeypatch.setattr(report, "STEPS", steps)
    monkeypatch.setattr(report, "EXPECTED", {"crashed": (1.0, "s", "lower", report.STEPS[0]),
                                             "light": (2.0, "s", "lower", report.STEPS[1]),
                                             "heavy": (2.0, "s", "lower", report.STEPS[1])})
    out = tmp_path / "r.json"
    assert report.main(["--quick", "--out", str(out)]) == 1  # a step exited non-zero
    by = {f["name"]: f for f in json.loads(out.read_text())["figures"]}
    assert by["crashed"]["status"] == "not run"
    assert by["crashed"]["note"] == "benchmarks/crash.py exited 1: no image here"
    assert by["light"]["status"] == "PASS"
    assert by["heavy"]["status"] == "not run" and by["heavy"]["note"] == "--quick (needs a build)"
    assert report.main(["--out", str(out)]) == 1
    by = {f["name"]: f for f in json.loads(out.read_text())["figures"]}
    assert by["heavy"]["status"] == "FAIL" and out.with_suffix(".jsonl").is_file()


def test_compare_two_reports(tmp_path, capsys):
    old = {"machine": {"cpu": "A", "date": "2026-01-01T00:00:00Z", "git_sha": "a" * 40},
           "figures": [_report.record("render", 0.5, 1.0, "s"), _report.record("gone", 1.0, 2.0, "s"),
                       _report.record("parse", 40.0, 50, "MB/s", "higher")]}
    new = {"machine": {"cpu": "A", "date": "2026-02-01T00:00:00Z", "git_sha": "b" * 40},
           "figures": [_report.record("render", 0.4, 1.0, "s"), _report.record("parse", 60.0, 50, "MB/s", "higher"),
                       _report.record("image", None, 1.1, "x")]}
    text = _report.compare(old, new)
    lines = {line.split()[0]: line.split() for line in text.splitlines()[3:]}
    assert lines["render"] == ["render", "0.5", "s", "0.4", "s", "-20.0%", "PASS", "PASS"]
    assert lines["parse"] == ["parse", "40", "MB/s", "60", "MB/s", "+50.0%", "FAIL", "PASS"]
    assert lines["image"] == ["image", "-", "-", "-", "-", "not", "run"]  # only in the new one, unmeasured
    assert lines["gone"][-1] == "-"
    assert "different machines" not in text and "aaaaaaaaaaaa" in text and "bbbbbbbbbbbb" in text
    new["machine"]["cpu"] = "B"
    assert "different machines" in _report.compare(old, new)

    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert report.main(["--from", str(tmp_path / "new.json"), "--compare", str(tmp_path / "old.json")]) == 0
    printed = capsys.readouterr().out
    assert "old result" in printed and "+50.0%" in printed
