"""sha256 of image files (SIF, SquashFS) for plan.json, cached so a launch does not rehash GBs.

The cache is one small JSON file, ${XDG_CACHE_HOME:-~/.cache}/hpcai/digests.json, keyed by the
file's real path and valued with its stat identity: size, mtime_ns, inode and ctime_ns. A rebuilt
or replaced image changes one of them and is hashed again; size and mtime alone are not enough
(a rewrite can keep both: `touch -r`, `cp -p`, a same-size edit within the clock's tick), but no
user can set ctime, which every write changes (git's index trusts the same fields). A cache that
cannot be read or written only costs the hash.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MAX_ENTRIES = 256  # images come and go; keep the file small


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hpcai" / "digests.json"


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def sha256_file(path: str | os.PathLike) -> str:
    """"sha256:<hex>" of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def image_sha256(path: str | os.PathLike) -> str:
    """The file's sha256, from the cache when (realpath, size, mtime_ns) match, else computed and stored."""
    real = os.path.realpath(path)
    st = os.stat(real)
    cache = cache_file()
    entries = _load(cache)
    identity = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "ctime_ns": st.st_ctime_ns}
    hit = entries.get(real)
    if isinstance(hit, dict) and all(hit.get(k) == v for k, v in identity.items()) \
            and isinstance(hit.get("digest"), str):
        return hit["digest"]
    digest = sha256_file(real)
    entries.pop(real, None)
    entries[real] = {**identity, "digest": digest}
    for old in list(entries)[:-MAX_ENTRIES]:  # oldest first (dicts keep insertion order)
        del entries[old]
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries, indent=1))
        os.replace(tmp, cache)  # atomic: concurrent launches never see half a file
    except OSError:
        pass
    return digest
