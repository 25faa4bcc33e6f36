"""Errors that the CLI turns into one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

from collections.abc import Iterable

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: launch imports this module
if TYPE_CHECKING:
    from re import Pattern


class HpcaiError(Exception):
    """A failure with a message meant for the user. `exit_code` 2 means bad input."""

    exit_code = 1


class UsageError(HpcaiError):
    """Bad input: unknown name, malformed file, missing path. Exit code 2."""

    exit_code = 2


def unknown(kind: str, value: str, valid: Iterable[str]) -> UsageError:
    """`unknown flavor 'x'; valid: a, b, c` — the standard message for a bad choice."""
    choices = ", ".join(sorted(valid))
    return UsageError(f"unknown {kind} {value!r}; valid: {choices}")


def has_control(text: str) -> bool:
    """Any control character, line breaks and tabs included: what a value written on one line of
    a generated script (or one srun option) must not hold."""
    return any(ord(c) < 32 or 127 <= ord(c) <= 159 for c in text)


def one_line(what: str, value: object) -> str:
    """`value` as text, or a UsageError naming `what` (the option, or the file and key) when it
    holds a control character: the first rule for every value written into a generated file
    (Dockerfile, Apptainer definition, batch script) or a scheduler option, where a line break
    would start a new instruction or command."""
    text = str(value)
    if has_control(text):
        raise UsageError(f"{what} {text!r}: control characters (newline, tab, escape) cannot be part of it "
                         "(it is written on one line of a generated file or command)")
    return text


def operand(what: str, value: object) -> str:
    """`value` as an operand of a command's token list (an image, a file, a tag after the
    options), never read as an option: the one rule for every user value placed where a command
    reads options. Text starting with '-' (`--privileged`, `--mount=…`, `-`) is a UsageError
    naming `what`. A path (PurePath) is never refused: pathlib drops the './' of `./-x.sif`, so
    one starting with '-' is given as ./PATH, the same file."""
    from pathlib import PurePath

    text = str(value)
    if not text.startswith("-"):
        return text
    if isinstance(value, PurePath):
        return f"./{text}"
    raise UsageError(f"{what} {text!r}: starts with '-', which the command it is passed to would read as an "
                     f"option; give another (a file of that name is ./{text})")


def shaped(what: str, value: object, pattern: Pattern[str], shape: str) -> str:
    """one_line, then the value's own grammar: `pattern` must match all of it, else a UsageError
    naming `what` and showing the valid `shape`."""
    text = one_line(what, value)
    if not pattern.fullmatch(text):
        raise UsageError(f"{what} {text!r}: expected {shape}")
    return text
