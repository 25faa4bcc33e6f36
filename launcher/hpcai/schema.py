"""One helper for the project's TOML tables: typed keys, choices, ranges and shapes, unknown keys
listed with the valid ones, the file and the key in every message; and the same rules written out
as JSON Schema, so an editor can check a file before hpcai reads it (`hpcai sites schema`).

A `Key` declares one key: its default (whose type is the key's type: str, int, float, bool, a
tuple for a list of strings, a dict for a table of string values), its choices, bounds and shape,
and a further rule where a key needs one. A key may hold a table of its own keys (`table`), or,
with `named`, any number of such tables by name ([metrics.<name>]; `choices` or `shape` then
apply to the names). A `Table` reads a parsed TOML table against its keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hpcai.errors import UsageError, has_control

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a table-of-strings key: an environment variable's name
NO_CONTROL = r"[^\x00-\x1f\x7f-\x9f]"  # errors.has_control's rule, one character of a pattern


@dataclass(frozen=True)
class Shape:
    """What a string value must look like: the check, its description for messages, and the same
    rule as a JSON Schema pattern."""

    check: Callable[[str], bool]
    described: str
    pattern: str


@dataclass(frozen=True)
class Key:
    name: str
    default: Any
    choices: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    range_text: str = ""          # how the bounds are said ("between 0 and 64")
    shape: Shape | None = None
    multiline: bool = False       # shown only, never written into a command: may hold line breaks
    rule: Callable[[str, str], str | None] | None = None  # (key, one value) -> why it is refused, or None
    # a value of its own grammar: (where, raw) -> its value; WHERE names the file, and the table
    # holding the key when it is nested ("payload.toml: vars.n")
    parse: Callable[[str, Any], Any] | None = None
    json: Mapping[str, Any] = field(default_factory=dict)  # that value's JSON Schema
    table: Table | None = None    # the key holds a table of these keys
    named: bool = False           # … or tables of these keys by name: choices/shape check the names
    many: bool = False            # … or a list of such tables ([[alternates]])
    required: bool = False        # a table without it is refused

    @property
    def kind(self) -> str:
        return type(self.default).__name__ if self.parse is None and self.table is None else "table"


class Table:
    """The keys of one TOML table; `what` names such a table in messages ("site")."""

    def __init__(self, keys: list[Key], what: str) -> None:
        self.keys = {k.name: k for k in keys}
        self.what = what

    def read(self, where: str, raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """RAW's values, typed and checked; the first problem is one UsageError naming WHERE and the
        key (PREFIX: the dotted path of a nested table, `metrics.rate.`)."""
        bad = sorted(set(raw) - set(self.keys))
        if bad:
            raise UsageError(f"{where}: unknown key(s) {', '.join(prefix + b for b in bad)}; "
                             f"valid: {', '.join(sorted(self.keys))}")
        missing = [prefix + name for name, key in self.keys.items() if key.required and name not in raw]
        if missing:
            raise UsageError(f"{where}: missing key(s) {', '.join(missing)}")
        return {name: self._value(where, self.keys[name], value, prefix) for name, value in raw.items()}

    def _value(self, where: str, key: Key, value: Any, prefix: str) -> Any:
        if key.table is not None:
            return self._nested(where, key, value, prefix + key.name)
        if key.parse is not None:
            return key.parse(f"{where}: {prefix[:-1]}" if prefix else where, value)  # "file: vars.n"
        value = _typed(where, key, value, prefix)
        items = tuple(value.values()) if isinstance(value, dict) else value if isinstance(value, tuple) else (value,)
        if isinstance(value, dict):
            wrong = next((k for k in value if not NAME.fullmatch(k)), None)
            if wrong is not None:
                raise UsageError(f"{where}: {prefix}{key.name} key {wrong!r} is not a variable name")
        for one in items:
            self._check_one(where, key, one, prefix + key.name)
        return value

    def _nested(self, where: str, key: Key, value: Any, path: str) -> dict[str, Any]:
        assert key.table is not None
        if key.many:
            if not isinstance(value, list):
                raise UsageError(f"{where}: {path} must be a list of tables ([[{path}]]), got {value!r}")
            return [key.table.read(where, _table(where, f"{path}[{i}]", one), f"{path}[{i}].")
                    for i, one in enumerate(value)]
        _table(where, path, value)
        if not key.named:
            return key.table.read(where, value, f"{path}.")
        out = {}
        for name, body in value.items():
            self._check_one(where, key, name, f"{path} name")
            out[name] = key.table.read(where, _table(where, f"{path}.{name}", body), f"{path}.{name}.")
        return out

    def _check_one(self, where: str, key: Key, one: Any, path: str) -> None:
        if key.choices and one not in key.choices:
            shown = ", ".join(c or '""' for c in key.choices)
            raise UsageError(f"{where}: {path} {one!r} is not one of: {shown}")
        if isinstance(one, str) and not key.multiline and has_control(one):
            raise UsageError(f"{where}: {path} {one!r} holds a control character (a line break, tab or "
                             f"escape); a {self.what} value is one line")
        if _number(one) and not (_above(key.low, one) and _below(key.high, one)):
            raise UsageError(f"{where}: {path} {one!r}: expected {key.range_text}")
        if key.shape is not None and not key.shape.check(one):
            raise UsageError(f"{where}: {path} {one!r}: expected {key.shape.described}")
        why = key.rule(path, one) if key.rule else None
        if why:
            raise UsageError(f"{where}: {path} {one!r}: {why}")

    def json_object(self) -> dict[str, Any]:
        """The table's rules as a JSON Schema object: types, choices, bounds, patterns, and no key
        it does not know."""
        required = sorted(name for name, key in self.keys.items() if key.required)
        return {"type": "object", "additionalProperties": False, **({"required": required} if required else {}),
                "properties": {name: _json(key) for name, key in sorted(self.keys.items())}}

    def json_schema(self, title: str) -> dict[str, Any]:
        """The table's rules as a JSON Schema document (draft 2020-12)."""
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **self.json_object()}


def _table(where: str, path: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise UsageError(f"{where}: {path} must be a table, got {value!r}")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# How a type is said in a message: a TOML writer's words, not Python's.
_SAID = {bool: "true or false", int: "an integer", float: "a number", tuple: "a list of strings",
         dict: "a table of string values", str: "a string"}


def _typed(where: str, key: Key, value: Any, prefix: str = "") -> Any:
    want = key.default
    if isinstance(want, bool):
        ok = isinstance(value, bool)
    elif isinstance(want, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(want, float):
        ok = _number(value)
    elif isinstance(want, tuple):
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value
    elif isinstance(want, dict):
        ok = isinstance(value, dict) and all(isinstance(v, (str, int, float)) for v in value.values())
        value = {str(k): str(v) for k, v in value.items()} if ok else value
    else:
        ok = isinstance(value, str)
    if not ok:
        raise UsageError(f"{where}: key {prefix + key.name!r} must be {_SAID[type(want)]}, got {value!r}")
    return value


def _above(low: int | None, value: int) -> bool:
    return low is None or value >= low


def _below(high: int | None, value: int) -> bool:
    return high is None or value <= high


def _string(key: Key) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string"}
    if key.choices:
        out["enum"] = list(key.choices)
    elif key.shape is not None:
        out["pattern"] = key.shape.pattern
    elif not key.multiline:
        out["pattern"] = f"^{NO_CONTROL}*$"  # one line
    return out


def _json(key: Key) -> dict[str, Any]:
    if key.table is not None:
        inner = key.table.json_object()
        if key.many:
            return {"type": "array", "items": inner}
        if not key.named:
            return inner
        names = {"enum": list(key.choices)} if key.choices else {"pattern": key.shape.pattern} if key.shape else {}
        return {"type": "object", "additionalProperties": inner, **({"propertyNames": names} if names else {})}
    if key.parse is not None:
        return dict(key.json)
    want = key.default
    if isinstance(want, bool):
        return {"type": "boolean", "default": want}
    if isinstance(want, (int, float)):
        return {"type": "integer" if isinstance(want, int) else "number", "default": want,
                **({"minimum": key.low} if key.low is not None else {}),
                **({"maximum": key.high} if key.high is not None else {})}
    if isinstance(want, tuple):
        return {"type": "array", "items": _string(key), "default": list(want)}
    if isinstance(want, dict):
        return {"type": "object", "propertyNames": {"pattern": f"^{NAME.pattern}$"},
                "additionalProperties": {"type": ["string", "integer", "number"]}}
    return {**_string(key), "default": want}
