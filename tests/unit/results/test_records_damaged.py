"""Damaged, edited or read-only run records: the results commands read what they can.

Each damaged variant sits beside two good records: `results show`, `export` and `compare` exit 0,
show the two good ones, and say in one warning line which record was skipped and why; none of
them writes into a record; text from records reaches the terminal without markup or control."""

from __future__ import annotations

import json
import stat

import pytest
from run_records import hvd_log, make_run

pytestmark = pytest.mark.hostile  # issue 12's corpus

DAMAGE = {
    "plan cut in half": ("plan.json", lambda text: text[: len(text) // 2]),
    "plan is a list": ("plan.json", lambda text: "[]"),
    "plan is a string": ("plan.json", lambda text: '"plan"'),
    "plan is empty": ("plan.json", lambda text: ""),
    "plan is binary": ("plan.json", lambda text: "\udcff\x00\x01"),
    "nodes is text": ("plan.json", lambda text: text.replace('"nodes": 1', '"nodes": "abc"')),
    "nodes is negative": ("plan.json", lambda text: text.replace('"nodes": 1', '"nodes": -3')),
    "nodes is true": ("plan.json", lambda text: text.replace('"nodes": 1', '"nodes": true')),
    "payload_vars is a list": ("plan.json", lambda text: text.replace('"payload_vars": {}', '"payload_vars": [1]')),
    "payload is a list": ("plan.json", lambda text: text.replace('"payload": "hvd-synthetic"', '"payload": [1]')),
    "status is a list": ("status.json", lambda text: "[1, 2]"),
    "status state is a number": ("status.json", lambda text: '{"state": 5}'),
    "status cut": ("status.json", lambda text: text[:5]),
    "metrics cut": ("metrics.json", lambda text: text[: len(text) // 2]),
    "metrics is a list": ("metrics.json", lambda text: "[]"),
    "metric value null": ("metrics.json", lambda text: json.dumps(
        {"parser": "horovod", "metrics": [{"name": "img_per_sec_total", "value": None}]})),
    "metric value text": ("metrics.json", lambda text: json.dumps(
        {"parser": "horovod", "metrics": [{"name": "img_per_sec_total", "value": "fast"}]})),
    "metric without a name": ("metrics.json", lambda text: json.dumps({"parser": "horovod", "metrics": [{"value": 1}]})),
    "metric is a number": ("metrics.json", lambda text: json.dumps({"parser": "horovod", "metrics": [3]})),
}


def three_runs(root, hpcai):
    from hpcai.results.runs import finalize

    for name in ("good1", "good2", "bad"):
        finalize(make_run(root, name, "hvd-synthetic", hvd_log(1000)))  # as the launcher does at the end
    return root / "bad"


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_one_damaged_record_is_skipped_with_one_line(tmp_path, hpcai, damage):
    bad = three_runs(tmp_path / "runs", hpcai)
    name, edit = DAMAGE[damage]
    text = (bad / name).read_text()
    (bad / name).write_bytes(edit(text).encode("utf-8", "surrogateescape"))
    for command in (["show"], ["export", "--csv"], ["compare"]):
        res = hpcai("results", *command, str(tmp_path / "runs"))
        assert res.exit_code == 0, (command, res.stderr)
        assert "Traceback" not in res.stderr + res.stdout
        warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: skipped")]
        assert len(warnings) == 1 and str(bad) in warnings[0] and name in warnings[0], res.stderr
        assert "good1" in res.stdout or command == ["compare"]
    compare = hpcai("results", "compare", str(tmp_path / "runs"), "--json")
    assert json.loads(compare.stdout)["rows"][0]["n"] == 2


def test_only_damaged_records_is_one_line_exit_2(tmp_path, hpcai):
    make_run(tmp_path / "runs", "bad", "hvd-synthetic", hvd_log(1000))
    (tmp_path / "runs" / "bad" / "plan.json").write_text("{")
    res = hpcai("results", "show", str(tmp_path / "runs"))
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("error: no readable run records (1 damaged): skipped ")


def test_reading_never_writes_into_a_record(tmp_path, hpcai):
    """A read-only archive: records without metrics.json are parsed in memory, not written (root
    writes through file modes, so nothing written is checked by contents and times too)."""
    runs = tmp_path / "runs"
    for i in range(2):
        make_run(runs, f"r{i}", "hvd-synthetic", hvd_log(1000 + i))
    before = {p: p.stat().st_mtime_ns for p in runs.rglob("*")}
    for folder in [runs, *runs.rglob("*")]:
        if folder.is_dir():
            folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        for command in (["show"], ["export", "--json"], ["compare"]):
            res = hpcai("results", *command, str(runs))
            assert res.exit_code == 0, res.stderr
        assert "1000" in hpcai("results", "show", str(runs)).stdout.replace(",", "")
    finally:
        for folder in [runs, *runs.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o755)
    assert not list(runs.rglob("metrics.json"))
    assert {p: p.stat().st_mtime_ns for p in runs.rglob("*")} == before


def test_record_text_reaches_the_terminal_without_markup_or_escapes(tmp_path, hpcai):
    run = make_run(tmp_path / "runs", "r0", "hvd-synthetic", hvd_log(1000))
    plan = json.loads((run / "plan.json").read_text())
    link = "\x1b]8;;https://attacker.example/\x1b\\click\x1b]8;;\x1b\\"
    plan.update(image="[bold red]img[/]" + link, site="site\x1b[2J", partition="p\rq")
    (run / "plan.json").write_text(json.dumps(plan))
    for command in (["show"], ["compare"], ["export", "--csv"]):
        res = hpcai("results", *command, str(tmp_path / "runs"))
        assert res.exit_code == 0, res.stderr
        assert "\x1b" not in res.stdout and "\r" not in res.stdout
    shown = hpcai("results", "show", str(tmp_path / "runs")).stdout
    assert "[bold red]img[/]" in shown  # the text itself, not red


def test_export_json_escapes_control_characters(tmp_path, hpcai):
    run = make_run(tmp_path / "runs", "r0", "hvd-synthetic", hvd_log(1000))
    plan = json.loads((run / "plan.json").read_text())
    plan["image"] = "img\x1b[31m"
    (run / "plan.json").write_text(json.dumps(plan))
    res = hpcai("results", "export", "--json", str(tmp_path / "runs"))
    assert res.exit_code == 0 and "\x1b" not in res.stdout
    assert json.loads(res.stdout)[0]["Image"] == "img\x1b[31m"  # kept exactly, as JSON escapes it
