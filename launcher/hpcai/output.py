"""The one output object: what hpcai tells people goes to stderr, what programs read goes to stdout.

- `say` / `warn`: a line for the person at the terminal (progress, where the record is, warnings).
- `emit` / `emit_json`: machine output (JSON, a rendered file, a script path, a job id), so
  `hpcai … | jq` and `$(hpcai submit …)` see only that.

Plain writes, no rich: the launch path cannot afford importing it (~0.1 s). Tables for people are
rich renderables printed by `console.err`/`console.out`, which write to these same streams; text
from records reaches them through `console.plain`/`console.cell`.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def say(text: str) -> None:
    sys.stderr.write(text + "\n")


def warn(text: str) -> None:
    say(f"warning: {text}")


def emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def emit_json(data: Any, indent: int | None = 2, sort_keys: bool = False) -> None:
    emit(json.dumps(data, indent=indent, sort_keys=sort_keys, default=str))
