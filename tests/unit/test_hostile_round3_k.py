"""Hostile corpus, round three (issue 25), part K: one record is one record however it is named
(relative, absolute, `..`, a symlink to it or to its folder, a symlink beside it); a baselines
file's units, payload names and condition keys are checked against the payload registry and the
manifests; run facts that must be positive (lengths, counts, sizes, GPUs) are refused at 0 or
below and a figure past the float range is left out with a note, never `inf`; a bench report with
a negative measurement or a figure named twice is refused, and a figure's name is shown escaped."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
import sys
from pathlib import Path

import pytest
from test_compare import hvd_log, make_run

from hpcai.errors import UsageError

pytestmark = pytest.mark.hostile

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def one_line_error(res, *fragments: str) -> None:
    """Exit 2, exactly one line on stderr starting with `error: ` and holding every fragment."""
    assert "Traceback" not in res.stderr + res.stdout
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def strict_json(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity."""
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


# --- 1. one record, every spelling of its path ------------------------------------------------------

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


# --- 2. baselines: units, payload names, condition keys ---------------------------------------------

def _load(tmp_path: Path, text: str):
    from hpcai.results.baselines import load_baselines

    path = tmp_path / "b.toml"
    path.write_text(text)
    return load_baselines(path)


def _declared_units() -> list[tuple[str, str, str]]:
    """(payload, metric, unit) for every metric a manifest declares a unit for."""
    from hpcai import payloads

    out = []
    for name in payloads.available_payloads():
        for metric, spec in payloads.load_payload(name).raw.get("metrics", {}).items():
            if isinstance(spec.get("unit"), str):
                out.append((name, metric, spec["unit"]))
    return out


def test_every_declared_unit_loads_and_every_other_unit_is_refused(tmp_path):
    """A property over every metric of every manifest: its own unit loads; another is refused in
    one line naming the file, the key and both units."""
    triples = _declared_units()
    assert len(triples) > 20
    for payload, metric, unit in triples:
        body = f'[references."{payload}"]\n"*" = {{ {metric} = [2.0, -0.1, 0.1, "{unit}"] }}\n'
        (config,) = _load(tmp_path, body)
        assert config.systems["*"][metric].unit == unit
        for wrong in {"GB/s", "ex/s", "s", "", f"{unit}x", unit.upper()} - {unit}:
            with pytest.raises(UsageError) as exc:
                _load(tmp_path, body.replace(f'"{unit}"]', f'"{wrong}"]'))
            msg = str(exc.value)
            assert "\n" not in msg and str(tmp_path / "b.toml") in msg and metric in msg, msg
            assert repr(wrong) in msg and repr(unit) in msg, msg


def test_a_reference_in_the_wrong_unit_fails_the_compare_command(tmp_path, hpcai):
    """The reviewer's case: img/s runs against a reference in GB/s gave `pass`."""
    for i in range(2):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000))
    (tmp_path / "b.toml").write_text('[references."hvd-synthetic"]\n'
                                     '"*" = { img_per_sec_total = [1000.0, -0.10, 0.10, "GB/s"] }\n')
    res = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"), "--min-runs", "1")
    one_line_error(res, str(tmp_path / "b.toml"), "img_per_sec_total", "'GB/s'", "'img/s'")


def test_a_metric_only_a_host_parser_knows_keeps_its_unit_unchecked(tmp_path):
    """osu's parser has figures the manifest does not declare: no unit to check against."""
    (config,) = _load(tmp_path, '[references."osu"]\n"*" = { latency_1B = [2.0, -0.1, 0.1, "us"] }\n')
    assert config.systems["*"]["latency_1B"].unit == "us"


BAD_KEYS = {
    "nodes is a word": ("ddp-bench nodes=two", "nodes must be a whole number from 1"),
    "nodes is 0": ("osu nodes=0", "from 1"),
    "nodes is negative": ("osu nodes=-1", "from 1"),
    "nodes with a zero in front": ("osu nodes=02", "plain digits"),
    "nodes as a float": ("osu nodes=2.0", "plain digits"),
    "ntasks_per_node is 0": ("osu ntasks_per_node=0", "ntasks_per_node must be a whole number from 1"),
    "gpus_per_node is a word": ("osu gpus_per_node=many", "gpus_per_node must be a whole number from 0"),
    "unknown condition": ("ddp-bench flavor=x nodes=1", "'flavor' is no condition of ddp-bench; valid: nodes, "),
    "unknown payload": ("nopayload", "'nopayload' is no payload"),
    "unknown payload with conditions": ("osu-bench nodes=1", "valid: ddp-bench, "),
    "choice not offered": ("osu test=nosuch", "valid: allreduce"),
    "integer variable is a word": ("hvd-synthetic batch_size=many", "expected an integer"),
    "integer variable is a float": ("hf-clm seq_len=1e3", "expected an integer"),
    "float variable is nan": ("hf-clm lr=nan", "NaN or infinity"),
}


@pytest.mark.parametrize("case", sorted(BAD_KEYS))
def test_a_configuration_that_would_match_nothing_is_refused(tmp_path, hpcai, case):
    key, fragment = BAD_KEYS[case]
    make_run(tmp_path / "runs", "r0", "hvd-synthetic", hvd_log(1000))
    (tmp_path / "b.toml").write_text(f'[references."{key}"]\n"*" = {{ some_metric = [1.0, "x"] }}\n')
    res = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"))
    one_line_error(res, str(tmp_path / "b.toml"), f'references."{key}"' if " " in key else key, fragment)


def test_every_condition_key_of_every_payload_with_each_bad_value(tmp_path):
    """A property: for each payload, each plan key refuses 0 (but gpus_per_node), -1, 1.5, 01, x;
    each variable with choices refuses a value outside them and takes each of them."""
    from hpcai import payloads

    for name in payloads.available_payloads():
        manifest = payloads.load_payload(name)
        for key in ("nodes", "ntasks_per_node", "gpus_per_node"):
            for bad in ["-1", "1.5", "01", "x", "+2", *(["0"] if key != "gpus_per_node" else [])]:
                with pytest.raises(UsageError, match=re.escape(f"{key}={bad}: {key} must be a whole number")):
                    _load(tmp_path, f'[references."{name} {key}={bad}"]\n"*" = {{ m = [1.0, "x"] }}\n')
            (config,) = _load(tmp_path, f'[references."{name} {key}=4"]\n"*" = {{ m = [1.0, "x"] }}\n')
            assert config.conditions == {key: "4"}
        for var in manifest.variables:
            if var.choices:
                bad = "7" if isinstance(var.default, int) else "not-a-choice"  # of the right type, not offered
                with pytest.raises(UsageError, match="valid: "):
                    _load(tmp_path, f'[references."{name} {var.name}={bad}"]\n"*" = {{ m = [1.0, "x"] }}\n')
                for choice in var.choices:
                    _load(tmp_path, f'[references."{name} {var.name}={choice}"]\n"*" = {{ m = [1.0, "x"] }}\n')


def test_valid_conditions_still_select_the_runs(tmp_path, hpcai):
    for i in range(2):
        make_run(tmp_path / "runs", f"r{i}", "hvd-synthetic", hvd_log(1000), nodes=2, pvars={"batch_size": "64"})
    (tmp_path / "b.toml").write_text(
        '[references."hvd-synthetic nodes=2 ntasks_per_node=1 batch_size=64"]\n'
        '"*" = { img_per_sec_total = [1000.0, -0.1, 0.1, "img/s"] }\n')
    res = hpcai("results", "compare", str(tmp_path / "runs"), "-b", str(tmp_path / "b.toml"), "--min-runs", "1",
                "--json")
    assert res.exit_code == 0, res.stderr
    assert strict_json(res.stdout)["rows"][0]["verdict"] == "pass"


# --- 3. positive run facts, and figures past the float range ----------------------------------------

HF_LOG = str(LOGS / "hf_clm_hpcai.log")
MEGATRON_LOG = str(LOGS / "megatron_caraml.log")
NOT_POSITIVE = ["0", "-1", "-1e9", "-0.0"]
NOT_FINITE = ["nan", "inf", "-inf"]


def _facts() -> list[str]:
    from hpcai.results.tflops import POSITIVE

    return sorted(POSITIVE)


def _parse(hpcai, name: str, value: str):
    """`results parse` of an HF log (a Megatron one for the Megatron facts) given NAME=VALUE."""
    log, payload = (MEGATRON_LOG, "megatron") if name in ("global_batch_size", "micro_batch_size",
                                                          "seq_length") else (HF_LOG, "hf-clm")
    fact = ["--gpus", value] if name == "gpus" else ["--var", f"{name}={value}"]
    return hpcai("results", "parse", "-p", payload, log, "--json", *fact)


def test_every_positive_fact_refuses_zero_negative_and_non_finite_values(hpcai):
    """A property over every fact the derived figures compute with × {0, -1, -1e9, -0.0, nan, inf}:
    one line naming it, exit 2. (--gpus is typer's int: nan and inf are not integers there either.)"""
    assert {"n_params", "seq_len", "gpus", "global_batch_size"} <= set(_facts())
    for name in _facts():
        for value in NOT_POSITIVE + NOT_FINITE:
            if name == "gpus" and value not in ("0", "-1"):
                continue  # typer refuses what is no integer before hpcai sees it
            res = _parse(hpcai, name, value)
            assert res.exit_code == 2 and "Traceback" not in res.stderr, (name, value, res.stderr)
            assert name in res.stderr or (name == "gpus" and "--gpus" in res.stderr), (name, value, res.stderr)
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_every_positive_fact_near_the_float_limit_is_refused_or_left_out_with_a_note(hpcai):
    """1e308: an integer fact is no integer of 64 bits (refused); n_params is a finite number, and
    the figure 6·N·D past the float range is left out with a warning, never `inf`."""
    for name in _facts():
        if name == "gpus":
            continue
        res = _parse(hpcai, name, "1e308")
        if res.exit_code == 2:
            assert name in res.stderr and len(res.stderr.strip().splitlines()) == 1
            continue
        assert res.exit_code == 0, res.stderr
        doc = strict_json(res.stdout)
        assert all(math.isfinite(m["value"]) and m["value"] >= 0 for m in doc["metrics"]
                   if m["name"] in ("tflops_per_gpu", "tokens_per_second")), doc["metrics"]
        if name == "n_params":
            assert "tflops_per_gpu" not in {m["name"] for m in doc["metrics"]}
            assert any("past the largest float" in w for w in doc["warnings"])


def test_the_reviewers_cases(hpcai):
    for argv, fragment in [(["--var", "seq_len=-5", "--var", "n_params=124e6"], "seq_len='-5'"),
                           (["--var", "n_params=-1e9"], "n_params='-1e9'"),
                           (["--var", "seq_len=1e308"], "seq_len='1e308'"),
                           (["--gpus", "-4"], "--gpus='-4'")]:
        one_line_error(hpcai("results", "parse", "-p", "hf-clm", HF_LOG, "--json", *argv), fragment)
    good = hpcai("results", "parse", "-p", "hf-clm", HF_LOG, "--json", "--var", "seq_len=1024", "--gpus", "2")
    tflops = next(m for m in strict_json(good.stdout)["metrics"] if m["name"] == "tflops_per_gpu")
    assert tflops["value"] > 0


@pytest.mark.parametrize("value", ["0", "-5", "-1e9", "nan", "inf", "1e308"])
def test_a_records_facts_that_are_not_positive_give_no_figure(value):
    """A record's plan is not checked by the CLI: there a fact of 0 or less (or not finite) is
    unknown, and a figure past the float range is left out, each with a warning."""
    from hpcai.results import tflops
    from hpcai.results.metrics import HIGHER, Metric, ParseResult

    for fact in ("n_params", "seq_len"):
        result = ParseResult("hf-trainer", [Metric("train_samples_per_second", 40.0, "samples/s", HIGHER)], {})
        pvars = {"n_params": "124e6", "seq_len": "1024", fact: value}
        tflops.add_to_result(result, {"payload_vars": pvars, "nodes": 1, "gpus_per_node": 1})
        figure = result.get("tflops_per_gpu")
        if fact == "seq_len" and value == "1e308" or fact == "n_params" and value == "1e308":
            assert figure is None or math.isfinite(figure.value)
        else:
            assert figure is None, (fact, value)
        assert figure is not None or result.warnings


def test_megatron_tokens_past_the_float_range_are_left_out():
    from hpcai.results import tflops
    from hpcai.results.metrics import LOWER, Metric, ParseResult

    result = ParseResult("megatron", [Metric("time_per_iteration", 1e-300, "s", LOWER)], {})
    tflops.add_megatron_tokens(result, {"seq_len": "1e300", "global_batch_size": "1e300"})
    assert result.get("tokens_per_second") is None and "past the largest float" in result.warnings[-1]


@pytest.mark.parametrize("text, kind, above, ok", [
    ("1", int, 0, True), ("0", int, 0, False), ("-1", int, 0, False), ("5", int, 4, True), ("4", int, 4, False),
    ("0.5", float, 0, True), ("0", float, 0, False), ("-0.0", float, 0, False), ("1e-300", float, 0, True),
    ("-3", int, None, True),
])
def test_check_number_lower_bound(text, kind, above, ok):
    from hpcai.payload_rules import check_number

    if ok:
        assert check_number("v", text, kind, above=above) == kind(float(text))
    else:
        with pytest.raises(UsageError, match=r"^v='.*': expected (a whole number from|a number above)"):
            check_number("v", text, kind, above=above)


# --- 4. bench report: negative figures, duplicates, control characters ------------------------------

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


# --- Payload variables: never negative, a declared floor -------------------------------------

def _numeric_vars():
    from hpcai import payloads

    for name in payloads.available_payloads():
        for var in payloads.load_payload(name).variables:
            if isinstance(var.default, (int, float)) and not isinstance(var.default, bool):
                yield pytest.param(name, var, id=f"{name}:{var.name}")


@pytest.mark.parametrize("payload, var", list(_numeric_vars()))
def test_every_numeric_payload_variable_refuses_values_below_its_floor(hpcai, tmp_path, payload, var):
    """Over every manifest: a count, size or time is never negative, and a variable declaring
    `min` (a batch, a sequence length, an iteration count) refuses less, in the host's check and
    in the image's runner alike; its floor itself is taken."""
    from hpcai import payloads

    manifest = payloads.load_payload(payload)
    below = "-1" if var.minimum <= 0 else str(int(var.minimum) - 1)
    with pytest.raises(payloads.UsageError, match=f"variable {var.name}=.*expected at least"):
        manifest.validate_vars({var.name: below})
    res = hpcai("launch", "--dry-run", "--site", "local", "--image", "x", "-o", str(tmp_path / "r"),
                payload, f"{var.name}={below}")
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    floor = str(int(var.minimum)) if isinstance(var.default, int) else str(var.minimum)
    assert manifest.validate_vars({var.name: floor})[var.name] == floor


def test_a_manifest_floor_must_be_a_number_below_the_default(tmp_path):
    import tomllib

    from hpcai import payload_rules, payloads

    for bad, said in (('"one"', "key 'vars.n.min' must be a number"), ("true", "key 'vars.n.min' must be a number"),
                      ("nan", "vars.n.min must be a number no larger than its default"),
                      ("100", "vars.n.min must be a number no larger than its default")):
        raw = tomllib.loads(f'description = "x"\nflavors = ["*"]\nparser = "sanity"\n[run]\ncommand = ["true"]\n'
                            f'[vars]\nn = {{ default = 4, min = {bad} }}\n')
        with pytest.raises(payloads.UsageError, match=said):
            payload_rules.check_manifest("p", raw, tmp_path)
