"""The one way a value enters a Dockerfile or an Apptainer definition (render.py's templates call
its filters): control characters refused, naming where the value came from; each value quoted for
where it lands, or, where a format has no quoting (FROM, COPY, %files), one plain word."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from hpcai.errors import UsageError, one_line, shaped


class Written(str):
    """Text a Writer filter produced: already checked and quoted, so `finalize` lets it through."""


WORD = re.compile(r"[A-Za-z0-9._/:@+-]+")
WORD_SHAPE = "one word of letters, digits and . _ / : @ + - (no spaces, quotes, $ or shell syntax)"
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")  # ENV and LABEL keys
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # shell `export NAME=`


class Writer:
    """The one way a template writes a value into a Dockerfile (fmt "docker") or def ("apptainer").

    Each filter takes the value and `what` — the option, or the file and key, it came from — so a
    refusal is one line that says where to look. Every filter first applies `text`: no control
    characters (a line break would start a new instruction, or a command in RUN/%post), and in a
    def no `{{`/`}}` (Apptainer reads them as build arguments, even inside quotes). `finalize`
    applies the same to anything a template writes without a filter.
    """

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def filters(self) -> dict:
        return {"text": self.text, "word": self.word, "sh": self.sh, "dq": self.dq, "kv": self.kv,
                "shdq": self.shdq, "key": self.key, "env_name": self.env_name}

    def finalize(self, value: object) -> object:
        return value if isinstance(value, Written) else self.text(value, f"a value in the {self.fmt} file")

    def text(self, value: object, what: str = "a value") -> Written:
        """A comment, %labels value or %help line: any text on one line."""
        text = one_line(what, value)
        if self.fmt == "apptainer" and ("{{" in text or "}}" in text):
            raise UsageError(f"{what} {text!r}: an Apptainer definition reads {{{{ and }}}} as a build argument")
        return Written(text)

    def _shaped(self, value: object, what: str, pattern: re.Pattern[str], shape: str) -> Written:
        """`text`, then the value's grammar (errors.shaped, the rule the spec's options use too)."""
        return Written(shaped(what, self.text(value, what), pattern, shape))

    def word(self, value: object, what: str = "a value") -> Written:
        """Where the format has no quoting (FROM, COPY, %files, Bootstrap/From:): one plain word."""
        return self._shaped(value, what, WORD, WORD_SHAPE)

    def key(self, value: object, what: str = "a key") -> Written:
        return self._shaped(value, what, KEY, "a key of letters, digits, _ . -")

    def env_name(self, value: object, what: str = "a variable name") -> Written:
        return self._shaped(value, what, ENV_NAME, "a variable name (letters, digits, _)")

    def sh(self, value: str | Sequence[str], what: str = "a value") -> Written:
        """Shell words for RUN and %post (`Format: RUN /opt/hpcai-build/install/x.sh 'a b'`): each
        shlex-quoted, so a word like `x.sh; curl …|sh` stays one argument."""
        words = [value] if isinstance(value, str) else list(value)
        return Written(" ".join(shlex.quote(self.text(w, what)) for w in words))

    def dq(self, value: object, what: str = "a value", live: bool = False) -> Written:
        """A Dockerfile ENV/LABEL value, double-quoted (`Format: K="v"`): backslash and quote
        escaped, and `$` too unless `live` (values render.py composes itself, like PATH=…:$PATH)."""
        text = self.text(value, what).replace("\\", "\\\\").replace('"', '\\"')
        return Written('"' + (text if live else text.replace("$", "\\$")) + '"')

    def kv(self, items: Mapping[str, object], indent: int = 4, live: bool = False) -> Written:
        """`K="v" \\` continuation lines for one ENV or LABEL instruction."""
        lines = (f"{self.key(k)}={self.dq(v, k, live)}" for k, v in items.items())
        return Written((" \\\n" + " " * indent).join(lines))

    def shdq(self, value: object, what: str = "a value") -> Written:
        """A def %environment value in double quotes that keeps `$NAME`/`${NAME…}` live (values
        render.py composes itself): backslash, quote, backtick and `$(` escaped."""
        text = self.text(value, what)
        for ch in ("\\", '"', "`"):
            text = text.replace(ch, "\\" + ch)
        return Written('"' + text.replace("$(", "\\$(") + '"')
