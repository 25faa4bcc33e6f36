"""Helpers shared by the parsers: the log as a stream of lines, bounded tables, number patterns, the
no-metrics error.

Real logs arrive through `srun --label` (`12: `), torchrun `--tee` (`[default3]:`) or Open MPI
`--tag-output` (`[1,3]<stdout>:`); every parser reads lines with those prefixes removed. Logs can
be hundreds of MB, so a parser sees them once, line by line (`LogLines`), and whatever it keeps
per line is bounded (`SizeTable`, `Rows`, `Capture`): memory does not grow with the log.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from hpcai.errors import UsageError

# Values may be printed in scientific notation (1.2e+03).
FP = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"

MAX_LINE = 1 << 18  # characters kept of one line (real ones are under a few kB); the rest is skipped
_CHUNK = 1 << 16  # characters read at a time (well under MAX_LINE: only long lines need cutting)
MAX_SIZES = 4096  # message sizes kept in a size table (a real sweep has tens)
LIMIT = 2000  # rows kept in a details list (steps, iterations): the first and the last half
MAX_DOC = 4 << 20  # characters of a JSON document read from a log (real ones are a few kB)

# A prefix follows a line break: the regex engine then jumps from one break to the next instead of
# trying every character, and one pass strips a whole block of lines (`_strip` adds the first break).
_PREFIXES = re.compile(
    r"\n(?:[^\S\n]*\d+:[ \t]?"  # srun --label (the spaces before it never span a line break)
    r"|\[default\d+\]:"  # torchrun --tee
    r"|\[\d+,\d+\]<std(?:out|err)>:[ \t]?"  # Open MPI --tag-output
    r")"
)


def _strip(text: str) -> str:
    """TEXT (one line or a block of them) with each line's launcher prefix removed. Every prefix
    holds a colon: a block without one (the bulk of a size table) skips the regex."""
    return _PREFIXES.sub("\n", "\n" + text)[1:] if ":" in text else text


class NoMetricsError(UsageError):
    """The log holds none of the lines this parser reads (wrong payload, empty, or a failed run)."""


class LogLines:
    """A log read once, as lines with launcher prefixes removed, a chunk at a time: memory holds one
    chunk and one line at most, whatever the log's size. Line breaks are `\\n`, `\\r\\n` or `\\r`
    (progress bars); a line longer than MAX_LINE keeps its first MAX_LINE characters (`cut` counts
    them). After the pass, `empty` says whether the log held nothing but whitespace."""

    def __init__(self, readers: Iterable[Callable[[int], str]]):
        self._readers = readers  # one read(n) per source; sources never run into each other
        self.empty = True
        self.cut = 0

    @classmethod
    def from_text(cls, text: str) -> LogLines:
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # what a file opened as text reads
        return cls([_slices(text)])

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> LogLines:
        return cls(_file_reader(p) for p in paths)

    def __iter__(self) -> Iterator[str]:
        for lines in self.blocks():  # a list per chunk: one generator step per line, not two
            yield from lines

    def blocks(self) -> Iterator[list[str]]:
        """The same lines, a list per chunk read: for a parser whose loop over a huge log must
        cost as little as possible per line (nccl-tests)."""
        for n, read in enumerate(self._readers):
            if n:
                yield [""]  # a file's last line never joins the next file's first
            yield from self._blocks(read)

    def _blocks(self, read: Callable[[int], str]) -> Iterator[list[str]]:
        """The lines of each chunk (the last, unfinished one waits for the next chunk)."""
        carry, skipping = "", False  # skipping: inside an over-long line, until its end
        while chunk := read(_CHUNK):
            if self.empty and not chunk.isspace():
                self.empty = False
            if skipping:
                end = chunk.find("\n")
                if end < 0:
                    continue
                chunk, skipping = chunk[end + 1:], False
            end = chunk.rfind("\n")
            if end < 0:  # no line ends here: the current one grows
                carry += chunk
                if len(carry) > MAX_LINE:
                    yield [_strip(self._cut(carry))]
                    carry, skipping = "", True
                continue
            block, carry = carry + chunk[:end], chunk[end + 1:]
            lines = _strip(block).split("\n")
            if len(block) > MAX_LINE:  # only then can one of its lines be too long
                lines = [self._cut(line) if len(line) > MAX_LINE else line for line in lines]
            yield lines
        if carry:
            yield [_strip(carry)]

    def _cut(self, line: str) -> str:
        self.cut += 1
        return line[:MAX_LINE]


def _slices(text: str) -> Callable[[int], str]:
    """read(n) over a string, as a file gives it."""
    pos = 0

    def read(n: int) -> str:
        nonlocal pos
        pos += n
        return text[pos - n:pos]

    return read


def _file_reader(path: Path) -> Callable[[int], str]:
    """read(n) over a log file; an I/O error is one line, not a traceback. Opened on first read,
    closed at its end (undecodable bytes become U+FFFD: a log is never refused for its encoding)."""
    stream: TextIO | None = None

    def read(n: int) -> str:
        nonlocal stream
        try:
            if stream is None:
                stream = open(path, encoding="utf-8", errors="replace")
            chunk = stream.read(n)
        except OSError as e:
            raise UsageError(f"cannot read log file {path}: {e.strerror or e}") from e
        if not chunk:
            stream.close()
        return chunk

    return read


class SizeTable:
    """A per-message-size table (nccl-tests, OSU, mpi-allreduce): the last row of each size, in the
    order the sizes first appear. A log that repeats its sweep (nccl-tests -N, reruns appended) keeps
    the last sweep's figures, as the payloads' in-image extractors read the last match; at most
    MAX_SIZES sizes are kept (`left_out` counts rows at further sizes)."""

    def __init__(self) -> None:
        self.rows: dict[int, Any] = {}
        self.left_out = 0

    def add(self, size: int, row: Any) -> bool:
        """Keep ROW for SIZE; False when the table is full and SIZE is new."""
        if size in self.rows or len(self.rows) < MAX_SIZES:
            self.rows[size] = row
            return True
        self.left_out += 1
        return False

    def warnings(self) -> list[str]:
        if not self.left_out:
            return []
        return [f"{self.left_out} rows at sizes beyond the first {MAX_SIZES} sizes are left out of the table "
                "and its metrics"]


class Rows:
    """A details list that grows with the log (training steps, iterations, repetitions): every row up
    to LIMIT, then the first and the last LIMIT // 2; `seen` counts them all."""

    def __init__(self) -> None:
        self._head: list[Any] = []
        self._tail: deque[Any] = deque(maxlen=LIMIT // 2)
        self.seen = 0

    def append(self, row: Any) -> None:
        self.seen += 1
        (self._head if len(self._head) < LIMIT // 2 else self._tail).append(row)

    def list(self) -> list[Any]:
        return self._head + list(self._tail)

    def warnings(self, what: str) -> list[str]:
        left_out = self.seen - len(self._head) - len(self._tail)
        if not left_out:
            return []
        return [f"{self.seen} {what} in the log: the first and last {LIMIT // 2} are kept, "
                f"{left_out} in between are left out"]


class AfterFirst:
    """Sums of named figures over every row but the first (warm-up, start-up), or over the first
    alone when it is the only one: what `rows[1:] or rows` gives, with no row kept."""

    def __init__(self) -> None:
        self._first: dict[str, float | None] | None = None
        self._sums: dict[str, list] = {}  # name -> [sum, count]
        self._later = 0

    def add(self, figures: dict[str, float | None]) -> None:
        """One row's figures (None where the row lacks one)."""
        if self._first is None:
            self._first = figures
            return
        self._later += 1
        for name, value in figures.items():
            if value is not None:
                total = self._sums.setdefault(name, [0.0, 0])
                total[0] += value
                total[1] += 1

    def _total(self, name: str) -> tuple[float, int]:
        if self._later:
            return tuple(self._sums.get(name, (0.0, 0)))
        value = self._first.get(name) if self._first else None
        return (value, 1) if value is not None else (0.0, 0)

    def sum(self, name: str) -> float | None:
        total, n = self._total(name)
        return total if n else None

    def mean(self, name: str) -> float | None:
        total, n = self._total(name)
        return total / n if n else None

    def mean_all(self, name: str) -> float | None:
        """The mean over every row, the first included (CARAML's JUBE result averages so)."""
        total, n = tuple(self._sums.get(name, (0.0, 0))) if self._later else (0.0, 0)
        first = self._first.get(name) if self._first else None
        if first is not None:
            total, n = total + first, n + 1
        return total / n if n else None


class Capture:
    """A JSON document printed into the log, from its opening character on (`leading`: only when
    the whole log is the document, i.e. its first non-blank character opens it). At most MAX_DOC
    characters: a longer one is dropped, `text` is then None and memory stays bounded."""

    def __init__(self, opening: str, leading: bool) -> None:
        self._opening, self._leading = opening, leading
        self._parts: list[str] | None = []  # None: no document, or dropped
        self._size = 0
        self.started = False

    def feed(self, line: str) -> None:
        if self._parts is None:
            return
        if not self.started:
            if self._leading:
                line = line.lstrip()
                if not line:
                    return  # blank lines before the document
                if not line.startswith(self._opening):
                    self._parts = None  # the log is not the document
                    return
            elif (start := line.find(self._opening)) >= 0:
                line = line[start:]
            else:
                return
            self.started = True
        self._size += len(line) + 1
        if self._size > MAX_DOC:
            self._parts = None
        else:
            self._parts.append(line)

    def drop(self) -> None:
        """Stop keeping the document (the parser found what it reads first)."""
        self._parts = None

    @property
    def text(self) -> str | None:
        return "\n".join(self._parts) if self.started and self._parts is not None else None


def to_float(text: str) -> float | None:
    """A number, or None for `N/A`, `-`, `nan` and friends (never a silent zero)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return None if value != value else value  # NaN -> None


def nothing_found(parser: str, expected: str, log: LogLines) -> NoMetricsError:
    if log.empty:
        return NoMetricsError(f"{parser}: the log is empty; expected {expected}")
    return NoMetricsError(
        f"{parser}: no {expected} found in the log (wrong payload, or the run failed before printing results)"
    )
