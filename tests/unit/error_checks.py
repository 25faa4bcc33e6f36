"""What the hostile-input tests of every folder check of a command's answer: a refusal is exit 2
and exactly one `error:` line holding given fragments, and JSON output holds no NaN or infinity."""

from __future__ import annotations

import json


def one_line_error(res, *fragments: str) -> None:
    """Exit 2, exactly one line on stderr starting with `error: ` and holding every fragment."""
    assert "Traceback" not in res.stderr + res.stdout
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def strict_json(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity, as every other JSON reader does."""
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)
