"""`hpcai push IMAGE REGISTRY/REPO[:TAG]`: publish a built image to a registry and name it by its
digest, the one name that cannot move (a tag can be pushed over; `repo@sha256:…` cannot).

An OCI image goes through the engine that holds it (docker or podman: `tag`, then `push`), with
the engine's own credentials (`docker login` / `podman login`). The digest is the registry's
manifest digest, as the engine reports it (docker's `digest: sha256:…` line, podman's
--digestfile); pulling `REGISTRY/REPO@DIGEST` back gives the same image with its hpcai.* labels
(tests/integration/test_registry_push.py pulls it with docker, podman, Apptainer, enroot and
Charliecloud). Podman pushes Docker's manifest format (v2s2), as docker does: enroot 4.1.2 asks
for a manifest without naming OCI's media type, and a distribution registry answers 404 for an OCI
manifest then, so enroot and pyxis could not pull a Podman-pushed OCI image at all.

A SIF or a SquashFS file goes up as an artifact (hpcai.image.artifacts), its labels as the
manifest's annotations.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hpcai.errors import HpcaiError, UsageError, one_line

# The distribution reference grammar (github.com/distribution/reference): a registry host
# (a dot, a port or `localhost`, so `user/repo` is never mistaken for one), path components of
# lower-case letters and digits joined by . _ __ or -, an optional tag.
_HOST = r"(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+(?=:))(?::[0-9]{1,5})?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
DESTINATION = re.compile(rf"(?P<registry>{_HOST})/(?P<repo>{_COMPONENT}(?:/{_COMPONENT})*)(?::(?P<tag>[\w][\w.-]{{0,127}}))?")
DESTINATION_SHAPE = ("REGISTRY/REPO[:TAG], a registry host (with a dot or a port, or localhost) and a "
                     "repository path of lower-case names, e.g. registry.example.org:5000/team/pytorch:25.11")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Destination:
    registry: str
    repo: str
    tag: str

    @property
    def reference(self) -> str:
        return f"{self.registry}/{self.repo}:{self.tag}"

    def at(self, digest: str) -> str:
        """The reference by digest: what a launch on many nodes should pull."""
        return f"{self.registry}/{self.repo}@{digest}"


def destination(text: str, image: str) -> Destination:
    """REGISTRY/REPO[:TAG], checked; without a tag, IMAGE's own tag (else `latest`)."""
    match = DESTINATION.fullmatch(one_line("destination", text))
    if not match:
        raise UsageError(f"destination {text!r}: expected {DESTINATION_SHAPE}")
    last = image.rsplit("/", 1)[-1]
    own_tag = last.rsplit(":", 1)[1] if ":" in last and "@" not in last else "latest"
    return Destination(match["registry"], match["repo"], match["tag"] or own_tag)


def push(builder: str, image: str, dest: Destination) -> str:
    """Push IMAGE (a local image of BUILDER) to DEST; its manifest digest. The image must be there
    (exit 2 naming the local ones otherwise); a refused or unreachable registry is exit 1 with the
    engine's reason."""
    from hpcai.image import engine

    engine.image_labels(builder, image)  # unknown image: one line naming the local ones
    _engine(builder, "tag", ["tag", "--", image, dest.reference])
    with tempfile.TemporaryDirectory(prefix="hpcai-push-") as tmp:
        digest_file = Path(tmp) / "digest"
        extra = ["--format", "v2s2", "--digestfile", str(digest_file)] if builder == "podman" else []
        out = _engine(builder, f"push to {dest.registry}", ["push", *extra, "--", dest.reference])
        said = digest_file.read_text() if digest_file.is_file() else out  # docker: "…: digest: sha256:… size: …"
    found = DIGEST.search(said)
    if not found:
        raise HpcaiError(f"{builder} pushed {dest.reference} but named no digest; its output: {one_line_of(out)}")
    return found.group(0)


def push_file(path: Path, kind: str, dest: Destination) -> str:
    """Push a SIF or SquashFS file as an artifact, its hpcai.* labels as annotations; its digest."""
    from hpcai.image import artifacts

    return artifacts.push_file(path, kind, dest.registry, dest.repo, dest.tag, file_labels(path, kind))


def file_labels(path: Path, kind: str) -> dict[str, str]:
    """The image labels a SIF (apptainer inspect) or an enroot SquashFS (its /etc/rc) carries."""
    from hpcai.image import sif, sqsh

    found = sif.labels(str(path)) if kind == "sif" else sqsh.labels(str(path))
    return {k: v for k, v in found.items() if k.startswith(("hpcai.", "org.opencontainers."))}


def _engine(builder: str, what: str, args: list[str]) -> str:
    """BUILDER ARGS (token list); stdout, or HpcaiError with the last line the engine said."""
    res = subprocess.run([builder, *args], capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise HpcaiError(f"{what} failed ({builder} exit {res.returncode}): {one_line_of(res.stderr or res.stdout)}")
    return res.stdout


def one_line_of(text: str) -> str:
    """An engine's message as one line: its last non-empty line (docker ends with the reason)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"
