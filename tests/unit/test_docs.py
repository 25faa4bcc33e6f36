"""The docs name real files: every repository path a page names (in backticks or as a link)
exists, and every page the README links to is there. Paths inside the image (/opt/hpcai/…),
placeholders (<tag>, *, {dir}) and run outputs (runs/, build/) are not repository paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TOP = ("launcher/", "tests/", "benchmarks/", "dockerfiles/", "apptainer/", "entrypoints/", "payloads/",
       "docs/", "hpc_libs/", ".ci/")
_CODE = re.compile(r"`([^`\s]+)`")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def named_paths(page: Path) -> set[str]:
    text = page.read_text()
    found = {m.group(1).rstrip(".,:;") for m in _CODE.finditer(text)}
    found = {p.split(":")[0] for p in found if p.startswith(TOP) and not re.search(r"[<>*{}$|]", p)}
    links = {(page.parent / m.group(1)).resolve().relative_to(REPO).as_posix()
             for m in _LINK.finditer(text) if "://" not in m.group(1)}
    return found | links


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_path_a_page_names_exists(page):
    missing = sorted(p for p in named_paths(page) if not (REPO / p).exists())
    assert not missing, f"{page.name} names files that do not exist: {missing}"


def test_the_readme_is_a_front_page():
    """A front page (3-10 KB, as respected projects in this field keep theirs); the reference is in docs/."""
    size = (REPO / "README.md").stat().st_size
    assert 3_000 <= size <= 10_000, size
    text = (REPO / "README.md").read_text()
    assert text.index("make demo") < text.index("make test") < 2_000  # the two commands come first
    for page in ("building", "entrypoint", "launching", "payloads", "results", "development", "architecture"):
        assert f"(docs/{page}.md)" in text, page
