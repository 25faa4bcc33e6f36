"""Secrets are passed at run time and never shown: redact values of TOKEN/KEY/SECRET/PASSWORD names."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
REDACTED = "***"


def is_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if is_secret(k) else v) for k, v in env.items()}


def redact_argv(argv: Iterable[str]) -> list[str]:
    """Redact `NAME=value` tokens (docker -e, APPTAINERENV_NAME=, --env=NAME=, --set-env=NAME=)
    whose NAME looks secret, and `--password=value` style flags."""
    out = []
    for tok in argv:
        head, sep, rest = tok.partition("=")
        if sep and head.startswith("-"):  # a flag: --set-env=NAME=value or --api-key=value
            name, sep2, _ = rest.partition("=")
            if sep2 and is_secret(name):
                out.append(f"{head}={name}={REDACTED}")
            elif is_secret(head):
                out.append(f"{head}={REDACTED}")
            else:
                out.append(tok)
        elif sep and is_secret(head):
            out.append(f"{head}={REDACTED}")
        else:
            out.append(tok)
    return out
