"""The hand-written minimal image that hpcai's pytorch-cpu is measured against (size and cold build).

`pytorch-cpu.Dockerfile` beside this file is what a careful person would write for the same content:
the same Debian base, Debian's Open MPI, libfabric and python3-mpi4py, and one venv holding the
framework and the default payloads' Python requirements. This module makes its build context from
the same inputs hpcai's build gets (the wheelhouse and CA bundle of tests/imagebuild.py), builds it
with the same classic Docker builder, and lists what an image holds (Debian packages, Python
distributions) so that a benchmark can check that both images hold the same things before it
compares them.

    from minimal import build_minimal, private_base, contents, content_difference
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DOCKERFILE = HERE / "pytorch-cpu.Dockerfile"
# The payloads whose Python requirements the minimal image installs: pytorch-cpu's default
# payloads with a pip-installing build hook (the others install nothing, or Debian's mpi4py).
PIP_PAYLOADS = ("hf-clm", "megatron-gpt")
# Packaging tools: hpcai upgrades pip and adds wheel to the venv (so a payload hook can build an
# sdist); they are tools, not content, and their versions may differ.
TOOLS = frozenset({"pip", "wheel", "setuptools"})
CLASSIC = {**os.environ, "DOCKER_BUILDKIT": "0"}  # the builder hpcai's build uses (image/build.py)


def framework_requirement() -> str:
    """pytorch-cpu's framework pins as hpcai installs them (`torch==X numpy==Y`)."""
    from hpcai.image.spec import make_spec

    return make_spec("pytorch-cpu").framework_requirement


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def context(dest: Path, wheelhouse: str | None, ca_bundle: str | None) -> Path:
    """The minimal build's context folder: wheelhouse/, ca-bundle.crt (empty when none),
    requirements/<payload>.txt."""
    (dest / "wheelhouse").mkdir(parents=True)
    (dest / "requirements").mkdir()
    if wheelhouse:
        for whl in Path(wheelhouse).glob("*.whl"):
            _link_or_copy(whl, dest / "wheelhouse" / whl.name)
    (dest / "ca-bundle.crt").write_bytes(Path(ca_bundle).read_bytes() if ca_bundle else b"")
    for name in PIP_PAYLOADS:
        shutil.copy2(REPO / "payloads" / name / "requirements.txt", dest / "requirements" / f"{name}.txt")
    return dest


def build_inputs(inputs: list[str]) -> tuple[str | None, str | None]:
    """(wheelhouse, ca bundle) from `--wheelhouse DIR --ca-bundle FILE` options."""
    get = {k: v for k, v in zip(inputs[::2], inputs[1::2])}
    return get.get("--wheelhouse"), get.get("--ca-bundle")


def build_minimal(tag: str, base: str, inputs: list[str], workdir: Path) -> float:
    """Build the minimal image FROM base as tag; the wall time in seconds (context included)."""
    wheelhouse, ca_bundle = build_inputs(inputs)
    ctx = context(workdir / f"minimal-{int(time.time() * 1000)}", wheelhouse, ca_bundle)
    argv = ["docker", "build", "--network", "host", "-f", str(DOCKERFILE), "-t", tag,
            "--build-arg", f"BASE={base}", "--build-arg", f"FRAMEWORK={framework_requirement()}", str(ctx)]
    start = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, env=CLASSIC, check=False)
    seconds = time.perf_counter() - start
    shutil.rmtree(ctx, ignore_errors=True)
    if res.returncode:
        raise SystemExit(f"minimal image build failed (exit {res.returncode}):\n{res.stdout[-3000:]}{res.stderr[-2000:]}")
    return seconds


def private_base(base: str, workdir: Path, label: str) -> str:
    """A copy of `base` with a new image id (one label layer): nothing built on it can come from
    the layer cache, and no other build's cache chain is touched (unlike --no-cache)."""
    tag = f"hpcai-bench/base:{label}-{time.time_ns()}"
    folder = workdir / tag.replace("/", "_").replace(":", "_")
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text(f"FROM {base}\nLABEL hpcai.bench.private-base={tag!r}\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(folder)], check=True, capture_output=True, env=CLASSIC)
    return tag


def size(ref: str) -> int:
    return int(subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", ref],
                              capture_output=True, text=True, check=True).stdout)


# One shell line per image: the Debian packages and the venv's Python distributions.
_LIST = ("dpkg-query -W -f '${Package}\\n' | sed 's/^/deb:/'; "
         "for v in /opt/hpcai/venv /opt/venv; do [ -x $v/bin/python ] && "
         "$v/bin/python -m pip list --format=freeze --disable-pip-version-check 2>/dev/null | sed 's/^/py:/'; done; true")


def contents(ref: str) -> set[str]:
    """`deb:NAME` for each Debian package and `py:NAME==VERSION` for each Python distribution."""
    res = subprocess.run(["docker", "run", "--rm", "--entrypoint", "/bin/sh", ref, "-c", _LIST],
                         capture_output=True, text=True, check=True)
    return {line.strip() for line in res.stdout.splitlines() if line.strip()}


def content_difference(ours: set[str], theirs: set[str]) -> tuple[list[str], list[str]]:
    """(only in ours, only in theirs), packaging tools (pip, wheel, setuptools) left out."""
    def keep(item: str) -> bool:
        return not (item.startswith("py:") and item[3:].split("==")[0].lower() in TOOLS)

    return sorted(x for x in ours - theirs if keep(x)), sorted(x for x in theirs - ours if keep(x))


def remove(*refs: str) -> None:
    subprocess.run(["docker", "rmi", *refs], capture_output=True, check=False)
