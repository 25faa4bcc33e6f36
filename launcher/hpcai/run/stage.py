"""`hpcai stage IMAGE`, part one: the image named by its digest, converted once into the site cache.

A launch on N nodes that names `docker://REG/REPO:TAG` makes every node pull and convert the image,
and one that names a SIF on the parallel file system makes every node read it at start-up. Staging
resolves the image to the one name that cannot move, its digest, and keeps one file per digest and
format in a shared site cache (`sha256-<hex>.sif` or `.sqsh`):

- a file (SIF, SquashFS): its sha256 (hpcai.run.digests' cache: a launch does not rehash GBs);
  the file itself is the site copy;
- `docker://REG/REPO[:TAG|@DIGEST]`: the manifest digest the registry answers, then converted once
  (`apptainer pull` to SIF, `enroot import` to SquashFS), with the runtime's own login;
- `oras://REG/REPO[:TAG|@DIGEST]`: an artifact `hpcai push` made (SIF or SquashFS), fetched and
  checked against its digests.

Publishing is atomic (written in a private folder beside the name, renamed when whole), and
stagers of the same digest take turns on a lock file: the second waits for the first and then
finds the file made, instead of converting it again. Part two, the broadcast to node-local storage
inside an allocation, is hpcai.run.broadcast.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpcai import files
from hpcai.errors import HpcaiError, UsageError, one_line, operand

FORMATS = ("sif", "sqsh")
CACHE_ENV = "HPCAI_IMAGE_CACHE"
# REG/REPO[:TAG|@DIGEST] after docker:// or oras://, the registry with a dot, a port or localhost
_REFERENCE = re.compile(r"(?P<registry>(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+(?=:))"
                        r"(?::[0-9]{1,5})?)/(?P<repo>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                        r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
                        r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?")
MANIFESTS = ", ".join(("application/vnd.docker.distribution.manifest.v2+json",
                       "application/vnd.docker.distribution.manifest.list.v2+json",
                       "application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json"))


@dataclass(frozen=True)
class Source:
    """What to stage: a file, or a registry reference (scheme docker/oras) resolved to a digest."""

    scheme: str          # "file", "docker" or "oras"
    location: str        # the file's path, or REG/REPO
    digest: str          # sha256:<hex>
    registry: str = ""
    repo: str = ""

    def cache_name(self, fmt: str) -> str:
        return f"{self.digest.replace(':', '-')}.{fmt}"


def default_cache() -> Path:
    """$HPCAI_IMAGE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/hpcai/images (a shared home, usually)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hpcai" / "images"


def format_for(image: str, runtime: str) -> str:
    """The file format a runtime starts from: SIF for apptainer/singularity, SquashFS for enroot,
    pyxis and charliecloud; a file keeps its own."""
    suffix = Path(image).suffix.lower()
    if "://" not in image and suffix in (".sif", ".sqsh", ".squashfs", ".sqfs"):
        return "sif" if suffix == ".sif" else "sqsh"
    return "sif" if runtime in ("apptainer", "singularity") else "sqsh"


def resolve(image: str) -> Source:
    """IMAGE's digest: a file's sha256, or the registry's manifest digest for docker:// and oras://."""
    from hpcai.run import digests

    image = one_line("IMAGE", image)
    scheme, sep, rest = image.partition("://")
    if not sep:
        path = Path(operand("IMAGE", image))
        if not path.is_file():
            raise UsageError(f"image {image!r}: stage takes a SIF or SquashFS file, docker://REG/REPO[:TAG|@DIGEST] "
                             "or oras://REG/REPO[:TAG|@DIGEST]")
        return Source("file", str(path.resolve()), digests.image_sha256(path))
    match = _REFERENCE.fullmatch(rest)
    if scheme not in ("docker", "oras") or not match:
        raise UsageError(f"image {image!r}: expected docker:// or oras:// then REGISTRY/REPO[:TAG|@DIGEST] (a registry "
                         "host with a dot, a port or localhost)")
    registry, repo = match["registry"], match["repo"]
    digest = match["digest"] or _manifest_digest(registry, repo, match["tag"] or "latest")
    return Source(scheme, f"{registry}/{repo}", digest, registry, repo)


def _manifest_digest(registry: str, repo: str, tag: str) -> str:
    """The digest the registry answers for REPO:TAG (a HEAD of the manifest, no content fetched)."""
    from hpcai.image import artifacts

    reg = artifacts.client(registry)
    try:
        res = reg.do_request(f"{reg.prefix}://{registry}/v2/{repo}/manifests/{tag}", "HEAD",
                             headers={"Accept": MANIFESTS})
    except Exception as exc:
        raise HpcaiError(f"{registry}/{repo}:{tag}: {' '.join(str(exc).split())[:300]}") from None
    digest = res.headers.get("Docker-Content-Digest", "")
    if res.status_code != 200 or not digest.startswith("sha256:"):
        raise HpcaiError(f"{registry}/{repo}:{tag}: the registry answered {res.status_code} {res.reason}")
    return digest


def stage_site(source: Source, fmt: str, cache: Path) -> Path:
    """The site copy of SOURCE in FMT: the file itself, or `cache/sha256-<hex>.FMT`, made once."""
    if fmt not in FORMATS:
        raise UsageError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if source.scheme == "file":
        if format_for(source.location, "") != fmt:
            raise UsageError(f"{source.location} is not a {fmt} file: stage it for a runtime that starts from it")
        return Path(source.location)
    cache.mkdir(parents=True, exist_ok=True)
    final = cache / source.cache_name(fmt)
    with _lock(cache / f".{final.name}.lock"):  # a second stager of this digest waits here
        if final.is_file():
            return final
        with files.aside_dir(final, "the site cache") as part:
            _convert(source, fmt, part)
    return final


class _lock:
    """An exclusive lock on a file in the cache, held for the conversion (flock: NFS v4 and Lustre
    with `flock` mounts pass it between nodes)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            from hpcai.output import say

            say(f"waiting for another stager of {self.path.name[1:-5]}")
            fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


def _convert(source: Source, fmt: str, part: Path) -> None:
    """SOURCE (by digest) into PART as FMT."""
    pinned = f"{source.location}@{source.digest}"
    if source.scheme == "oras":
        from hpcai.image import artifacts

        artifacts.pull_file(source.registry, source.repo, source.digest, part, kind=fmt)
        return
    # Format: apptainer pull --force PART docker://REG/REPO@DIGEST | enroot import -o PART docker://…
    argv = (["apptainer", "pull", "--force", str(part), f"docker://{pinned}"] if fmt == "sif"
            else ["enroot", "import", "-o", str(part), f"docker://{pinned}"])
    res = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if res.returncode != 0 or not part.is_file():
        last = [ln.strip() for ln in (res.stderr or res.stdout).splitlines() if ln.strip()][-1:] or ["(no message)"]
        raise HpcaiError(f"converting docker://{pinned} to {fmt} failed ({argv[0]} exit {res.returncode}): {last[0]}")


@dataclass(frozen=True)
class Staged:
    """Where a stage left the image: the site copy, and the node-local one inside an allocation."""

    source: Source
    fmt: str
    site_copy: Path
    nodes: object = None  # hpcai.run.broadcast.NodeStage, or None outside an allocation

    @property
    def path(self) -> str:
        """What every runtime starts from."""
        return self.nodes.path if self.nodes else str(self.site_copy)

    def summary(self) -> str:
        where = (f"on {len(self.nodes.nodes)} nodes ({len(self.nodes.cold)} cold) in {self.nodes.seconds:.2f} s"
                 if self.nodes else "in the site cache (no allocation: no node-local copy)")
        return f"staged {self.source.digest[:19]}… {where}: {self.path}"


def stage(image: str, runtime: str, site, fmt: str = "", cache: str = "", node_cache: str = "",
          fanout: int = 0, cap: int = -1) -> Staged:
    """`hpcai stage`: IMAGE by digest into the site cache; inside an allocation, onto every node."""
    from hpcai.run import broadcast

    if runtime in ("docker", "podman", "podman-hpc", "sarus", "ce", "charliecloud") and "://" in image:
        raise UsageError(f"--runtime {runtime}: staging converts registry images for apptainer, singularity, "
                         "enroot and pyxis; give this runtime a file, or its engine's image")
    fmt = fmt or format_for(image, runtime)
    node_dir = node_cache or os.environ.get(broadcast.NODE_CACHE_ENV) or site.node_cache or \
        broadcast.default_node_cache()
    fanout = fanout or broadcast.MAX_FANOUT
    broadcast.check(node_dir, fanout)  # before anything is converted
    source = resolve(image)
    site_copy = stage_site(source, fmt, Path(cache or os.environ.get(CACHE_ENV) or site.image_cache
                                             or default_cache()))
    if not broadcast.in_allocation():
        return Staged(source, fmt, site_copy)
    return Staged(source, fmt, site_copy, broadcast.stage_nodes(
        site_copy, source.cache_name(fmt), node_dir, fanout, broadcast.DEFAULT_CAP if cap < 0 else cap))


def for_launch(opts):
    """`launch --stage`: the launch's options with the image replaced by the staged copy (labels
    read from the site copy where the node-local one is not on this host)."""
    from dataclasses import replace

    from hpcai.output import say
    from hpcai.run.site import resolve_site

    site = resolve_site(opts.site)
    done = stage(opts.image, opts.runtime or site.runtime, site)
    say(done.summary())
    return replace(opts, image=done.path, staged_from=str(done.site_copy) if done.nodes else "")
