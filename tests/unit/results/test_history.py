"""The run history database (issue 30, item 1): records indexed into SQLite, idempotently and under
concurrent writers, a payload's series read back, a damaged file moved aside and rebuilt from the
records, a newer schema refused, and the CLI's `index` and `history` on real record folders."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from run_records import record

from hpcai.errors import HpcaiError
from hpcai.results import history
from hpcai.results.loading import load


def runs(root: Path, values=(100.0, 110.0, 90.0), digests=("sha256:aa", "sha256:aa", "sha256:bb")) -> Path:
    """Three ddp-bench records, started a minute apart, the last on a new image."""
    for i, (value, digest) in enumerate(zip(values, digests)):
        run = record(root, f"run{i}", "ddp-bench", "examples_per_sec", "ex/s", value)
        plan = json.loads((run / "plan.json").read_text())
        plan.update(image_digest=digest, image_labels={"hpcai.flavor": "pytorch-cpu",
                                                       "hpcai.component.torch": f"2.{i}", "other": "x"},
                    env={"NCCL_DEBUG": "INFO"}, runtime="apptainer")
        (run / "plan.json").write_text(json.dumps(plan))
        (run / "status.json").write_text(json.dumps({"state": "completed", "started": f"2026-11-2{i}T10:00:00+0000"}))
    return root


def test_index_is_idempotent_and_reads_a_changed_record_again(tmp_path):
    db = history.connect(tmp_path / "h.sqlite")
    root = runs(tmp_path / "runs")
    first = history.index([root], db)
    assert (first.added, first.updated, first.unchanged) == (3, 0, 0)
    again = history.index([root], db)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 3)
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3
    metrics = root / "run1" / "metrics.json"
    doc = json.loads(metrics.read_text())
    doc["metrics"][0]["value"] = 120.0
    metrics.write_text(json.dumps(doc))
    os.utime(metrics, ns=(time.time_ns() + 10**9,) * 2)  # newer than what was read
    changed = history.index([root], db)
    assert (changed.added, changed.updated, changed.unchanged) == (0, 1, 2)
    points = history.series(db, "ddp-bench")
    assert [p.values["examples_per_sec"] for p in points] == [100.0, 120.0, 90.0]
    row = db.execute("SELECT labels, components, env, runtime FROM runs WHERE name = 'run2'").fetchone()
    assert json.loads(row[0]) == {"hpcai.component.torch": "2.2", "hpcai.flavor": "pytorch-cpu"}
    assert json.loads(row[1]) == {"torch": "2.2"} and json.loads(row[2]) == {"NCCL_DEBUG": "INFO"}
    assert row[3] == "apptainer"


def test_series_by_site_and_metric(tmp_path):
    db = history.connect(tmp_path / "h.sqlite")
    history.index([runs(tmp_path / "runs")], db)
    assert history.series(db, "ddp-bench", site="elsewhere") == []
    points = history.series(db, "ddp-bench", site="local", metrics=["examples_per_sec"])
    assert [p.image_digest for p in points] == ["sha256:aa", "sha256:aa", "sha256:bb"]
    assert points[0].units == {"examples_per_sec": "ex/s"}
    assert history.metric_names(db, "ddp-bench") == ["examples_per_sec"]


def test_a_run_of_a_multi_cluster_site_is_shown_with_its_cluster(tmp_path):
    root = runs(tmp_path / "runs")
    plan_file = root / "run2" / "plan.json"
    plan_file.write_text(json.dumps({**json.loads(plan_file.read_text()), "cluster": "beta"}))
    db = history.connect(tmp_path / "h.sqlite")
    history.index([root], db)
    assert [p.where for p in history.series(db, "ddp-bench")] == ["local", "local", "local on beta"]
    assert history.point_of(load(root / "run2")).where == "local on beta"  # the report's points too
    shown = hpcai("results", "history", "ddp-bench", "--db", str(tmp_path / "h.sqlite")).stdout
    assert "local on beta" in shown and shown.count("local on") == 1


def _index_in_a_process(args):
    db_path, root = args
    db = history.connect(Path(db_path))
    try:
        return history.index([Path(root)], db).added
    finally:
        db.close()


def test_concurrent_writers_lose_and_duplicate_nothing(tmp_path):
    """Eight processes index the same 12 records into a new database at once: every record once."""
    root = tmp_path / "runs"
    for i in range(12):
        record(root, f"r{i:02d}", "osu", "latency", "us", float(i))
    path = tmp_path / "h.sqlite"
    with ProcessPoolExecutor(8) as pool:
        added = list(pool.map(_index_in_a_process, [(str(path), str(root))] * 8))
    db = history.connect(path)
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 12
    assert db.execute("SELECT COUNT(*) FROM metrics").fetchone()[0] == 12
    assert sum(added) >= 12  # some were added twice over (a race both read as new), none lost


def _open_in_a_process(path: str) -> str:
    try:
        history.connect(Path(path)).close()
        return "ok"
    except HpcaiError as exc:
        return str(exc)


def test_processes_opening_a_new_database_together_all_open_it(tmp_path):
    """Six processes make one new database at once, 30 times: SQLite refuses the second of two
    switching a new file to WAL without waiting, and connect waits that out (a third of such
    rounds failed with "database is locked" before; CI saw it once in the test above)."""
    with ProcessPoolExecutor(6) as pool:
        for round_ in range(30):
            said = set(pool.map(_open_in_a_process, [str(tmp_path / f"h{round_}.sqlite")] * 6))
            assert said == {"ok"}, round_


def test_a_damaged_database_is_moved_aside_and_made_again(tmp_path, capsys):
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    db = history.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == history.VERSION
    [aside] = tmp_path.glob("h.sqlite.damaged-*")
    assert aside.read_bytes().startswith(b"this is not")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "moved to h.sqlite.damaged-" in err


def test_a_newer_schema_is_refused_and_left_as_it_is(tmp_path):
    path = tmp_path / "h.sqlite"
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {history.VERSION + 1}")
    raw.close()
    with pytest.raises(HpcaiError, match=rf"a history database of a newer hpcai \(schema {history.VERSION + 1}"):
        history.connect(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == history.VERSION + 1


def test_an_older_schema_is_migrated_in_place(tmp_path, monkeypatch):
    """A database an hpcai of schema 1 made (no cluster column) gains it on first use, its rows kept."""
    path = tmp_path / "h.sqlite"
    with monkeypatch.context() as old:
        old.setattr(history, "MIGRATIONS", history.MIGRATIONS[:1])
        old.setattr(history, "VERSION", 1)
        row = history._row
        old.setattr(history, "_row", lambda rec, mtime: {k: v for k, v in row(rec, mtime).items() if k != "cluster"})
        db = history.connect(path)
        history.index([runs(tmp_path / "runs")], db)
        db.close()
    db = history.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == history.VERSION == 2
    assert db.execute("SELECT COUNT(*), COUNT(cluster), MAX(cluster) FROM runs").fetchone() == (3, 3, "")


def test_a_database_it_cannot_open_never_stops_a_launch(tmp_path, monkeypatch):
    (tmp_path / "a-folder").mkdir()  # where the database file should be: SQLite cannot open it
    monkeypatch.setenv("HPCAI_RESULTS_DB", str(tmp_path / "a-folder"))
    said = history.index_quietly(runs(tmp_path / "runs") / "run0")
    assert said.startswith("the run history was not updated (") and "`hpcai results index` adds it" in said
    assert (tmp_path / "a-folder").is_dir() and not list(tmp_path.glob("a-folder.damaged-*"))


def hpcai(*args, env=None):
    return subprocess.run([sys.executable, "-m", "hpcai", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_the_cli_indexes_then_shows_the_series_and_plots_it(tmp_path):
    root = runs(tmp_path / "runs")
    db = str(tmp_path / "h.sqlite")
    res = hpcai("results", "index", str(root), "--db", db)
    assert res.returncode == 0 and res.stderr.strip() == "indexed: 3 added, 0 updated, 0 unchanged, 0 skipped"
    res = hpcai("results", "history", "ddp-bench", "--db", db, "--json")
    series = json.loads(res.stdout)
    assert [p["values"]["examples_per_sec"] for p in series] == [100.0, 110.0, 90.0]
    res = hpcai("results", "history", "ddp-bench", "--db", db, "--plot", str(tmp_path / "h.png"))
    assert res.returncode == 0, res.stderr
    assert "run2" in res.stdout and "(new)" in res.stdout  # the image changed at run2
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, said", [
    (["results", "history", "ddp-bench", "--metric", "nope"], "error: unknown metric of ddp-bench 'nope'"),
    (["results", "history", "osu"], "error: no runs of 'osu' in the history;"),
])
def test_what_the_history_cannot_answer_is_one_line(tmp_path, args, said):
    db = str(tmp_path / "h.sqlite")
    assert hpcai("results", "index", str(runs(tmp_path / "runs")), "--db", db).returncode == 0
    res = hpcai(*args, "--db", db)
    assert res.returncode == 2 and res.stderr.startswith(said) and res.stderr.count("\n") == 1, res.stderr


def test_off_switches_the_launch_index_off_and_the_commands_say_so(tmp_path):
    res = hpcai("results", "history", "ddp-bench", env={"HPCAI_RESULTS_DB": "off"})
    assert res.returncode == 2 and res.stderr.startswith("error: HPCAI_RESULTS_DB=off: the run history is switched off")


def test_history_queries_name_records_for_every_results_command(tmp_path):
    """`history:PAYLOAD,image=…` as the two sides of `compare --against`: the runs of one image
    against another's, straight from the history."""
    from report_runs import NEW, OLD, series

    runs = series(tmp_path / "runs")
    env = {"HPCAI_RESULTS_DB": str(tmp_path / "h.sqlite")}
    assert hpcai("results", "index", str(runs), env=env).returncode == 0
    res = hpcai("results", "compare", f"history:ddp-bench,image={NEW[:20]}", "--against",
                f"history:ddp-bench,image={OLD[:20]}", "--json", env=env)
    assert res.returncode == 1, res.stderr  # a regression: exit 1
    [row] = json.loads(res.stdout)["rows"]
    assert row["verdict"] == "regression" and row["n_a"] == row["n_b"] == 4
    shown = hpcai("results", "show", "history:osu,since=2026-11-11", env=env)
    assert shown.returncode == 0 and "osu1" in shown.stdout and "osu0" not in shown.stdout


def test_a_bad_history_query_is_one_line(tmp_path):
    env = {"HPCAI_RESULTS_DB": str(tmp_path / "h.sqlite")}
    res = hpcai("results", "show", "history:osu,colour=red", env=env)
    assert res.returncode == 2 and res.stderr.startswith("error: query 'history:osu,colour=red': 'colour=red' is not "
                                                         "one of site=…, cluster=…, image=…"), res.stderr
    res = hpcai("results", "show", "history:osu", env=env)
    assert res.returncode == 2 and "no run records in the history" in res.stderr
