"""`hpcai login REGISTRY`: one secret, checked against the registry once, then written where each
runtime reads its credentials, so that docker, podman, Apptainer and enroot pull from that
registry alike (enroot #8, #99; pyxis users set up each one by hand today).

The secret comes from a prompt, a file (--password-file) or HPCAI_REGISTRY_PASSWORD; it never
reaches argv, a log or a record: each engine's own `login` reads it on stdin, and enroot's netrc
is written by hpcai (0600, atomically). It is checked first (the registry's /v2/ with basic auth,
or the bearer-token exchange its 401 asks for): a wrong password, an expired token or a registry
that does not answer is one line, and nothing is written.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import ssl
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError, one_line

REGISTRY = re.compile(r"(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+(?=:))(?::[0-9]{1,5})?")
USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,254}")
RUNTIMES = ("docker", "podman", "apptainer", "enroot")  # the order they are written in
TIMEOUT = 20


def check_names(registry: str, username: str) -> None:
    if not REGISTRY.fullmatch(one_line("REGISTRY", registry)):
        raise UsageError(f"registry {registry!r}: expected a host with a dot, a port or localhost "
                         "(e.g. registry.example.org or localhost:5443), no scheme or path")
    if not USER.fullmatch(one_line("--username", username)):
        raise UsageError(f"--username {username!r}: expected letters, digits and . _ @ + -")


def verify(registry: str, username: str, password: str) -> None:
    """The registry accepts USERNAME/PASSWORD, else HpcaiError (exit 1) saying why in one line."""
    basic = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
    try:
        _get(f"https://{registry}/v2/", basic)
        return
    except urllib.error.HTTPError as exc:
        if exc.code != 401:
            raise HpcaiError(f"login to {registry}: the registry answered {exc.code} {exc.reason}") from None
        challenge = exc.headers.get("WWW-Authenticate", "")
    if not challenge.lower().startswith("bearer "):
        raise HpcaiError(f"login to {registry}: the registry refused {username!r}: wrong password or "
                         "expired token") from None
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
    try:
        _get(f"{params.get('realm', '')}?{query}", basic)
    except urllib.error.HTTPError as exc:
        raise HpcaiError(f"login to {registry}: the token service refused {username!r} ({exc.code}): wrong "
                         "password or expired token") from None


def _get(url: str, authorization: str, doing: str = "login to") -> None:
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=ssl.create_default_context()):
            pass
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        host = urllib.parse.urlsplit(url).netloc
        raise HpcaiError(f"{doing} {host}: the registry does not answer ({reason})".lstrip()) from None


def challenge(registry: str) -> str:
    """How REGISTRY asks for credentials: "basic", "bearer", or "" where /v2/ is open to anyone;
    HpcaiError (one line) where it does not answer."""
    try:
        _get(f"https://{registry}/v2/", "", doing="")
        return ""
    except urllib.error.HTTPError as exc:
        scheme = exc.headers.get("WWW-Authenticate", "").split(" ", 1)[0].lower()
        if exc.code != 401 or scheme not in ("basic", "bearer"):
            raise HpcaiError(f"{registry}: the registry answered {exc.code} {exc.reason}") from None
        return scheme


def credentials(registry: str) -> tuple[str, str] | None:
    """The user and secret stored for REGISTRY by `hpcai login` (or a runtime's own login): docker's,
    podman's or Apptainer's auth file, else enroot's netrc; None where there is none. For hpcai's
    own registry calls (artifact push and pull, digests): never put on a command line."""
    for path in _auth_files():
        try:
            entry = json.loads(path.read_text()).get("auths", {}).get(registry, {})
            user, _, secret = base64.b64decode(entry.get("auth", "")).decode().partition(":")
        except (OSError, ValueError, AttributeError, UnicodeDecodeError):
            continue
        if user and secret:
            return user, secret
    try:
        lines = enroot_credentials().read_text().splitlines()
    except OSError:
        return None
    host = registry.split(":")[0]
    for line in lines:
        words = line.split()
        if words[:2] == ["machine", host] and len(words) >= 6 and words[2] == "login" and words[4] == "password":
            return words[3], words[5]
    return None


def _auth_files() -> list[Path]:
    """docker's config.json, podman's auth.json, Apptainer's docker-config.json (its registry logins)."""
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR")  # podman's default: there, else /run/containers/UID
    podman = os.environ.get("REGISTRY_AUTH_FILE") or (str(Path(runtime_dir) / "containers" / "auth.json")
                                                      if runtime_dir else f"/run/containers/{os.getuid()}/auth.json")
    return [Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json", Path(podman),
            Path.home() / ".apptainer" / "docker-config.json"]


def installed(runtimes: tuple[str, ...] = RUNTIMES) -> list[str]:
    return [r for r in runtimes if shutil.which(r)]


def write(registry: str, username: str, password: str, runtimes: list[str]) -> list[str]:
    """Write the credentials for each of RUNTIMES; the lines to say (where each went)."""
    said = []
    for runtime in runtimes:
        if runtime == "enroot":
            said.append(f"enroot: {_write_netrc(registry, username, password)}")
            continue
        argv = {"docker": ["docker", "login", "-u", username, "--password-stdin", registry],
                "podman": ["podman", "login", "-u", username, "--password-stdin", registry],
                "apptainer": ["apptainer", "registry", "login", "-u", username, "--password-stdin",
                              f"docker://{registry}"]}[runtime]
        res = subprocess.run(argv, input=password, capture_output=True, text=True, check=False, timeout=120)
        if res.returncode != 0:
            last = [ln for ln in (res.stderr or res.stdout).splitlines() if ln.strip()][-1:] or ["(no message)"]
            raise HpcaiError(f"{runtime} login to {registry} failed: {last[0].strip()}")
        said.append(f"{runtime}: logged in")
    return said


def enroot_credentials() -> Path:
    """enroot's netrc: $ENROOT_CONFIG_PATH/.credentials (its default: ~/.config/enroot)."""
    config = os.environ.get("ENROOT_CONFIG_PATH") or str(Path.home() / ".config" / "enroot")
    return Path(config) / ".credentials"


def _write_netrc(registry: str, username: str, password: str) -> str:
    """enroot reads `machine HOST login USER password SECRET` lines; this registry's line replaced,
    the others kept, the file 0600. A password with a space or a quote cannot be written as netrc."""
    if any(c.isspace() or c in "\"'#" for c in password):
        raise UsageError("the password holds a space, a quote or #, which enroot's netrc file cannot hold")
    from hpcai import files

    path = enroot_credentials()
    host = registry.split(":")[0]  # curl matches a netrc machine by host name, without the port
    kept = [ln for ln in (path.read_text().splitlines() if path.is_file() else [])
            if ln.split()[:2] != ["machine", host]]
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    files.write_atomic(path, "\n".join([*kept, f"machine {host} login {username} password {password}"]) + "\n",
                       over_link=True)
    return f"wrote {path}"


def logged_in(registry: str | None = None) -> dict[str, list[str]]:
    """Which registries each runtime holds credentials for (names only, never a secret)."""
    found: dict[str, list[str]] = {}
    docker_config, podman_auth, _ = _auth_files()
    for runtime, path in (("docker", docker_config), ("podman", podman_auth)):
        try:
            found[runtime] = sorted(json.loads(path.read_text()).get("auths", {}))
        except (OSError, ValueError, AttributeError):
            found[runtime] = []
    try:  # Apptainer lists its registry logins in remote.yaml (`URI: docker://HOST`)
        text = (Path.home() / ".apptainer" / "remote.yaml").read_text()
    except OSError:
        text = ""
    found["apptainer"] = sorted(set(re.findall(r"URI:\s*(?:docker|oras)://(\S+)", text)))
    try:
        lines = enroot_credentials().read_text().splitlines()
    except OSError:
        lines = []
    found["enroot"] = sorted({ln.split()[1] for ln in lines if ln.split()[:1] == ["machine"] and len(ln.split()) > 1})
    if registry:
        return {r: [x for x in hosts if x.removeprefix("https://").startswith(registry.split(":")[0])]
                for r, hosts in found.items()}
    return found
