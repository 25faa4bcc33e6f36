"""Every line `say` and `warn` print shows control characters as escapes (hostile corpus,
round three, issue 25): a site file's or a record's text reached the terminal as it was, ESC and
all."""

from __future__ import annotations

import pytest

from hpcai import output

pytestmark = pytest.mark.hostile

CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0), 0x2028, 0x2029,
                              *range(0x202a, 0x202f), *range(0x2066, 0x206a))]


@pytest.mark.parametrize("say", [output.say, output.warn])
def test_every_line_say_prints_shows_control_characters(say, capsys):
    """A site file's or a record's text reached the terminal through say/warn as it was: ESC ran."""
    say("site x: " + "".join(f"<{c}>" for c in CONTROLS))
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1
    assert not any(c in err[:-1] for c in CONTROLS), [c for c in CONTROLS if c in err[:-1]]
    assert "<\\x1b>" in err and "<\\u202e>" in err
