"""Text shown as typed (hostile corpus, round three, part J): `--site ':fire:'` printed
`unknown site '🔥'`; `HPCAI_DATA=/tmp/a:b` printed `/tmp/a🅱/data`. The consoles expand no emoji
codes, and error text is never read as markup."""

from __future__ import annotations

import re

import pytest

from hpcai.redact import REDACTED

pytestmark = pytest.mark.hostile

SLURM = ["--site", "generic-slurm", "--image", "x.sif"]


TYPED = [":fire:", ":b:", "[bold]x[/bold]", "[link=http://x]y[/link]", ":thumbs_up: [red]r[/]"]
EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF]")


def _cases(value: str) -> list[tuple[list[str], str]]:
    env_shown = value.partition("=")[0] + ("=" + REDACTED if "=" in value else "")
    return [
        (["--site", value, "--image", "x.sif", "--cmd", "--", "true"], f"unknown site '{value}'"),
        ([*SLURM, value], f"unknown payload '{value}'"),
        ([*SLURM, "--bind", value, "--cmd", "--", "true"], f"--bind '{value}'"),
        ([*SLURM, "--env", value, "--cmd", "--", "true"], f"--env '{env_shown}'"),
        ([*SLURM, "--runtime", value, "--cmd", "--", "true"], f"unknown runtime '{value}'"),
    ]


@pytest.mark.parametrize("value", TYPED)
def test_user_values_in_errors_come_out_verbatim(hpcai, tmp_path, value):
    for args, expected in _cases(value):
        res = hpcai("launch", "--dry-run", "-o", str(tmp_path / "r"), *args)
        assert res.exit_code == 2, (args, res.stderr)
        assert expected in res.stderr and not EMOJI.search(res.stderr), (args, res.stderr)


def test_a_data_path_with_a_colon_is_shown_as_is(hpcai, tmp_path, monkeypatch):
    monkeypatch.setenv("HPCAI_DATA", "/tmp/a:b")
    res = hpcai("launch", "--dry-run", "-o", str(tmp_path / "r"), *SLURM, "--cmd", "--", "true")
    assert res.exit_code == 2 and "'/tmp/a:b:/data'" in res.stderr and not EMOJI.search(res.stderr), res.stderr


def test_the_consoles_expand_no_emoji():
    from hpcai.console import err, out

    for console in (err, out):
        with console.capture() as cap:
            console.print(":fire: :b:", markup=True)
        assert cap.get().strip() == ":fire: :b:"
