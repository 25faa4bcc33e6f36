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
    """Redact `NAME=value` tokens (docker -e, --env, --set-env) whose NAME looks secret."""
    out = []
    for tok in argv:
        name, sep, _ = tok.partition("=")
        # `--env=NAME=value` style: look at the last name before the value.
        bare = name.rsplit("=", 1)[-1].lstrip("-")
        if sep and is_secret(bare) and not bare.startswith("-"):
            out.append(f"{name}={REDACTED}")
        else:
            out.append(tok)
    return out
