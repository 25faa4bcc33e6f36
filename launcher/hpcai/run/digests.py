"""sha256 of image files (SIF, SquashFS) for plan.json, cached so a launch does not rehash GBs.

The cache is one small JSON file, ${XDG_CACHE_HOME:-~/.cache}/hpcai/digests.json, keyed by the
file's real path and valued with its stat identity: size, mtime_ns, inode and ctime_ns. A rebuilt
or replaced image changes one of them and is hashed again; size and mtime alone are not enough
(a rewrite can keep both: `touch -r`, `cp -p`, a same-size edit within the clock's tick), but no
user can set ctime, which every write changes (git's index trusts the same fields). A cache that
cannot be read or written only costs the hash; it is read and written through hpcai.files (a FIFO
or a link planted at its name is never followed, a damaged one never hangs or recurses).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hpcai import files

MAX_ENTRIES = 256  # images come and go; keep the file small
MAX_BYTES = 1 << 20  # 256 entries take about 64 KiB


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hpcai" / "digests.json"


def _load(path: Path) -> dict:
    try:
        data = files.read_json(path, MAX_BYTES)
        return data if isinstance(data, dict) else {}
    except (OSError, files.BadFile):
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
        # atomic: concurrent launches never see half a file; a link at the name is replaced
        files.write_atomic(cache, files.dumps(entries, indent=1), over_link=True)
    except OSError:
        pass
    return digest
