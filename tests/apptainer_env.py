r"""Apptainer's record of a Docker/OCI base image's ENV, emulated, and the %post preambles of a def.

When Apptainer bootstraps from a Docker/OCI image (docker, docker-daemon, docker-archive, oci, …)
it writes the image config's Env to /.singularity.d/env/10-docker2singularity.sh. `docker_env_script`
writes that file as Apptainer 1.x does, from apptainer/apptainer
internal/pkg/build/sources/conveyorPacker_oci.go, `insertEnv`:

    for _, element := range cp.imgConfig.Env {
        envParts := strings.SplitN(element, "=", 2)
        if len(envParts) == 1 {
            export = fmt.Sprintf("export %s=\"${%s:-}\"\n", envParts[0], envParts[0])
        } else {
            if envParts[0] == "PATH" {
                export = fmt.Sprintf("export %s=%q\n", envParts[0], shell.Escape(envParts[1]))
            } else {
                export = fmt.Sprintf("export %s=\"${%s:-%q}\"\n", envParts[0], envParts[0], shell.Escape(envParts[1]))
            }
        }

after a first line `#!/bin/sh`, where shell.Escape (internal/pkg/util/shell/escape.go) puts a
backslash before each of \ " ` $, and %q is Go's strconv.Quote. So an image with ENV LANG=C.UTF-8
gets `export LANG="${LANG:-"C.UTF-8"}"` and PATH is set outright: `export PATH="/usr/local/bin:…"`.
"""

from __future__ import annotations

import re
import shlex

DOCKER_ENV_FILE = "/.singularity.d/env/10-docker2singularity.sh"
# The line each %post block of a def starts with (apptainer/fragments/post-env.j2).
SOURCE_LINE = f"if [ -f {DOCKER_ENV_FILE} ]; then . {DOCKER_ENV_FILE}; fi"

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               "\\": "\\\\", '"': '\\"'}


def go_quote(s: str) -> str:
    """Go's strconv.Quote: double quotes, with \\ and " escaped and non-printable characters
    written as Go escapes (\\n, \\x1b, \\u200b …); printable UTF-8 is kept as it is."""
    out = []
    for ch in s:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def shell_escape(s: str) -> str:
    """Apptainer's shell.Escape: a backslash before each \\ " ` and $."""
    for ch in ("\\", '"', "`", "$"):
        s = s.replace(ch, "\\" + ch)
    return s


def docker_env_script(env: list[str]) -> str:
    """The 10-docker2singularity.sh Apptainer writes for an image config's Env list."""
    lines = ["#!/bin/sh"]
    for element in env:
        name, sep, value = element.partition("=")
        if not sep:
            lines.append(f'export {name}="${{{name}:-}}"')
        elif name == "PATH":
            lines.append(f"export PATH={go_quote(shell_escape(value))}")
        else:
            lines.append(f'export {name}="${{{name}:-{go_quote(shell_escape(value))}}}"')
    return "\n".join(lines) + "\n"


def post_blocks(def_text: str) -> list[list[str]]:
    """The lines of each %post section of a def, in order (a section ends at the next `%section`
    or `Bootstrap:` header)."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in def_text.splitlines():
        if line.startswith("%") or line.startswith("Bootstrap:"):
            current = [] if line.strip() == "%post" else None
            if current is not None:
                blocks.append(current)
        elif current is not None:
            current.append(line)
    return blocks


def preamble(block: list[str]) -> list[str]:
    """What a %post block runs before its first install step (`# Step:`), stripped: the source
    line and `export`s only, so a test can run it anywhere."""
    lines = []
    for line in block:
        text = line.strip()
        if text.startswith("# Step:"):
            return lines
        if text and text != SOURCE_LINE and not re.match(r"export [A-Za-z_][A-Za-z0-9_]*=", text):
            raise ValueError(f"unexpected line in a %post preamble: {text!r}")
        if text:
            lines.append(text)
    raise ValueError("a %post block with no `# Step:` line")


def with_env_file(lines: list[str], path: str) -> str:
    """The preamble as one script, its env file read from `path` instead of DOCKER_ENV_FILE."""
    return "\n".join(line.replace(DOCKER_ENV_FILE, shlex.quote(path)) for line in lines) + "\n"


def parse_env(text: str) -> dict[str, str]:
    """`env` output as a dict (values here hold no newlines)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
