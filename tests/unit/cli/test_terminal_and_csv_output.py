"""Output a terminal or a spreadsheet would execute (hostile corpus, round three, issue 25):
hpcai.output.plain leaves no control character of any code point, `hpcai sites list/show` show
escapes and never run them, and every text column of a CSV export is inert (no formula character
first, no control character) while numbers stay numbers. Properties over every control character
and every CSV column."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from hpcai import output
from hpcai.console import plain
from hpcai.results import export

pytestmark = pytest.mark.hostile

TERMINAL_PAYLOADS = ["\x1b[31mred\x1b[0m", "\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07", "bell\x07",
                     "\x9b2J", "\x9d8;;http://x\x9c", "\x85next", "del\x7f", "over\rwrite", "\x1bc",
                     "rtl\u202eexe.txt", "\x00nul"]
# what a terminal acts on: every C0 control but tab and line feed, DEL, C1, line separators, bidi
ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_plain_leaves_no_control_character_of_any_code_point():
    everything = "".join(map(chr, range(0x10000)))
    shown = plain(everything)
    assert not ACTIVE.search(shown)
    assert "\\x1b" in shown and "\\x9b" in shown and "\\u202e" in shown and "\t" in shown and "\n" in shown
    assert plain("abc é 字") == "abc é 字"


@pytest.fixture
def evil_sites(tmp_path, monkeypatch):
    folder = tmp_path / "sites"
    folder.mkdir()
    description = "".join(TERMINAL_PAYLOADS).replace("\x00", "")  # TOML has no NUL in strings
    toml = f'backend = "local"\nruntime = "docker"\ndescription = {json.dumps(description)}\n'  # JSON escapes are TOML's
    (folder / "evil.toml").write_text(toml)
    (folder / "a\x1b[31m.toml").write_text('backend = "local"\n')  # a file name is text from a file, too
    monkeypatch.setenv("HPCAI_SITE_PATH", str(folder))
    return folder


@pytest.mark.parametrize("args", [["sites", "show", "evil"], ["sites", "list"]])
def test_sites_output_shows_escapes_never_runs_them(hpcai, evil_sites, args):
    res = hpcai(*args)
    assert res.exit_code == 0, res.stderr
    assert not ACTIVE.search(res.stdout + res.stderr)
    assert "\\x1b[31m" in res.stdout
    if args[1] == "show":
        assert "\\x1b]8;;http://evil.example/\\x07click" in res.stdout and "\\x9b2J" in res.stdout


def test_a_multi_line_description_cannot_pass_for_a_field(hpcai, tmp_path, monkeypatch):
    (tmp_path / "two.toml").write_text('backend = "local"\ndescription = """first\nbackend: srun"""\n')
    monkeypatch.setenv("HPCAI_SITE_PATH", str(tmp_path))
    res = hpcai("sites", "show", "two")
    assert res.exit_code == 0 and "\n  backend: srun" in res.stdout
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("backend:")] == ["backend: local"]


FORMULAS = ["=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1", "\r=1", '=HYPERLINK("http://evil","x")', "=cmd|' /C calc'!A0"]


@pytest.mark.parametrize("value", FORMULAS + TERMINAL_PAYLOADS)
def test_every_csv_text_column_is_inert(monkeypatch, tmp_path, value):
    """Property over COLUMNS: whatever text a record puts in any column, the CSV cell starts with
    no formula character (a quote first) and holds no control character; the text is kept."""
    monkeypatch.setattr(export, "row", lambda rec: dict.fromkeys(export.COLUMNS, value))
    rows = list(csv.DictReader(io.StringIO(export.to_csv([object()]))))
    assert len(rows) == 1 and list(rows[0]) == export.COLUMNS
    for column, cell in rows[0].items():
        assert not cell.startswith(output.FORMULA_START), column
        assert not ACTIVE.search(cell) and cell.lstrip("'") == plain(value), column


@pytest.mark.parametrize("value", [0, 7, -5, 2.5, -0.125, None, "", "-5", "+3", "1e-3", "-.5", "sha256:abc", "a=b"])
def test_numbers_stay_numbers_and_harmless_text_stays_as_it_is(value):
    assert output.csv_cell(value) == value


def test_results_export_csv_of_a_hostile_record(hpcai, tmp_path):
    run = tmp_path / "r1"
    (run / "logs").mkdir(parents=True)
    plan = {"payload": "=HYPERLINK(\"http://evil\")", "site": "@site", "partition": "-p", "job_id": "+1+1",
            "image": "=img", "image_digest": "\x1b[31m", "hpcai_version": "-v",
            "payload_vars": {"model": "=m", "dataset": "@d", "batch_size": "8"},
            "image_labels": {"hpcai.component.framework": "=torch"}}
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "status.json").write_text(json.dumps({"state": "failed", "error": "=err", "wall_s": 12.5}))
    res = hpcai("results", "export", str(tmp_path), "--csv")
    assert res.exit_code == 0, res.stderr
    row = next(csv.DictReader(io.StringIO(res.stdout)))
    for column, cell in row.items():
        assert not cell.startswith(output.FORMULA_START) and not ACTIVE.search(cell), (column, cell)
    assert row["Payload"] == "'=HYPERLINK(\"http://evil\")" and row["Runtime(s)"] == "12.5"
    assert row["Image"] == "'=img" and row["ImageDigest"] == "\\x1b[31m" and row["BatchSize/Device"] == "8"
