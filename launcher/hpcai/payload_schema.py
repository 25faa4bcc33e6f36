"""The payload manifest's keys, declared once (hpcai.schema): every table a `payload.toml` may
hold, each key's type, choices and shape. hpcai.payload_rules reads a manifest through it before
its own checks (paths inside the folder, variables a command uses, profiles that resolve), and
`hpcai payloads schema` publishes it as JSON Schema for editors.

The tables (see README "Payloads" for an example):
    top level: description, flavors (names or "*"), geometry, parser, synthetic,
        synthetic_marker, sanity (regexes), downloads (components.toml names), and the tables:
    [requires]: modules, executables, mpi (the ranks must form one MPI world);
    [install.<family>]: build / runtime scripts, compilers, downloads;
    [run]: command (tokens with {var});
    [vars.<name>]: default (its type is the variable's), help, choices, min;
    [profiles.<name>]: variable overrides (a family name applies by itself; "quick" for CI);
    [launch.<profile>]: srun_args, nodes, time, cpus_per_node, cpus_per_task, and rows
        `"NAME=VALUE" = { … }` (their grammar is hpcai.payload_rules._check_launch's);
    [sources.<profile>]: cite, and the source's value of each setting, as text;
    [metrics.<name>]: regex + group | file + key, reduce, scale, unit, better, headline;
    [variants.<name>]: help.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from hpcai.errors import UsageError
from hpcai.schema import Key, Shape, Table

GEOMETRIES = ("per-gpu", "per-node", "single")
FAMILIES = ("cuda", "rocm", "poplar", "cpu", "*")
# A payload's name is its folder's name; it is written into the Dockerfile and def (COPY, RUN,
# %files, labels) and joined to the payloads folder, so it holds no path and no shell syntax.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
NAME_SHAPE = "a payload folder name (letters, digits, . _ -, starting with a letter or digit)"
VARIANT = Shape(NAME.fullmatch, "a variant name (letters, digits, . _ -, starting with a letter or digit)",
                f"^{NAME.pattern}$")
# A run variable's name: what {name} in run.command and the runner's VAR_RE accept.
VAR_NAME = Shape(re.compile(r"[a-z_][a-z0-9_]*").fullmatch, "a variable name (a-z, 0-9, _; not starting with a digit)",
                 r"^[a-z_][a-z0-9_]*$")
_SCALAR_TYPES = (str, int, float, bool)
_SCALAR_JSON = {"type": ["string", "integer", "number", "boolean"]}


def _scalar(where: str, value: Any) -> Any:
    """vars.<name>.default: text, a number or true/false; its type is the variable's."""
    if not isinstance(value, _SCALAR_TYPES):
        raise UsageError(f"{where} default {value!r}: expected a string, a number or true/false")
    return value


def _scalars(where: str, value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list) or not all(isinstance(v, _SCALAR_TYPES) for v in value):
        raise UsageError(f"{where} choices {value!r}: expected a list of strings, numbers or true/false")
    return tuple(value)


def _free_tables(name: str, what: str) -> Key:
    """A key holding tables whose keys are not fixed (a profile's variables, a launch profile's
    rows), checked further where their grammar lives (hpcai.payload_rules)."""
    def parse(where: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise UsageError(f"{where}: {name} must hold {what}, got {value!r}")
        return value
    return Key(name, None, parse=parse, json={"type": "object", "additionalProperties": {"type": "object"}})


def _tables(name: str, table: Table, **names: Any) -> Key:
    return Key(name, None, table=table, named=True, **names)


@functools.cache
def manifest_schema() -> Table:
    """The manifest's tables (made on first use: `reduce` takes the in-image runner's reducers)."""
    from hpcai.bench_runner import bench_runner

    what = "payload manifest"
    requires = Table([Key("modules", ()), Key("executables", ()), Key("mpi", False)], what)
    install = Table([Key("build", ""), Key("runtime", ""), Key("compilers", True), Key("downloads", ())], what)
    run = Table([Key("command", ())], what)
    var = Table([Key("default", None, parse=lambda w, v: _scalar(w, v), json=_SCALAR_JSON),
                 Key("help", "", multiline=True),
                 Key("choices", None, parse=_scalars, json={"type": "array", "items": _SCALAR_JSON}),
                 Key("min", 0.0)], what)
    metric = Table([Key("unit", ""), Key("better", "higher", choices=("higher", "lower")), Key("headline", False),
                    Key("regex", ""), Key("group", 1, low=0, range_text="a group number from 0"),
                    Key("file", ""), Key("key", ""), Key("reduce", "last", choices=tuple(bench_runner().REDUCERS)),
                    Key("scale", 1.0)], what)
    variant = Table([Key("help", "", multiline=True)], what)
    return Table([
        Key("description", "", multiline=True), Key("flavors", ("*",)),
        Key("geometry", "per-gpu", choices=GEOMETRIES), Key("parser", ""), Key("synthetic", False),
        Key("synthetic_marker", ""), Key("sanity", ()), Key("downloads", ()),
        Key("requires", None, table=requires), _tables("install", install, choices=FAMILIES),
        Key("run", None, table=run), _tables("vars", var, shape=VAR_NAME),
        _free_tables("profiles", "tables profiles.<name> of variable values"),
        _free_tables("launch", "tables launch.<profile>"), _free_tables("sources", "tables sources.<profile> of text"),
        _tables("metrics", metric), _tables("variants", variant, shape=VARIANT),
    ], what)
