"""One record is one record however it is named (hostile corpus, round three, issue 25):
relative, absolute, `..`, a symlink to it or to its folder, a symlink beside it. compare, export
and show count it once under the first name given; a copy of it is another record."""

from __future__ import annotations

import csv
import io
import itertools
import os
from pathlib import Path

import pytest
from error_checks import strict_json
from run_records import hvd_log, make_run

pytestmark = pytest.mark.hostile


@pytest.fixture
def spelled(tmp_path, monkeypatch):
    """runs/a (a record), runs/b (another) and links to a: every name that leads to runs/a."""
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    make_run(runs, "a", "hvd-synthetic", hvd_log(1000))
    make_run(runs, "b", "hvd-synthetic", hvd_log(1010))
    os.symlink("runs/a", tmp_path / "link-a")  # a link to the record folder
    os.symlink("runs", tmp_path / "runs-link")  # a link to the folder holding it
    os.symlink(tmp_path / "runs" / "a", tmp_path / "abs-link-a")
    names = ["runs/a", str(runs / "a"), "runs/../runs/a", "./runs/a", "runs//a/", "link-a", "abs-link-a",
             "runs-link/a", str(tmp_path / "runs-link" / "a"), "runs-link/../runs/a"]
    return runs, names


def test_every_spelling_of_one_record_is_one_record(spelled):
    """A property over every pair of spellings, and all of them together: one path comes back,
    the first one given."""
    from hpcai.results.loading import discover

    _, names = spelled
    for pair in [*itertools.permutations(names, 2), names]:
        found = discover([Path(n) for n in pair])
        assert found == [Path(pair[0])], pair


def test_a_record_named_twice_is_counted_once_by_compare_export_and_show(spelled, hpcai):
    runs, names = spelled
    for pair in itertools.combinations(names, 2):
        res = hpcai("results", "compare", *pair, "--min-runs", "1", "--json")
        assert res.exit_code == 0 and res.stderr == "", res.stderr  # the same record: dropped silently
        (row,) = strict_json(res.stdout)["rows"]
        assert (row["runs"], row["n"]) == (1, 1), pair
    csv_rows = list(csv.DictReader(io.StringIO(hpcai("results", "export", "--csv", *names).stdout)))
    assert len(csv_rows) == 1
    shown = hpcai("results", "show", *names).stdout
    assert shown.count("│ a ") + shown.count("│ link-a ") + shown.count("│ abs-link-a ") == 1


def test_a_symlink_beside_a_record_in_a_runs_folder_is_the_same_record(spelled, hpcai):
    """runs/ holds a, b and a link to a (named to sort first): two records, each once, under the
    name that is not a link."""
    runs, _ = spelled
    os.symlink("a", runs / "0-link")
    os.symlink(runs / "b", runs / "b-link")
    sweep = runs / "sweep"  # a link one level further down, to a record of the folder above
    sweep.mkdir()
    os.symlink(runs / "a", sweep / "a-again")
    res = hpcai("results", "compare", str(runs), "--min-runs", "1", "--json")
    assert strict_json(res.stdout)["rows"][0]["n"] == 2
    rows = list(csv.DictReader(io.StringIO(hpcai("results", "export", "--csv", "runs").stdout)))
    assert len(rows) == 2
    from hpcai.results.loading import discover

    assert [p.name for p in discover([runs])] == ["a", "b"]
    assert [p.name for p in discover([runs, Path("link-a")])] == ["a", "b"]  # the folder came first


def test_two_copies_of_a_record_are_two_records(spelled):
    """Identity is the folder, not its content: a copy is another run."""
    import shutil

    from hpcai.results.loading import discover

    runs, _ = spelled
    shutil.copytree(runs / "a", runs / "a-copy")
    assert [p.name for p in discover([runs])] == ["a", "a-copy", "b"]
