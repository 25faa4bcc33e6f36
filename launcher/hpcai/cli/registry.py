"""CLI commands: `hpcai login REGISTRY` (one secret for every runtime: hpcai.registry_login) and
`hpcai push IMAGE REGISTRY/REPO[:TAG]` (an engine's image, a SIF or a SquashFS, named by digest)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

PANEL = "Images"
PASSWORD_ENV = "HPCAI_REGISTRY_PASSWORD"


def _password(password_file: Optional[Path]) -> str:
    """The secret: --password-file (`-`: stdin), else $HPCAI_REGISTRY_PASSWORD, else a prompt."""
    import os

    from hpcai.errors import UsageError

    if password_file is not None:
        try:
            text = sys.stdin.read() if str(password_file) == "-" else password_file.read_text()
        except OSError as exc:
            raise UsageError(f"--password-file {password_file}: {exc.strerror or exc}") from None
        secret = text.rstrip("\n")
    elif os.environ.get(PASSWORD_ENV):
        secret = os.environ[PASSWORD_ENV]
    elif sys.stdin.isatty():
        import getpass

        secret = getpass.getpass("password: ")
    else:
        raise UsageError(f"no password: give --password-file FILE (- for stdin), set {PASSWORD_ENV}, or run "
                         "on a terminal to be asked")
    if not secret or "\n" in secret:
        raise UsageError("the password is empty or more than one line")
    return secret


def login_cmd(
    registry: str = typer.Argument(..., help="Registry host[:port], e.g. registry.example.org or localhost:5443."),
    username: str = typer.Option(..., "--username", "-u", help="User name (a token's user for token logins)."),
    password_file: Optional[Path] = typer.Option(None, "--password-file", metavar="FILE",
                                                 help=f"Read the password from FILE (- for stdin); else "
                                                      f"${PASSWORD_ENV}, else a prompt. Never an argument."),
    runtimes: Optional[str] = typer.Option(None, "--runtimes", metavar="LIST",
                                           help="Comma-separated: docker, podman, apptainer, enroot "
                                                "(default: those installed)."),
) -> None:
    """Log in to a registry once for every runtime: the secret is checked against the registry,
    then written where docker, podman, Apptainer and enroot read credentials."""
    from hpcai import registry_login as rl
    from hpcai.errors import UsageError, unknown
    from hpcai.output import say

    rl.check_names(registry, username)
    chosen = [r.strip() for r in runtimes.split(",")] if runtimes else rl.installed()
    for name in chosen:
        if name not in rl.RUNTIMES:
            raise unknown("runtime", name, rl.RUNTIMES)
    if not chosen:
        raise UsageError(f"none of {', '.join(rl.RUNTIMES)} is installed here: nothing to log in with")
    secret = _password(password_file)
    rl.verify(registry, username, secret)  # before anything is written
    for line in rl.write(registry, username, secret, chosen):
        say(line)


def push_cmd(
    image: str = typer.Argument(..., help="Local image of the engine (tag or id), or a .sif / .sqsh file."),
    dest: str = typer.Argument(..., metavar="REGISTRY/REPO[:TAG]", help="Where to push (default tag: IMAGE's)."),
    builder: Optional[str] = typer.Option(None, "--builder", envvar="DOCKER", help="docker | podman"),
    as_json: bool = typer.Option(False, "--json", help="Print the reference and digest as JSON."),
) -> None:
    """Push an image to a registry and print the reference by digest, the name to launch on many
    nodes (a tag can be pushed over; a digest cannot). An engine's image goes through the engine
    and its login; a SIF goes as Apptainer's oras:// artifact and a SquashFS as an hpcai artifact,
    with the credentials `hpcai login` stored."""
    from hpcai.image import artifacts, build, push
    from hpcai.output import emit, emit_json

    kind = artifacts.file_kind(image)
    name = None if kind else build.builder_name(builder, ("docker", "podman"))
    target = push.destination(dest, Path(image).stem if kind else image)
    if name:
        build.check_engine(name)
        digest = push.push(name, image, target)
    else:
        digest = push.push_file(Path(image), kind, target)
    pull = ("oras://" if kind == "sif" else "") + target.at(digest)
    if as_json:
        emit_json({"image": image, "kind": kind or "oci", "reference": target.reference, "digest": digest,
                   "pull": pull})
    else:
        emit(pull)


def register(app: typer.Typer) -> None:
    """Add `login` and `push` to the top-level app."""
    app.command("login", rich_help_panel=PANEL)(login_cmd)
    app.command("push", rich_help_panel=PANEL)(push_cmd)
