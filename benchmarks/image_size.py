#!/usr/bin/env python3
"""Size of the pytorch-cpu image against the smallest image with the same content (target <= 1.10x),
and proof that no toolchain or source tree is in it.

Uses an existing image (HPCAI_PYTORCH_CPU_IMAGE, or the newest hpcai/pytorch-cpu-hpc tag), else
builds one. Builds the hand-written minimal image (benchmarks/minimal/pytorch-cpu.Dockerfile: the
same base, Debian MPI packages and wheels; the layer cache may serve it) and checks that both hold
the same Debian packages and Python distributions (pip, wheel and setuptools aside). Prints the base
size, both image sizes, the ratio, the largest layers, and the result of looking for compilers,
headers and build folders inside the image.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _report import figure
from minimal import build_minimal, content_difference, contents

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
TARGET = 1.10
MINIMAL_TAG = "hpcai-bench/minimal-pytorch-cpu:latest"

PROBE = ("for t in gcc cc c++ g++ make ld as cmake; do command -v $t; done; "
         "ls -d /opt/hpcai-build /usr/include/mpi.h /usr/include/python3*/Python.h "
         "/usr/lib/*/openmpi/include/mpi.h /usr/src/* 2>/dev/null; "
         "find / -xdev \\( -name '*.tar.gz' -o -name '*.tar.bz2' -o -name configure \\) -print 2>/dev/null | head")


def image() -> str:
    if os.environ.get("HPCAI_PYTORCH_CPU_IMAGE"):
        return os.environ["HPCAI_PYTORCH_CPU_IMAGE"]
    tags = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "hpcai/pytorch-cpu-hpc"],
                          capture_output=True, text=True, check=True).stdout.split()
    if tags:
        return tags[0]
    from conftest import pip_build_inputs

    res = subprocess.run([sys.executable, "-m", "hpcai", "build", "pytorch-cpu", *pip_build_inputs()],
                         capture_output=True, text=True, check=True)
    return res.stdout.split()[-1]


def size(ref: str) -> int:
    return int(subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", ref],
                              capture_output=True, text=True, check=True).stdout)


def main() -> int:
    ref = image()
    base = subprocess.run(["docker", "image", "inspect", "-f",
                           '{{index .Config.Labels "org.opencontainers.image.base.name"}}', ref],
                          capture_output=True, text=True, check=True).stdout.strip()
    img, bas = size(ref), size(base)
    print(f"image_size: {ref}: {img / 1e6:.0f} MB; base {base}: {bas / 1e6:.0f} MB; "
          f"added {(img - bas) / 1e6:.0f} MB ({img / bas:.1f}x the base)")
    hist = subprocess.run(["docker", "history", "--no-trunc", "--human=false", "--format",
                           "{{.Size}}\t{{.CreatedBy}}", ref],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    layers = sorted((int(sz), cmd) for sz, cmd in (h.split("\t", 1) for h in hist))
    for sz, cmd in reversed(layers[-5:]):
        print(f"  layer {sz / 1e6:8.1f} MB  {cmd.strip()[-80:]}")
    found = subprocess.run(["docker", "run", "--rm", "--entrypoint", "/bin/sh", ref, "-c", PROBE],
                           capture_output=True, text=True, check=False).stdout.split()
    print(f"image_size: toolchain/source leftovers: {found if found else 'none'}")
    figure("image: toolchain/source files left in the image", len(found), 0, "files",
           note=f"{ref}: {img / 1e6:.0f} MB, {img / bas:.1f}x its base {base}")
    return max(1 if found else 0, against_minimal(ref, img, base))


def against_minimal(ref: str, img: int, base: str) -> int:
    """hpcai's image over the minimal image of the same content, built FROM the same base."""
    import tempfile

    from imagebuild import pip_build_inputs

    with tempfile.TemporaryDirectory(prefix="hpcai-size-") as tmp:
        build_minimal(MINIMAL_TAG, base, pip_build_inputs(), Path(tmp))
    small = size(MINIMAL_TAG)
    ratio = img / small
    extra, missing = content_difference(contents(ref), contents(MINIMAL_TAG))
    print(f"image_size: minimal image {MINIMAL_TAG}: {small / 1e6:.0f} MB; {ref} is {(img - small) / 1e6:+.1f} MB, "
          f"{ratio:.3f}x (target <= {TARGET:.2f}): {'PASS' if ratio <= TARGET else 'FAIL'}")
    print(f"image_size: content only in hpcai's: {extra or 'nothing'}; only in the minimal: {missing or 'nothing'}")
    note = f"{img / 1e6:.0f} / {small / 1e6:.0f} MB"
    if missing:  # the minimal holds something hpcai's lacks: the comparison flatters hpcai
        note += f"; the minimal image holds more: {', '.join(missing[:5])}"
    if extra:
        note += f"; only hpcai's holds {', '.join(extra[:5])}"
    figure("image: size / a minimal image", ratio, TARGET, "x", note=note)
    return 0 if ratio <= TARGET and not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
