"""Secrets are passed at run time and never shown. One rule, by name and by shape:

- a name that says so, read word by word (words split at `_`, `-`, `.`, anything not a letter or
  digit, and camelCase; trailing digits dropped): a word TOKEN, KEY, SECRET(S), PASS, PASSWORD,
  PASSWD, PASSPHRASE, PWD (not the name PWD alone, the working directory), PAT, CREDENTIAL(S),
  CREDS, AUTH, OAUTH, AUTHORIZATION, AUTHTOKEN, COOKIE(S), PRIVATE, APIKEY/ACCESSKEY/SECRETKEY/
  PRIVATEKEY, or CONNECTION STRING; or a word ending in TOKEN, PASSWORD, PASSWD, SECRET, APIKEY
  (HFTOKEN, DBPASSWORD). HF_TOKEN, API_TOKEN, GH_PAT, SMTP_PASS, WANDB_API_KEY, hfToken,
  AZURE_STORAGE_CONNECTION_STRING are secret; TOKENIZER, max_tokens (plural: a count),
  tokens_per_second, passes, keyboard, monkey, author, authority, SESSION_LEN, PATH are not.
  A word only counts as a whole word, so a name is never secret for a word inside a longer one.
  Not secret either, because the value is not the secret but something about it:
  - a name whose last word says it holds a path, an id, a size or an address (PASSWORD_FILE,
    HF_TOKEN_PATH, SSH_AUTH_SOCK, pad_token_id, KEY_LEN, AUTH_TYPE, AUTH_URL: _ABOUT below);
    PASSWORD_FILE=/run/secrets/db names where the secret is, and is shown;
  - a tokenizer's special token or a count (pad_token, eos_token, num_key, max_token: _COUNTED).
  SESSION alone is not a secret word (session_len); SESSION_TOKEN and SESSION_KEY are secret.
- a value that carries credentials whatever its name: URL user-info (postgres://user:PW@host/db),
  a connection string with AccountKey= / Password= / SharedAccessSignature=, an HTTP
  `Authorization: <scheme> X` header or `Bearer X`, and the well-known token formats: GitHub
  (ghp_ gho_ ghu_ ghs_ ghr_ github_pat_), Hugging Face (hf_), GitLab (glpat-), Slack (xoxb- xoxp-
  xoxa- xoxr- …), AWS access key ids (AKIA…, ASIA…), OpenAI/Anthropic-style long sk-… keys, and
  JSON Web Tokens (eyJ….eyJ….…);
- in a command line, the value of a --password / --token / --api-key / --secret style flag,
  as `--flag=V` or `--flag V`, and the word after a lone `Bearer`.

Such environment values travel in the process environment, never in argv, files or output;
displays show REDACTED in their place (a token keeps its kind: `ghp_***`, `Bearer ***`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# A name's words: split at anything but a letter or digit, and between camelCase words
# (hfToken, APIKey -> API Key, HTTPToken -> HTTP Token). Fixed-width lookarounds: linear.
_WORD_BREAK = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SECRET_WORDS = frozenset({
    "TOKEN", "KEY", "SECRET", "SECRETS", "PASS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "PWD",
    "PAT", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "OAUTH", "AUTHORIZATION", "AUTHTOKEN", "COOKIE",
    "COOKIES", "PRIVATE", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY", "CONNECTIONSTRING"})
_SECRET_ENDINGS = ("TOKEN", "PASSWORD", "PASSWD", "SECRET", "APIKEY")  # one word: HFTOKEN, DBPASSWORD
# What every secret word contains, searched in the upper-cased name (a case-insensitive search is
# five times slower on a 1 MB command line); _STEM_ANY_CASE for a name that is not ASCII, whose
# upper-casing may change its length. Only the text around a hit is split into words.
_STEM = re.compile(r"TOKEN|KEY|SECRET|PASS|PWD|PAT|CRED|AUTH|COOKIE|PRIVATE|STRING")
_STEM_ANY_CASE = re.compile(_STEM.pattern, re.IGNORECASE)
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
# a last word that makes the value something about a secret, not the secret
_ABOUT = frozenset({"FILE", "FILES", "FILENAME", "PATH", "PATHS", "DIR", "DIRS", "SOCK", "SOCKET", "ID", "IDS",
                    "LEN", "LENGTH", "SIZE", "COUNT", "NUM", "LIMIT", "BITS", "TYPE", "URL", "URI", "HOST",
                    "PORT", "USER", "USERNAME"})
# a word before it that makes TOKEN/KEY/PASS a vocabulary entry or a count, not a secret
_COUNTED = frozenset({"PAD", "EOS", "BOS", "UNK", "SEP", "MASK", "CLS", "SPECIAL", "START", "END", "NUM",
                      "MAX", "MIN", "N", "TOTAL"})
# scheme://user:password@host — the password part; and Azure/ODBC-style key=value secrets.
# Every pattern here runs in linear time on a value of any length (issue 25: a 32 KB `-e` value
# took 10 s): each match may only start where a scan cannot be restarted one character later.
# The scheme used to be tried at every letter of a long word (quadratic); the lookbehind lets it
# start only at the start of a run of scheme characters, and the run's leading digits/+.- go into
# `head` (kept as they are), so what is redacted is exactly what it was. `Pwd=` is a
# whole word (not OLDPWD=).
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])(?P<head>[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)"
                       r"(?P<secret>[^/\s@]+)(?=@)")
_KV_SECRET = re.compile(r"(?P<head>(?:AccountKey|Password|(?<![A-Za-z0-9])Pwd|SharedAccessSignature|"
                        r"SharedAccessKey|Secret)=)(?P<secret>[^;\s]+)", re.IGNORECASE)
# Well-known token formats, each starting only where a run of token characters starts (the
# lookbehind), its prefix kept as `head`; every body is one character class run, so a failed
# start costs at most that run and the next start is past it.
_TOKEN_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"(?P<gh>gh[pousr]_)[A-Za-z0-9]{20,}|(?P<ghpat>github_pat_)[A-Za-z0-9_]{20,}"
    r"|(?P<hf>hf_)[A-Za-z0-9]{30,}|(?P<gl>glpat-)[A-Za-z0-9_-]{20,}|(?P<slack>xox[abposr]-)[A-Za-z0-9-]{10,}"
    r"|(?P<sk>sk-)[A-Za-z0-9_-]{32,}|(?P<aws>A[KS]IA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|(?P<jwt>eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)")
_TOKEN_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "glpat-", "xox", "sk-", "AKIA",
                   "ASIA", "eyJ")
# `Authorization: Bearer X` (any scheme, or none), and `Bearer X` on its own; bounded blanks.
_AUTH_HEADER = re.compile(r"(?<![A-Za-z0-9_-])(?P<head>(?:Proxy-)?Authorization[ \t]{0,16}:[ \t]{0,16}"
                          r"(?:[A-Za-z]{1,32}[ \t]{1,16})?)(?P<secret>[^\s\"',;]+)", re.IGNORECASE)
_BEARER = re.compile(r"(?<![A-Za-z0-9_-])(?P<head>Bearer[ \t]{1,16})(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
                     re.IGNORECASE)
REDACTED = "***"


def _words(text: str) -> list[str]:
    words = (w.upper().rstrip("0123456789") for w in _WORD_BREAK.split(text))
    return [w for w in words if w]


def is_secret(name: str) -> bool:
    """The name says the value is a secret: one of its words is a secret word (module doc).

    Linear on a name of any length (a `sh -c` string's text before its first '='): each hit of a
    stem is read with its run of letters and digits and the 64 characters before it (a word that
    decides is shorter), and the search goes on after that run."""
    last = _words(name[-64:])[-1:]
    if not last or last[0] in _ABOUT or (len(name) < 64 and _words(name) == ["PWD"]):
        return False
    text, stem = (name.upper(), _STEM) if name.isascii() else (name, _STEM_ANY_CASE)
    done, before = 0, ""  # where the last window ended, and its last word
    while (hit := stem.search(text, done)) is not None:
        start = max(done, hit.start() - 64)
        before = before if start == done else ""
        stop = _NOT_ALNUM.search(name, hit.end())
        done = stop.start() if stop else len(name)
        for word in _words(name[start:done]):
            if before not in _COUNTED and (word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS)):
                return True
            if before == "CONNECTION" and word == "STRING":
                return True
            before = word
    return False


def _patterns(value: str) -> list[re.Pattern[str]]:
    """The patterns that can match VALUE: each needs a fixed piece of text, looked for first (a
    plain substring test, far faster on a long value than the pattern's own scan)."""
    low = value.lower()
    return [p for p, needed in ((_USERINFO, "://" in value), (_KV_SECRET, "=" in value),
                                (_AUTH_HEADER, "authorization" in low), (_BEARER, "bearer" in low),
                                (_TOKEN_SHAPE, any(s in value for s in _TOKEN_PREFIXES))) if needed]


def holds_secret(value: str) -> bool:
    """The value carries a credential whatever its name (URL user-info, AccountKey=…, a token's
    well-known shape, an Authorization header)."""
    return any(p.search(value) for p in _patterns(value))


def is_secret_pair(name: str, value: str) -> bool:
    return is_secret(name) or holds_secret(value)


def secret_items(env: Mapping[str, str]) -> dict[str, str]:
    """The entries of ENV that are secrets, by name or by value."""
    return {k: v for k, v in env.items() if is_secret_pair(k, v)}


def _head(match: re.Match[str]) -> str:
    return match.group("head") + REDACTED


def _kept_head(match: re.Match[str]) -> str:  # a token's kind: ghp_***, eyJ***
    return next(h for h in match.groups() if h is not None) + REDACTED


def redact_value(value: str) -> str:
    """VALUE with embedded credentials replaced (the rest kept, so a URL stays readable)."""
    for pattern in _patterns(value):  # in this order: user-info, key=value, header, Bearer, shape
        value = pattern.sub(_kept_head if pattern is _TOKEN_SHAPE else _head, value)
    return value


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if is_secret(k) else redact_value(v)) for k, v in env.items()}


# Command-line flags whose value is a secret: --password, --db-password, --token, --api-key,
# --secret-key, --access-key, --credentials … (not --pass, which hpcai-shim and others use for names)
_SECRET_FLAG = re.compile(r"^--?(?:[a-z0-9]+[-_])*(?:password|passwd|passphrase|token|api[-_]?key|secret|"
                          r"secret[-_]key|access[-_]key|private[-_]key|credentials?)$", re.IGNORECASE)


def _secret_flag(token: str) -> bool:
    return bool(_SECRET_FLAG.match(token))


def redact_argv(argv: Iterable[str]) -> list[str]:
    """Redact `NAME=value` tokens (docker -e, APPTAINERENV_NAME=, --env=NAME=, --set-env=NAME=)
    whose NAME looks secret, `--password=value` and `--password value` flags, the word after a
    lone `Bearer`, and credentials inside any token (URL user-info, token shapes, headers)."""
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
        elif not sep and (_secret_flag(tok) or tok.lower() == "bearer"):
            out.append(tok)
            hide_next = True  # `--password VALUE`, `Bearer VALUE`: the next token is the secret
        else:
            out.append(redact_value(tok))
    return out


def secret_flags(argv: Iterable[str]) -> list[str]:
    """The --password/--token style flags in a command, for a warning: their values are in argv."""
    return [tok.partition("=")[0] for tok in argv if _secret_flag(tok.partition("=")[0])]
