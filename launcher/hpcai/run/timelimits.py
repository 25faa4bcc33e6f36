"""Slurm's time-limit forms (what --time takes, and what hpcai passes on) in seconds: the one
reading of them for the schedulers that want another form (slurmrestd: minutes; PBS: hh:mm:ss)."""

from __future__ import annotations

import re

from hpcai.errors import UsageError

TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def seconds(limit: str) -> int:
    """M, M:S, H:M:S, D-H, D-H:M or D-H:M:S, as sbatch --time reads them, in seconds."""
    m = TIME.fullmatch(limit.strip())
    if not m:
        raise UsageError(f"--time {limit!r}: not a time Slurm takes (minutes, HH:MM:SS, D-HH[:MM[:SS]])")
    days, first, second, third = (int(x) if x else 0 for x in m.groups())
    if m.group(1):  # D-H[:M[:S]]
        return ((days * 24 + first) * 60 + second) * 60 + third
    if m.group(4):  # H:M:S
        return (first * 60 + second) * 60 + third
    return first * 60 + second  # M or M:S


def minutes(limit: str) -> int:
    """Whole minutes, rounded up (slurmrestd's time_limit)."""
    return max(1, -(-seconds(limit) // 60))


def hms(limit: str) -> str:
    """HH:MM:SS (PBS's walltime)."""
    total = seconds(limit)
    return f"{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"
