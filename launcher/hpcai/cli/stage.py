"""`hpcai stage IMAGE`: the image by digest into the site cache and, inside an allocation, onto
every node's local storage by Slurm's tree broadcast (hpcai.run.stage, hpcai.run.broadcast). Prints
the path every runtime starts from (`IMG=$(hpcai stage docker://…)`), the summary on stderr."""

from __future__ import annotations

import re
from typing import Optional

import typer

PANEL = "Launch"
_SIZE = re.compile(r"(?P<n>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?", re.IGNORECASE)


def size_bytes(text: str) -> int:
    """"100G", "512MiB", "0" (no cap) -> bytes (powers of 1024)."""
    from hpcai.errors import UsageError

    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"--cap {text!r}: a size such as 100G, 512M or 0 (no cap)")
    unit = match["unit"].upper()
    return int(float(match["n"]) * (1024 ** ("KMGT".index(unit) + 1) if unit else 1))


def stage_cmd(
    image: str = typer.Argument(..., help="A SIF or SquashFS file, docker://REG/REPO[:TAG|@DIGEST] or "
                                          "oras://REG/REPO[:TAG|@DIGEST] (an `hpcai push`ed file)."),
    runtime: Optional[str] = typer.Option(None, "--runtime", envvar="HPCAI_RUNTIME",
                                          help="The runtime that will start it: SIF for apptainer/singularity, "
                                               "SquashFS for enroot/pyxis (default: the site's)."),
    fmt: Optional[str] = typer.Option(None, "--format", help="sif | sqsh (default: the runtime's)."),
    site: Optional[str] = typer.Option(None, "--site", envvar="HPCAI_SITE", help="Site profile (image_cache, "
                                                                                  "node_cache)."),
    cache: Optional[str] = typer.Option(None, "--cache", metavar="DIR",
                                        help="Site cache on a shared file system (default: $HPCAI_IMAGE_CACHE, the "
                                             "site's image_cache, else ~/.cache/hpcai/images)."),
    node_cache: Optional[str] = typer.Option(None, "--node-cache", metavar="DIR",
                                             help="Node-local cache, the same path on every node (default: "
                                                  "$HPCAI_NODE_CACHE, the site's node_cache, else "
                                                  "/tmp/hpcai-images-UID)."),
    fanout: int = typer.Option(8, "--fanout", help="sbcast's tree fan-out, 1 to 8."),
    cap: str = typer.Option("100G", "--cap", help="Bytes of images a node keeps; the least recently used go "
                                                  "beyond it (0: no cap)."),
    as_json: bool = typer.Option(False, "--json", help="Print digest, paths, nodes and timings as JSON."),
) -> None:
    """Stage an image for a launch on many nodes: converted once by digest into the site cache,
    then (inside an allocation) broadcast to node-local storage, read from the shared file system
    once whatever the node count. Prints the path to launch with."""
    from hpcai.output import emit, emit_json, say
    from hpcai.run import stage as staging
    from hpcai.run.runtimes import RUNTIMES
    from hpcai.run.site import resolve_site
    from hpcai.errors import unknown

    if runtime is not None and runtime not in RUNTIMES:
        raise unknown("runtime", runtime, RUNTIMES)
    if fmt is not None and fmt not in staging.FORMATS:
        raise unknown("format", fmt, staging.FORMATS)
    cap_bytes = size_bytes(cap)
    profile = resolve_site(site)
    done = staging.stage(image, runtime or profile.runtime, profile, fmt or "", cache or "", node_cache or "",
                         fanout, cap_bytes)
    if as_json:
        nodes = done.nodes
        emit_json({"image": image, "digest": done.source.digest, "format": done.fmt, "path": done.path,
                   "site_copy": str(done.site_copy),
                   "nodes": nodes.nodes if nodes else [], "cold": nodes.cold if nodes else [],
                   "broadcast_bytes": nodes.broadcast_bytes if nodes else 0,
                   "seconds": round(nodes.seconds, 3) if nodes else 0.0, "evicted": nodes.evicted if nodes else {}})
        return
    say(done.summary())
    emit(done.path)


def register(app: typer.Typer) -> None:
    app.command("stage", rich_help_panel=PANEL)(stage_cmd)
