"""Secrets are passed at run time and never shown. One rule, by name and by shape:

- a name that says so: TOKEN, KEY, SECRET, PASS(WORD), PASSWD, CREDENTIAL(S), AUTH,
  CONNECTION_STRING, PRIVATE, COOKIE (HF_TOKEN, WANDB_API_KEY, SMTP_PASS,
  AZURE_STORAGE_CONNECTION_STRING, …);
- a value that carries credentials: URL user-info (postgres://user:PW@host/db), or a connection
  string with AccountKey= / Password= / SharedAccessSignature= (DATABASE_URL, … whatever its name);
- in a command line, the value of a --password / --token / --api-key / --secret style flag,
  as `--flag=V` or `--flag V`.

Such environment values travel in the process environment, never in argv, files or output;
displays show REDACTED in their place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH|CONNECTION_?STRING|PRIVATE|COOKIE",
                         re.IGNORECASE)
# scheme://user:password@host — the password part; and Azure/ODBC-style key=value secrets.
# Every pattern here runs in linear time on a value of any length (issue 25: a 32 KB `-e` value
# took 10 s): each match may only start where a scan cannot be restarted one character later.
# The scheme used to be tried at every letter of a long word (quadratic); the lookbehind lets it
# start only at the start of a run of scheme characters, and the run's leading digits/+.- go into
# `head` (kept as they are), so what is redacted is exactly what it was.
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])(?P<head>[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)"
                       r"(?P<secret>[^/\s@]+)(?=@)")
_KV_SECRET = re.compile(r"(?P<head>(?:AccountKey|Password|Pwd|SharedAccessSignature|SharedAccessKey|Secret)=)"
                        r"(?P<secret>[^;\s]+)", re.IGNORECASE)
REDACTED = "***"


def is_secret(name: str) -> bool:
    """The name says the value is a secret."""
    return bool(SECRET_NAME.search(name))


def holds_secret(value: str) -> bool:
    """The value carries a credential whatever its name (URL user-info, AccountKey=…)."""
    return bool(_USERINFO.search(value) or _KV_SECRET.search(value))


def is_secret_pair(name: str, value: str) -> bool:
    return is_secret(name) or holds_secret(value)


def secret_items(env: Mapping[str, str]) -> dict[str, str]:
    """The entries of ENV that are secrets, by name or by value."""
    return {k: v for k, v in env.items() if is_secret_pair(k, v)}


def redact_value(value: str) -> str:
    """VALUE with embedded credentials replaced (the rest kept, so a URL stays readable)."""
    value = _USERINFO.sub(lambda m: m.group("head") + REDACTED, value)
    return _KV_SECRET.sub(lambda m: m.group("head") + REDACTED, value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if is_secret(k) else redact_value(v)) for k, v in env.items()}


# Command-line flags whose value is a secret: --password, --db-password, --token, --api-key,
# --secret-key, --access-key, --credentials … (not --pass, which hpcai-shim and others use for names)
_SECRET_FLAG = re.compile(r"^--?(?:[a-z0-9]+[-_])*(?:password|passwd|token|api[-_]?key|secret|secret[-_]key|"
                          r"access[-_]key|private[-_]key|credentials?)$", re.IGNORECASE)


def _secret_flag(token: str) -> bool:
    return bool(_SECRET_FLAG.match(token))


def redact_argv(argv: Iterable[str]) -> list[str]:
    """Redact `NAME=value` tokens (docker -e, APPTAINERENV_NAME=, --env=NAME=, --set-env=NAME=)
    whose NAME looks secret, `--password=value` and `--password value` flags, and credentials
    inside any token (URL user-info)."""
    out: list[str] = []
    hide_next = False
    for tok in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        head, sep, rest = tok.partition("=")
        # the part kept in front of a hidden value may itself hold a URL's password (a `sh -c`
        # string: "curl https://u:PW@h && X_TOKEN=v"), so it is redacted by shape too
        if sep and head.startswith("-"):  # a flag: --set-env=NAME=value or --api-key=value
            name, sep2, _ = rest.partition("=")
            if sep2 and is_secret(name):
                out.append(f"{redact_value(head)}={redact_value(name)}={REDACTED}")
            elif _secret_flag(head):
                out.append(f"{head}={REDACTED}")
            else:
                out.append(redact_value(tok))
        elif sep and is_secret(head):
            out.append(f"{redact_value(head)}={REDACTED}")
        elif not sep and _secret_flag(tok):
            out.append(tok)
            hide_next = True  # `--password VALUE`: the next token is the secret
        else:
            out.append(redact_value(tok))
    return out


def secret_flags(argv: Iterable[str]) -> list[str]:
    """The --password/--token style flags in a command, for a warning: their values are in argv."""
    return [tok.partition("=")[0] for tok in argv if _secret_flag(tok.partition("=")[0])]
