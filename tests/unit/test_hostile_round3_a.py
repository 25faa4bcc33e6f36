"""Hostile corpus, round three (issue 25), part A: long values through secret redaction, secrets
in every EDF writer, and output a terminal or a spreadsheet would execute. Each test is a property
over the registry it guards where one exists: every compiled pattern of hpcai.redact, every EDF
writer, every CSV column, every control character."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import stat
import sys
import time
from pathlib import Path

import pytest

from hpcai import output, redact
from hpcai.console import plain
from hpcai.redact import REDACTED, holds_secret, redact_argv, redact_env, redact_value, secret_items
from hpcai.results import export
from hpcai.run import edf

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.hostile

MB = 1 << 20
# A bound a loaded 2-core CI machine meets with room to spare (about 1 s each here, 2-3 s with
# both cores busy), and a quadratic pattern cannot: it took 10 s at 32 KB and hung past 60 s at
# 128 KB, so at 1 MB it would take hours.
BOUND_S = 15.0
SHAPES = ["a", "a=", "https://u:p@", "--password ", "k=v,", "Password=x;", "a://", "a://u:", "-9", "x:",
          "--a-b_c", "A1+.-"]


def _long(shape: str) -> str:
    return shape * (MB // len(shape))


def _timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


# --- 1. long values: redaction is linear --------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
def test_every_redaction_pattern_is_linear_on_1_mb(shape):
    """Every compiled pattern in hpcai.redact, searched and substituted over 1 MB of a shape that
    made the old scheme pattern backtrack (letters, digits, colons, '=' runs)."""
    patterns = [v for v in vars(redact).values() if isinstance(v, re.Pattern)]
    assert len(patterns) >= 4  # SECRET_NAME, _USERINFO, _KV_SECRET, _SECRET_FLAG
    value = _long(shape)
    for pattern in patterns:
        _, took = _timed(lambda: (pattern.search(value), pattern.sub("", value), pattern.match(value)))
        assert took < BOUND_S, f"{pattern.pattern[:40]}… took {took:.2f} s on 1 MB of {shape!r}"


@pytest.mark.parametrize("shape", ["a", "a=", "https://u:p@", "--password ", "k=v,", "Password=x;", "a://u:"])
def test_redaction_of_1_mb_is_fast_and_still_right(shape):
    filler = _long(shape)
    value = f"{filler} postgres://user:SEKRIT1@db/x {filler} AccountKey=SEKRIT2; {filler}"
    for fn, arg in [(redact_value, value), (redact_env, {"X": value, "API_TOKEN": filler}),
                    (redact_argv, [value, "-e", f"X={value}", f"--env=DB={value}", "--password", value])]:
        result, took = _timed(fn, arg)
        assert took < BOUND_S, f"{fn.__name__} took {took:.2f} s on 1 MB of {shape!r}"
        assert "SEKRIT" not in json.dumps(result), fn.__name__
    (found, took), (named, took2) = _timed(secret_items, {"X": value, "Y": filler}), _timed(holds_secret, value)
    assert found.get("X") == value and named and took + took2 < BOUND_S
    assert redact_argv(["--password", filler]) == ["--password", REDACTED]


def test_the_text_kept_before_a_hidden_value_is_redacted_too():
    """A `sh -c` string holds a URL's password before a secret-named assignment: both hidden."""
    shown = redact_argv(["sh", "-c", "curl https://u:PW1@h/x && export API_TOKEN=tok1",
                         "--set-env=https://u:PW2@h/ X_TOKEN=tok2"])
    assert not any(s in json.dumps(shown) for s in ("PW1", "PW2", "tok1", "tok2")), shown


@pytest.mark.parametrize("shape", ["a", "a=", "https://u:p@", "--password ", "k=v,"])
def test_planning_a_1_mb_env_value_is_fast_and_keeps_the_secret(hpcai, tmp_path, shape):
    """issue 25: `-e X=<32 KB>` took 10 s to plan, 128 KB hung."""
    filler = _long(shape)
    args = ["launch", "--dry-run", "--site", "generic-slurm", "--image", "x.sif", "-o", str(tmp_path / "r"),
            "-e", f"X={filler}", "-e", f"DATABASE_URL=https://u:SEKRIT3@h/{filler}",
            "-e", f"Y={filler}Password=SEKRIT4;", "--cmd", "--", "tool", filler]
    res, took = _timed(hpcai, *args)
    assert res.exit_code == 0, res.stderr[-300:]
    assert took < 2 * BOUND_S, f"planning took {took:.2f} s"
    assert "SEKRIT" not in res.stdout + res.stderr


_OLD_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)(?P<secret>[^/\s@]+)(?=@)")


def test_the_linear_userinfo_pattern_redacts_exactly_what_the_old_one_did():
    """Property, against the old (quadratic, fine on short input) pattern: 30,000 random short
    strings over the characters that matter, with URL fragments planted in half of them."""
    rnd = random.Random(25)
    alphabet = "aZ19+.-:/@ \t;=xp"
    planted = ["://", "a://u:p@", "1a://:@", "-9b://x:y@h/", "s3+x.y-z://k:s@b"]

    def old(v: str) -> str:
        return _OLD_USERINFO.sub(lambda m: m.group("head") + REDACTED, v)

    for _ in range(30000):
        v = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 20)))
        if rnd.random() < 0.5:
            at = rnd.randint(0, len(v))
            v = v[:at] + rnd.choice(planted) + v[at:]
        assert redact.redact_value(v) == redact._KV_SECRET.sub(lambda m: m.group("head") + REDACTED, old(v)), v
        assert holds_secret(v) == bool(_OLD_USERINFO.search(v) or redact._KV_SECRET.search(v)), v


# --- 2. secrets in every EDF writer ---------------------------------------------------------------

SECRETS = [("HF_TOKEN", "hf_SEKRIT5"), ("DATABASE_URL", "postgres://u:SEKRIT6@h/db"),
           ("AWS_SECRET_ACCESS_KEY", "SEKRIT7aws")]


def _edf_writers():
    """Every way hpcai writes an EDF: the module itself, and the ce runtime's step file."""
    from hpcai.run.runtimes import ContainerSpec
    from hpcai.run.runtimes.ce import CeRuntime

    def module(env):
        spec = edf.EdfSpec(image="img", env=env)
        return edf.render(edf.build(spec), inherited=edf.split_secrets(env)[1])

    def ce(env):
        return CeRuntime().edf(ContainerSpec(image="img", command=("true",), env=env))

    return {"module": module, "ce": ce}


@pytest.mark.parametrize("writer", sorted(_edf_writers()))
def test_no_edf_writer_writes_a_secret_value(writer):
    env = (("A", "1"), *SECRETS)
    text = _edf_writers()[writer](env)
    doc = tomllib.loads(text)
    assert edf.check(doc) == [] and doc["env"] == {"A": "1"}
    assert not any(value in text for _, value in SECRETS) and "SEKRIT" not in text


@pytest.mark.parametrize("name,value", SECRETS)
@pytest.mark.parametrize("to_file", [False, True])
def test_hpcai_edf_keeps_each_secret_out_of_stdout_stderr_and_the_file(hpcai, tmp_path, monkeypatch, name, value,
                                                                     to_file):
    monkeypatch.setenv("COPIED_TOKEN", "SEKRIT8copied")
    out = tmp_path / "env.toml"
    res = hpcai("edf", "img", "--env", f"{name}={value}", "--env", "COPIED_TOKEN", "--env", "A=1",
                *(["-o", str(out)] if to_file else []))
    assert res.exit_code == 0, res.stderr
    text = out.read_text() if to_file else res.stdout
    assert "SEKRIT" not in res.stdout + res.stderr + text
    doc = tomllib.loads(text)
    assert edf.check(doc) == [] and doc["env"]["A"] == "1" and name not in doc["env"]
    # the names are where the user needs them: the file's comment and the note on stderr
    assert f"{name}, COPIED_TOKEN" in text.splitlines()[1] and f"{name}, COPIED_TOKEN kept out" in res.stderr
    if to_file:
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        assert sorted(p.name for p in tmp_path.iterdir()) == ["env.toml"]


def test_hpcai_edf_replaces_an_existing_file_with_a_private_one(hpcai, tmp_path):
    out = tmp_path / "env.toml"
    out.write_text("old\n")
    out.chmod(0o644)
    assert hpcai("edf", "img", "-o", str(out)).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_text().startswith("# Container Engine")


@pytest.mark.parametrize("dangling", [False, True])
def test_hpcai_edf_refuses_a_symlink_at_its_output(hpcai, tmp_path, dangling):
    victim = tmp_path / "victim"
    if not dangling:
        victim.write_text("precious\n")
    link = tmp_path / "env.toml"
    link.symlink_to(victim)
    res = hpcai("edf", "img", "--env", "HF_TOKEN=SEKRIT9", "-o", str(link))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "is a symbolic link" in errors[0] and "give a new file name" in errors[0]
    assert link.is_symlink() and (victim.read_text() == "precious\n" if not dangling else not victim.exists())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["env.toml"] + ([] if dangling else ["victim"]))
    assert "SEKRIT" not in res.stdout + res.stderr


# --- 3. output a terminal or a spreadsheet would execute -----------------------------------------

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


def test_no_temp_file_is_left_when_the_edf_cannot_be_written(hpcai, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        res = hpcai("edf", "img", "-o", str(folder / "env.toml"))
        if os.geteuid() == 0:  # root writes anyway: the file is still private
            assert res.exit_code == 0 and stat.S_IMODE((folder / "env.toml").stat().st_mode) == 0o600
        else:
            assert res.exit_code == 2 and "cannot be written" in res.stderr and list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)
    assert not [p for p in Path(folder).iterdir() if p.name.endswith(".tmp")]
