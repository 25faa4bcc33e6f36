"""Assemble a build context folder: rendered Dockerfile + def, install scripts, payloads, inputs.

The same folder serves `docker build`, `podman build` and `apptainer build hpcai.def` (the def's
%files name paths relative to it). Large inputs (the wheelhouse) are hard-linked when the
filesystem allows, so preparing a context costs little even with a 200 MB torch wheel.

`--context DIR` may name a folder others can write to (under /tmp), so the context is built in a
private folder made beside DIR (mkdtemp: 0700, nobody else can plant a link in it) and renamed to
DIR once whole: no file is ever written through a link, and a failed build leaves DIR as it was.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hpcai.image.render import payload_hooks, render
from hpcai.resources import data_path
from hpcai.image.values import payload_manifest
from hpcai.image.spec import ImageSpec


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy a folder, following links (a site's lib folder is often a farm of symlinks).
    Cache-busting junk (__pycache__) is left out."""
    for path in sorted(src.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        _link_or_copy(path.resolve(), dst / path.relative_to(src))
    dst.mkdir(parents=True, exist_ok=True)


MARKER = ".hpcai-context"  # what makes a folder one that prepare_context may empty again


def prepare_context(spec: ImageSpec, dest: Path, bootstrap: str = "docker") -> Path:
    """Fill `dest` with everything the Dockerfile and def COPY; returns dest. `dest` must be new,
    empty, or a context made here before (it holds MARKER): only then is it emptied first, so
    `hpcai render --context .` never deletes a user's files. bootstrap: where the def takes its
    base from (render.BOOTSTRAPS; default docker, a registry)."""
    from hpcai import files
    from hpcai.errors import UsageError

    # Both files first: a value either writer refuses leaves `dest` as it was.
    dockerfile, definition = render(spec, "docker"), render(spec, "apptainer", bootstrap)
    if dest.is_symlink():
        raise UsageError(f"--context {dest}: is a symbolic link, which hpcai does not write through; "
                         "give the folder itself or a new name (nothing was changed)")
    earlier = dest.is_dir() and any(dest.iterdir())
    if earlier and not (dest / MARKER).is_file():
        raise UsageError(f"--context {dest}: the folder is not empty and holds no earlier hpcai build "
                         "context; give a new or empty folder (nothing was changed)")
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"--context {dest}: not a folder")
    target = dest.absolute()  # `--context .`: the stage goes beside the folder, not in it
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        _fill(stage, spec, dockerfile, definition)
        os.chmod(stage, 0o777 & ~files.umask())  # as mkdir would have made it
        _move_in(stage, target, earlier)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return dest


def _move_in(stage: Path, target: Path, earlier: bool) -> None:
    """Make the finished STAGE the context at TARGET. A new name: one rename (a link planted there
    since is replaced, not followed). An existing folder (empty, or an EARLIER context) is kept,
    as it may be a shell's working folder: an earlier context's entries go (a link among them is
    removed, never what it points to), then the stage's entries are renamed in."""
    if not target.is_dir() or target.is_symlink():
        os.rename(stage, target)
        return
    for old in target.iterdir() if earlier else ():
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
    for new in stage.iterdir():
        os.rename(new, target / new.name)
    stage.rmdir()


def _fill(dest: Path, spec: ImageSpec, dockerfile: str, definition: str) -> None:
    """Write the context's files into DEST, a new private folder (prepare_context's stage)."""
    from hpcai import payloads

    (dest / MARKER).write_text("made by hpcai; `hpcai render|build --context` may replace this folder\n")
    (dest / "Dockerfile").write_text(dockerfile)
    (dest / "hpcai.def").write_text(definition)
    _copy_tree(data_path("dockerfiles", "install"), dest / "install")
    (dest / "sources").mkdir()
    (dest / "sources" / "README").write_text("Pre-downloaded source tarballs (checked by sha256).\n")
    if spec.sources_dir:
        _copy_tree(spec.sources_dir, dest / "sources")

    entry = data_path("entrypoints")
    # The entrypoint sources the library beside it; -ssh images also get the ssh server's starter.
    for name in ("hpcai-entrypoint", "hpcai-lib.sh", *(("hpcai-sshd",) if spec.ssh else ())):
        _link_or_copy(entry / name, dest / "runtime" / "bin" / name)
    (dest / "runtime" / "entrypoint.d").mkdir(parents=True)
    for hook in sorted((entry / "hooks.d").glob("*.sh")):
        _link_or_copy(hook, dest / "runtime" / "entrypoint.d" / hook.name)
    _link_or_copy(payloads.payloads_root() / "_runner" / "hpcai-bench", dest / "hpcai-bench")

    (dest / "payloads").mkdir()
    (dest / "payload-hooks").mkdir()
    for hooks in payload_hooks(spec):
        folder = payload_manifest(hooks.name).dir
        _copy_tree(folder, dest / "payloads" / hooks.name)
        for rel in hooks.files:
            _link_or_copy(folder / rel, dest / "payload-hooks" / hooks.name / rel)

    if spec.ca_bundle:
        _link_or_copy(spec.ca_bundle.resolve(), dest / "ca-bundle.crt")
    if spec.wheelhouse:
        _copy_tree(spec.wheelhouse, dest / "wheelhouse")
    if spec.apt_sources:
        _link_or_copy(spec.apt_sources.resolve(), dest / "apt" / spec.apt_sources.name)
    if spec.hpc_libs:
        _copy_tree(spec.hpc_libs, dest / "hpc-libs")
