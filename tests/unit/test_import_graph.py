"""The package's import drawing: no circle between modules, and no arrow back up between layers.

Every import counts, at module level, inside a function, or for types only: a circle of imports
that only works because one side imports at call time is still one change that means many edits.
The graph is read from the source (ast), so the test needs nothing imported.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "launcher" / "hpcai"

# Who may not import whom: the layers above a package are out of its reach.
FORBIDDEN = {
    "results": ("run", "cli"),       # results read records (hpcai.record); the launch calls results
    "image": ("run", "results", "cli"),
    "payloads": ("run", "cli"),
    "run": ("cli",),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("hpcai", *path.relative_to(PACKAGE).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()

    def owner(name: str) -> str:  # hpcai.run.model.LaunchPlan -> hpcai.run.model
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("hpcai"):
                targets |= {owner(f"{node.module}.{alias.name}") for alias in node.names}
            elif isinstance(node, ast.Import):
                targets |= {owner(alias.name) for alias in node.names if alias.name.startswith("hpcai")}
        graph[name] = targets - {name, "", "hpcai"}
    return graph


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_is_read():
    graph = _graph()
    assert "hpcai.run.model" in graph["hpcai.run.plan"] and "hpcai.record" in graph["hpcai.results.runs"]
    assert len(graph) > 60


def test_no_module_imports_itself_back_through_others():
    graph = _graph()
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_no_arrow_back_up():
    wrong = sorted(f"{a} -> {b}" for a, targets in _graph().items() for b in targets
                   if _layer(b) in FORBIDDEN.get(_layer(a), ()))
    assert wrong == []


def test_a_made_circle_is_found():
    """The check itself: a circle put in by hand is reported."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        assert set(exc.args[1]) == {"a", "b", "c"}
    else:
        raise AssertionError("the circle was not found")
