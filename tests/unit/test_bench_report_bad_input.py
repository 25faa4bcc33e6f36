"""benchmarks/report.py given a bench report of the wrong shape (hostile corpus, round three,
issue 25): `--compare`, `--from` and `--jsonl` of a missing, invalid or mistyped report or figure
line are one line and exit 2, never a traceback; a machine of odd types is still shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.hostile

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


GOOD_FIGURE = {"name": "a", "measured": 1.0, "target": 2.0, "unit": "s", "better": "lower"}
BAD_REPORTS = {
    "missing": (None, "cannot be read"),
    "invalid JSON": ("{x", "not valid JSON"),
    "binary": (b"\xc4\x00\xff", "not UTF-8"),
    "empty": ("", "not valid JSON"),
    "a list": ("[]", "a report is a JSON object"),
    "no figures": ("{}", "figures must be a list"),
    "figures an object": ('{"figures": {}}', "figures must be a list"),
    "figure a number": ('{"figures": [3]}', "figures[0]: a figure is a JSON object"),
    "no unit": (json.dumps({"figures": [{k: v for k, v in GOOD_FIGURE.items() if k != "unit"}]}),
                "figures[0]: figure 'a': unit must be text"),
    "string value": (json.dumps({"figures": [{**GOOD_FIGURE, "measured": "fast"}]}), "measured must be"),
    "true value": (json.dumps({"figures": [{**GOOD_FIGURE, "measured": True}]}), "measured must be"),
    "NaN value": ('{"figures": [{"name": "a", "measured": NaN, "target": 1, "unit": "s"}]}', "NaN"),
    "no target": (json.dumps({"figures": [{"name": "a", "unit": "s"}]}), "target must be a finite number"),
    "bad direction": (json.dumps({"figures": [{**GOOD_FIGURE, "better": "faster"}]}), "better must be"),
    "no name": (json.dumps({"figures": [{**GOOD_FIGURE, "name": ""}]}), "name must be text"),
    "machine a list": (json.dumps({"figures": [], "machine": []}), "machine must be"),
    "steps not objects": (json.dumps({"figures": [], "steps": [1]}), "steps[0]"),
    "deep": ('{"figures": ' + "[" * 100 + "]" * 100 + "}", "nested deeper"),
}


@pytest.fixture
def report_main():
    sys.path.insert(0, str(BENCH))
    import report

    yield report.main
    sys.path.remove(str(BENCH))


@pytest.mark.parametrize("case", sorted(BAD_REPORTS))
@pytest.mark.parametrize("option", ["--compare", "--from"])
def test_bad_bench_reports_are_one_line_exit_2(tmp_path, capsys, report_main, case, option):
    content, fragment = BAD_REPORTS[case]
    bad = tmp_path / "old.json"
    if content is not None:
        bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    good = tmp_path / "new.json"
    good.write_text(json.dumps({"figures": [GOOD_FIGURE]}))
    argv = ["--from", str(good), "--compare", str(bad)] if option == "--compare" else ["--from", str(bad)]
    assert report_main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("report.py: error: ") and str(bad) in lines[0], captured.err
    assert fragment in lines[0] and "Traceback" not in captured.err


def test_a_report_machine_of_odd_types_is_still_shown(tmp_path, capsys, report_main):
    """machine is free-form facts: a load average that is a number, not a list, is not a crash."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"figures": [GOOD_FIGURE], "machine": {"load_avg": 5, "cpu": 3, "git_sha": 7}}))
    assert report_main(["--from", str(path), "--compare", str(path)]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("line, fragment", [("[1]", "line 1: a figure is a JSON object"),
                                            ('{"name": "a", "target": 1, "unit": "s", "measured": NaN}', "NaN"),
                                            ('{"name": "a", "target": "x", "unit": "s"}', "target must be")])
def test_bad_figure_lines_are_one_line_exit_2(tmp_path, capsys, report_main, line, fragment):
    jsonl = tmp_path / "f.jsonl"
    jsonl.write_text(line + "\n")
    assert report_main(["--jsonl", str(jsonl)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{jsonl}: line 1" in err[0] and fragment in err[0]
    assert report_main(["--jsonl", str(tmp_path / "none.jsonl")]) == 2
    assert "no such figures file" in capsys.readouterr().err
