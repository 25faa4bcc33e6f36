"""Hostile corpus, round three (issue 25), part I: terminal injection through what hpcai prints.

A terminal acts on some characters rather than showing them: ESC starts a control sequence (an OSC
`ESC ] 0 ; TITLE BEL` sets the window title, others rewrite the screen or the clipboard), BEL
rings, CR moves back over the line, the C1 range holds one-byte CSI/OSC, and the bidi overrides
(U+202E) reorder what is shown. hpcai echoes text it did not write: a file name given with -o, a
command after --cmd --, a record's fields, a site file, a payload manifest. Every line it prints
passes one function, hpcai.output.plain (say/warn/emit, and the consoles of hpcai.console), which
shows each such character as an escape (`\\x1b`, `\\u202e`).

The property: for every invocation below that echoes hostile text, stdout and stderr together
hold no control character but the line feeds and tabs of their own line structure; and where the
text lands in a one-line message (`wrote FILE`, an error), a line feed in it does not start a line
of its own that could pass for hpcai's.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from run_records import hvd_log, make_run

from hpcai.output import plain

pytestmark = pytest.mark.hostile

# An OSC title, BEL, CR, a C1 CSI, U+202E, a line feed and what would follow it as a line of its own.
EVIL = "\x1b]0;PWN\x07 \x1b[2J\r\x9b31m \u202eevil\u202c \x7f"
FAKE = "FAKE-LINE"
EVIL_LINE = f"{EVIL}\n{FAKE}"
# What may reach the terminal raw: printable text, and line feed and tab as the line structure.
_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class Echo:
    name: str
    run: Callable  # (tmp_path, hpcai, monkeypatch) -> CliResult
    one_line: bool = False  # the hostile text lands in a one-line message: a line feed must not split it


def _records(tmp: Path, name: str = "a") -> Path:
    from hpcai.results.runs import finalize

    root = tmp / "runs"
    finalize(make_run(root, name, "hvd-synthetic", hvd_log(1000), site=EVIL_LINE, partition=EVIL_LINE,
                      pvars={"v": EVIL_LINE}))
    return root


def _launch(tmp, hpcai, monkeypatch):
    monkeypatch.chdir(tmp)
    return hpcai("launch", "--site", "local", "--image", "img.sif", "--dry-run", "--cmd", "--", "echo", EVIL)


def _plot(tmp, hpcai, monkeypatch):
    return hpcai("results", "plot", str(_records(tmp)), "-o", str(tmp / f"{EVIL_LINE}.png"))


def _export_error(tmp, hpcai, monkeypatch):
    return hpcai("results", "export", "--csv", str(_records(tmp)), "-o", str(tmp / EVIL_LINE / "x.csv"))


def _export_stdout(tmp, hpcai, monkeypatch):
    return hpcai("results", "export", "--csv", str(_records(tmp)))


def _show(tmp, hpcai, monkeypatch):
    return hpcai("results", "show", str(_records(tmp, EVIL_LINE)))


def _show_missing(tmp, hpcai, monkeypatch):
    return hpcai("results", "show", str(tmp / EVIL_LINE))


def _edf(tmp, hpcai, monkeypatch):
    monkeypatch.setenv("HPCAI_SITE", "")
    return hpcai("edf", "img", "-o", str(tmp / f"{EVIL_LINE}.toml"))


def _site(tmp: Path, monkeypatch) -> None:
    folder = tmp / "sites"
    folder.mkdir(exist_ok=True)
    (folder / "evil.toml").write_text('backend = "local"\ndescription = """%s"""\n'
                                      % EVIL_LINE.replace("\x1b", "\\u001b").replace("\x07", "\\u0007")
                                      .replace("\r", "\\r").replace("\x9b", "\\u009b").replace("\x7f", "\\u007f"))
    monkeypatch.setenv("HPCAI_SITE_PATH", str(folder))


def _sites_show(tmp, hpcai, monkeypatch):
    _site(tmp, monkeypatch)
    return hpcai("sites", "show", "evil")


def _payload(tmp: Path, monkeypatch) -> None:
    from hpcai import payloads

    root = tmp / "payloads"
    shutil.copytree(payloads.payloads_root() / "sanity", root / "sanity")
    manifest = root / "sanity" / "payload.toml"
    text = manifest.read_text()
    escaped = (EVIL_LINE.replace("\x1b", "\\u001b").replace("\x07", "\\u0007").replace("\r", "\\r")
               .replace("\x9b", "\\u009b").replace("\x7f", "\\u007f").replace("\n", "\\n"))
    text = re.sub(r'^description = ".*"$', lambda _: f'description = "[red]{escaped}"', text, count=1, flags=re.M)
    manifest.write_text(text)
    monkeypatch.setattr(payloads, "payloads_root", lambda: root)


def _payloads_show(tmp, hpcai, monkeypatch):
    _payload(tmp, monkeypatch)
    return hpcai("payloads", "show", "sanity")


def _payloads_list(tmp, hpcai, monkeypatch):
    _payload(tmp, monkeypatch)
    return hpcai("payloads", "list")


def _sif_dry_run(tmp, hpcai, monkeypatch):
    monkeypatch.setenv("HPCAI_WORK_DIR", str(tmp / "w"))
    return hpcai("sif", "img:1", "--dry-run", "-o", str(tmp / f"{EVIL}.sif"))


ECHOES = [
    Echo("launch --dry-run --cmd -- echo EVIL", _launch),
    Echo("results plot -o EVIL.png: wrote", _plot, one_line=True),
    Echo("results export -o EVIL/x.csv: the error", _export_error, one_line=True),
    Echo("results export --csv: a record's fields on stdout", _export_stdout),
    Echo("results show: a record whose name and fields hold EVIL", _show),
    Echo("results show EVIL: the error", _show_missing, one_line=True),
    Echo("edf -o EVIL.toml: wrote", _edf, one_line=True),
    Echo("sites show: a site file's description", _sites_show),
    Echo("payloads show: a manifest's description", _payloads_show),
    Echo("payloads list", _payloads_list),
    Echo("sif --dry-run -o EVIL.sif", _sif_dry_run),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("echo", ECHOES, ids=[e.name for e in ECHOES])
def test_nothing_printed_holds_a_raw_control_character(tmp_path, hpcai, monkeypatch, echo):
    res = echo.run(tmp_path, hpcai, monkeypatch)
    both = res.stdout + res.stderr
    assert "Traceback" not in both, both
    assert "\\x1b" in both or "\\u202e" in both or echo.name.startswith(("results show:", "results export --csv")), \
        f"the hostile text never reached the output: {both!r}"
    raw = sorted({f"U+{ord(c):04X}" for c in _RAW.findall(both)})
    assert not raw, f"raw control characters {raw} in {both!r}"
    if echo.one_line:
        assert not [line for line in both.splitlines() if line.startswith(FAKE)], both


def test_the_record_fields_are_shown_escaped(tmp_path, hpcai):
    """results show/export: the hostile site and variable reach the output, shown as escapes."""
    res = hpcai("results", "export", "--csv", str(_records(tmp_path)))
    assert plain("\x1b]0;PWN\x07") in res.stdout and "\x1b" not in res.stdout


def test_the_dry_run_shows_the_command_with_escapes(tmp_path, hpcai, monkeypatch):
    res = _launch(tmp_path, hpcai, monkeypatch)
    last = res.stdout.strip().splitlines()[-1]
    assert last.endswith(f"echo '{plain(EVIL)}'"), last


def test_plain_keeps_lines_unless_told_and_is_idempotent():
    assert plain("a\tb\nc\x1b") == "a\tb\nc\\x1b"
    assert plain("a\tb\nc\x1b", lines=False) == "a\\x09b\\x0ac\\x1b"
    assert plain(plain(EVIL_LINE, lines=False)) == plain(EVIL_LINE, lines=False)


def test_every_console_print_passes_plain(capsys):
    from hpcai.console import err, out

    out.print(EVIL, markup=False)
    err.print(f"[bold]x[/] {EVIL}", markup=False)
    captured = capsys.readouterr()
    assert not _RAW.search(captured.out + captured.err), captured
