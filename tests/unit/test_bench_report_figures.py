"""benchmarks/report.py's figures (hostile corpus, round three, issue 25): a bench report
with a negative measurement or a figure named twice is refused naming the file and the figure, a
measurement of zero is still one, and the control characters of a figure's name, unit and note
and of the machine's fields are shown escaped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.hostile

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

sys.path.insert(0, str(BENCH))


def _fig(name: str, measured, target=1.0, unit="s") -> dict:
    return {"name": name, "measured": measured, "target": target, "unit": unit, "better": "lower"}


@pytest.mark.parametrize("key, value", [("measured", -1), ("measured", -1e-9), ("measured", -1e308),
                                        ("target", -1), ("target", -0.5)])
def test_a_negative_figure_is_refused_naming_the_file_and_figure(tmp_path, capsys, key, value):
    import report

    fig = {**_fig("render: whole matrix, both formats", 0.5), key: value}
    good = tmp_path / "new.json"
    good.write_text(json.dumps({"figures": [_fig("render: whole matrix, both formats", 0.5)]}))
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"figures": [fig]}))
    for argv in (["--from", str(bad)], ["--from", str(good), "--compare", str(bad)]):
        assert report.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(bad) in err[0] and "render: whole matrix" in err[0] and key in err[0], err


def test_a_measurement_of_zero_is_still_a_measurement(tmp_path, capsys):
    import report

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"figures": [_fig("image: toolchain/source files left in the image", 0, 0.0,
                                                 "files")]}))
    assert report.main(["--from", str(path)]) == 0
    assert "PASS" in capsys.readouterr().out


def test_a_figure_named_twice_in_a_report_is_refused(tmp_path, capsys):
    import report

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"figures": [_fig("a", 0.5), _fig("b", 0.5), _fig("a", 2.0)]}))
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"figures": [_fig("a", 0.5)]}))
    for argv in (["--from", str(path)], ["--from", str(ok), "--compare", str(path)]):
        assert report.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "'a' is given twice" in err[0] and "figures[2]" in err[0] and str(path) in err[0]


CONTROLS = ["\x1b]0;PWN\x07", "\x1b[31m", "\r", "\x9b2J", "\u202e", "\x00", "\x7f"]


@pytest.mark.parametrize("markdown", [False, True])
def test_control_characters_in_a_report_are_shown_escaped(tmp_path, capsys, markdown):
    """A property over the control characters a terminal acts on, in a figure's name, unit and
    note and in the machine's fields: every line printed holds none of them."""
    import report

    from hpcai.output import plain

    figures = [{**_fig(f"{c}render: {i}", 0.5, unit=f"s{c}"), "note": f"n{c}"} for i, c in enumerate(CONTROLS)]
    doc = {"mode": "quick\x1b[2J", "machine": {"cpu": "x\x1b]0;T\x07", "date": "\x1b[1m", "git_sha": "\x07"},
           "figures": figures}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    assert report.main(["--from", str(path), "--compare", str(path)] + (["--markdown"] if markdown else [])) == 0
    out = capsys.readouterr().out
    assert plain(out) == out, [line for line in out.splitlines() if plain(line) != line]
    assert "\\x1b]0;PWN\\x07render: 0" in out and "\\u202erender: 4" in out
    if not markdown:  # the columns still line up: each name is escaped before the widths are measured
        table = [line for line in out.splitlines() if "render: " in line][:len(CONTROLS)]
        assert len({line.index(" <= ") if " <= " in line else line.index("<=") for line in table}) == 1
