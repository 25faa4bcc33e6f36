"""Reading and writing files in folders that a user, or another user, controls: one rule each.

Writing: never through a symbolic link planted at the name, never half a file. A new file is made
beside its name (mkstemp: O_EXCL, private) and renamed over it, so a link put there before or
during the write is replaced, not followed, and a failed write (full disk, Ctrl-C) leaves the old
file whole. A link already at the name is refused in one line: the user named it, and writing
"through" it is what a planted link is for.

Reading: only regular files (a FIFO would hang the reader, /dev/zero would fill memory), up to a
size bound, and JSON up to a depth bound (a document nested 100,000 deep would stop the reader, and
later any code that walks it, with RecursionError). Each rule raises `BadFile`, a UsageError, so a
reader of many files can skip one with a warning and a reader of one file reports one line.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from hpcai.errors import UsageError

PRIVATE_FILE = 0o600
MAX_BYTES = 64 << 20  # a record's JSON, a site file, a baseline: far below; a log is read elsewhere
MAX_DEPTH = 64        # deeper than any document hpcai writes or reads by a wide margin


class BadFile(UsageError):
    """A file hpcai will not read or write: not regular, too large, too deep, or a link."""


def refuse_link(path: Path, what: str = "") -> None:
    if path.is_symlink():
        raise BadFile(f"{what + ' ' if what else ''}{path}: is a symbolic link, which hpcai does not "
                      "write through; remove it or give a new file name")


def write_atomic(path: Path | str, data: str | bytes, mode: int = PRIVATE_FILE, what: str = "") -> None:
    """Write DATA as PATH's new content: refused when PATH is a symbolic link; else a private temp
    file beside it, then a rename over it (MODE applied before the rename)."""
    path = Path(path)
    refuse_link(path, what)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def create_new(path: Path | str, mode: int = PRIVATE_FILE) -> int:
    """Open a file that must not exist yet, for writing: O_EXCL and O_NOFOLLOW, so neither a file nor
    a link planted at PATH is written through (FileExistsError names it)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)


def read_bytes(path: Path | str, limit: int = MAX_BYTES) -> bytes:
    """PATH's content, when it is a regular file (links to one are fine) of at most LIMIT bytes."""
    path = Path(path)
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadFile(f"{path}: not a regular file (a device, FIFO or socket); hpcai reads only files")
        if info.st_size > limit:
            raise BadFile(f"{path}: {info.st_size} bytes, over the {limit}-byte limit for this file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:  # grew while read
            raise BadFile(f"{path}: over the {limit}-byte limit for this file")
        return data
    finally:
        os.close(fd)


def read_text(path: Path | str, limit: int = MAX_BYTES) -> str:
    data = read_bytes(path, limit)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise BadFile(f"{path}: not UTF-8 text (byte {exc.start})") from None


def depth(value: Any) -> int:
    """How deeply lists and dicts nest in VALUE, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json(text: str, source: str, max_depth: int = MAX_DEPTH) -> Any:
    """TEXT as JSON: invalid JSON, NaN/Infinity and nesting over MAX_DEPTH are a BadFile naming SOURCE."""
    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")
    try:
        value = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise BadFile(f"{source}: JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # json.JSONDecodeError is one
        raise BadFile(f"{source}: not valid JSON ({exc})") from None
    if depth(value) > max_depth:
        raise BadFile(f"{source}: JSON nested deeper than {max_depth} levels")
    return value


def read_json(path: Path | str, limit: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    return parse_json(read_text(path, limit), str(path), max_depth)


def dumps(value: Any, **kwargs: Any) -> str:
    """JSON text that is valid JSON: NaN and infinities become null (json.dumps writes `NaN`,
    which no other JSON reader accepts)."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)


def finite(value: Any) -> Any:
    """VALUE with every float that is NaN or infinite replaced by None (a copy; documents hpcai writes are shallow)."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
