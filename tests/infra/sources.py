#!/usr/bin/env python3
"""Fill a `--sources` folder with the pinned sources GPU-recipe builds need here, checksum-verified.

Usage: sources.py DIR COMPONENT[=VERSION]…   (no version: the component's default)

This machine reaches neither GitHub nor most upstream download hosts. Two places hold the same
sources, and components.toml pins each of them with its sha256:
- Debian's source archive: alternates whose url is `debian:pool/…` (Debian's repacked
  `.orig.tar.xz`, pinned with the sha256 of Debian's `.dsc`). The archive's address is read from
  this machine's apt sources by install/lib.sh's debian_url, never written in the repository.
- tests/infra/mirror/: byte-identical copies of GitHub tag archives (from the project's source
  mirror of GitHub archives; tests/infra/mirror/SHA256SUMS lists them), for the alternates whose
  url is a `github.com/OWNER/REPO/archive/` address.
Only the named component versions are fetched (tests/infra/gpu-recipe.sh names its set). Each
file is written under the name install/lib.sh's `fetch` looks for (the url's last part) once
its sha256 matches; a mismatch stops with the file's name and both digests.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE.parents[1] / "launcher" / "hpcai" / "image" / "components.toml"
MIRROR = HERE / "mirror"
LIB = HERE.parents[1] / "dockerfiles" / "install" / "lib.sh"
# A tag archive's address; the mirror names the file after the tag, `/` turned into `-`.
GITHUB_ARCHIVE = re.compile(r"https://github\.com/([^/]+/[^/]+)/archive/(?:refs/tags/)?(.+)$")



def debian_url(path: str) -> str:
    """debian:PATH -> its address under this machine's Debian archive, by the rule the image
    builds use (install/lib.sh's debian_url reads the apt sources)."""
    res = subprocess.run(["bash", "-c", '. "$1"; debian_url "$2"', "_", str(LIB), path],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"sources: {res.stderr.strip()}")
    return res.stdout.strip()


def pinned(selection: str) -> tuple[str, str]:
    """COMPONENT[=VERSION] -> (url, sha256) from components.toml (default or alternate)."""
    name, _, version = selection.partition("=")
    comps = tomllib.loads(MANIFEST.read_text())["components"]
    if name not in comps:
        sys.exit(f"sources: unknown component {name!r}; known: {', '.join(comps)}")
    c = comps[name]
    version = version or c["version"]
    for entry in (c, *c.get("alternates", [])):
        if entry["version"] == version:
            return entry["url"].format(version=version), entry["sha256"]
    known = ", ".join(e["version"] for e in (c, *c.get("alternates", [])))
    sys.exit(f"sources: {name} {version} is not pinned in components.toml; pinned: {known}")


def acquire(url: str, dest: Path) -> None:
    if url.startswith("debian:"):
        with urllib.request.urlopen(debian_url(url[len("debian:"):]), timeout=300) as r, \
                dest.open("wb") as out:
            shutil.copyfileobj(r, out)
        return
    m = GITHUB_ARCHIVE.match(url)
    copy = MIRROR / "github" / m[1] / m[2].replace("/", "-") if m else None
    if copy is None or not copy.is_file():
        sys.exit(f"sources: {url} is neither a debian: source nor in {MIRROR}")
    shutil.copyfile(copy, dest)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    for selection in argv[1:]:
        pinned_url, want = pinned(selection)
        # URL#NAME: the file is called NAME (as install/lib.sh's fetch names it).
        url, _, name = pinned_url.partition("#")
        target = folder / (name or url.rsplit("/", 1)[-1])
        if target.is_file() and sha256(target) == want:
            continue
        with tempfile.NamedTemporaryFile(dir=folder, delete=False) as tmp:
            part = Path(tmp.name)
        try:
            acquire(url, part)
            got = sha256(part)
            if got != want:
                sys.exit(f"sources: checksum mismatch for {target.name}: expected {want}, got {got}")
            part.chmod(0o644)
            part.replace(target)
        finally:
            part.unlink(missing_ok=True)
        print(f"sources: {selection} -> {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
