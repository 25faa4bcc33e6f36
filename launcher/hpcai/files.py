"""Reading and writing files in folders that a user, or another user, controls: one rule each.

Writing: never through a symbolic link planted at the name, never half a file. A new file is made
beside its name (mkstemp: O_EXCL, private) and renamed over it, so a link put there before or
during the write is replaced, not followed, and a failed write (full disk, Ctrl-C) leaves the old
file whole. A link already at a name the user gave (-o) is refused in one line: writing "through"
it is what a planted link is for; at a name hpcai owns (a record's plan.json) it is replaced.
A file that must not exist yet (a batch script, a lock) is linked into place, which fails on any
name already taken, link or not (write_new, create_new).

An output the user names (-o) is also refused, in one line naming it (BadFile, exit 2), where
something other than a regular file is there (a device such as /dev/full, a FIFO, a socket, a
folder: a rename would replace it, and the device or FIFO is gone) or its folder does not exist
(check_output); any other failure to write it names it too, never the temp file. A tool that
writes an output itself (apptainer, enroot) writes into a private folder beside it (aside_dir),
renamed into place once complete: a user's file of another name (OUT.part) is never touched.

Reading: only regular files (a FIFO would hang the reader, /dev/zero would fill memory), up to a
size bound, and JSON or TOML up to a depth bound (a document nested 100,000 deep would stop the
reader, and later any code that walks it, with RecursionError). Each rule raises `BadFile`, a
UsageError, so a reader of many files can skip one with a warning and a reader of one file
reports one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
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


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _named(path: Path, what: str) -> str:
    return f"{what + ' ' if what else ''}{path}"


def check_output(path: Path | str, what: str = "") -> Path:
    """PATH, an output the user named (WHAT: the option, e.g. "-o"), when hpcai may write it: a
    regular file there is replaced, nothing there is created. A link (refuse_link), anything else
    at PATH (a folder, a device, a FIFO, a socket: a rename would replace it) or a missing folder
    is a BadFile in one line naming PATH as the user gave it."""
    path = Path(path)
    refuse_link(path, what)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:  # ENOTDIR: a file where a folder of the path should be; EACCES
        raise BadFile(f"{_named(path, what)}: cannot be written ({exc.strerror or exc})") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise BadFile(f"{_named(path, what)}: is {kind}, which hpcai does not replace; give a file name")
    if not path.parent.is_dir():
        raise BadFile(f"{_named(path, what)}: cannot be written: the folder {path.parent} does not exist")
    return path


def _renamed(exc: OSError, path: Path) -> OSError:
    """EXC naming PATH, the user's name, rather than the temp file beside it."""
    return type(exc)(exc.errno, exc.strerror, str(path)) if exc.errno else exc


@contextlib.contextmanager
def aside_dir(output: Path | str, what: str = "") -> Iterator[Path]:
    """For a tool that writes OUTPUT itself (apptainer build, enroot import): check_output, then
    a new private folder beside it (mkdtemp: unique, 0700, `.NAME.XXXXXXXX.part`) and the path in
    it to give the tool (same name as OUTPUT). Once the block ends, that file is renamed over
    OUTPUT; the folder goes whatever happens (a failed step, Ctrl-C). Two conversions to one
    OUTPUT never share a temp file, and no other file beside OUTPUT (a user's OUTPUT.part) is
    touched."""
    import shutil

    output = check_output(output, what)
    folder = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".part", dir=output.parent))
    try:
        part = folder / output.name
        yield part
        check_output(output, what)  # still a file, or nothing: something else may have come since
        os.replace(part, output)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def umask() -> int:
    """The process's umask, read from /proc (Linux) rather than set and reset, which would race
    other threads creating files."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def user_mode() -> int:
    """The mode open() gives a new file: 0666 less the umask (for outputs the user shares, -o)."""
    return 0o666 & ~umask()


def _write_aside(path: Path, data: str | bytes, mode: int | None) -> str:
    """DATA in a new private temp file beside PATH (mkstemp: O_EXCL, so nothing planted is followed);
    its name. MODE (None: user_mode()) is set on the open file, before anyone can see it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, user_mode() if mode is None else mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_atomic(path: Path | str, data: str | bytes, mode: int | None = PRIVATE_FILE, what: str = "",
                 over_link: bool = False) -> None:
    """Write DATA as PATH's new content: a private temp file beside it, then a rename over it.
    MODE: the file's mode (default 0600; None: as open() would, 0666 less the umask). A name the
    user gave (default): check_output's rules (a link, a folder, a device, a FIFO or a socket at
    PATH, or no folder for it, is a BadFile naming PATH, WHAT naming the option), and an OSError
    names PATH, not the temp file. OVER_LINK: a name hpcai owns, where a link can only have been
    planted: whatever is there is replaced (default False)."""
    path = Path(path)
    if over_link:  # a name hpcai owns: whatever is there is replaced
        tmp = _write_aside(path, data, mode)
    else:  # a name the user gave: check_output's rules, and an error names PATH, never the temp file
        check_output(path, what)
        try:
            tmp = _write_aside(path, data, mode)
        except OSError as exc:
            raise _renamed(exc, path) from None
    try:
        if not over_link:
            check_output(path, what)  # again: a FIFO made while the data was written is kept too
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if over_link:
            raise
        raise _renamed(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_new(path: Path | str, data: str | bytes, mode: int | None = PRIVATE_FILE) -> None:
    """Write a file that must not exist yet, whole: aside, then hard-linked to PATH. link() never
    follows and never replaces, so a file or link already at PATH (a planted one, another run's)
    is a FileExistsError and nothing is written; a reader never sees half the file."""
    path = Path(path)
    tmp = _write_aside(path, data, mode)
    try:
        os.link(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def create_new(path: Path | str, mode: int = PRIVATE_FILE) -> int:
    """Open a file that must not exist yet, for writing: O_EXCL and O_NOFOLLOW, so neither a file nor
    a link planted at PATH is written through (FileExistsError names it)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)


def read_bytes(path: Path | str, limit: int = MAX_BYTES, name: str = "") -> bytes:
    """PATH's content, when it is a regular file (links to one are fine) of at most LIMIT bytes.
    NAME: how errors name the file (default: PATH). A missing or unreadable file is the OSError."""
    path = Path(path)
    name = name or str(path)
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadFile(f"{name}: not a regular file (a device, FIFO or socket); hpcai reads only files")
        if info.st_size > limit:
            raise BadFile(f"{name}: {info.st_size} bytes, over the {limit}-byte limit for this file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:  # grew while read
            raise BadFile(f"{name}: over the {limit}-byte limit for this file")
        return data
    finally:
        os.close(fd)


def read_text(path: Path | str, limit: int = MAX_BYTES, name: str = "") -> str:
    data = read_bytes(path, limit, name)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise BadFile(f"{name or path}: not UTF-8 text (byte {exc.start})") from None


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


def read_json(path: Path | str, limit: int = MAX_BYTES, max_depth: int = MAX_DEPTH, name: str = "") -> Any:
    return parse_json(read_text(path, limit, name), name or str(path), max_depth)


def parse_toml(text: str, source: str, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """TEXT as TOML: malformed TOML and nesting over MAX_DEPTH (arrays, inline tables, or dotted
    keys, which tomllib builds without recursing) are a BadFile naming SOURCE."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise BadFile(f"{source}: TOML nested deeper than {max_depth} levels") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadFile(f"{source}: malformed TOML: {exc}") from None
    if depth(value) > max_depth:
        raise BadFile(f"{source}: TOML nested deeper than {max_depth} levels")
    return value


def read_toml(path: Path | str, limit: int = MAX_BYTES, max_depth: int = MAX_DEPTH, name: str = "") -> dict[str, Any]:
    return parse_toml(read_text(path, limit, name), name or str(path), max_depth)


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
