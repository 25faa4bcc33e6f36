#!/usr/bin/env python3
"""Cold build of pytorch-cpu: `hpcai build` against the hand-written minimal Dockerfile; target <= 1.20x.

Both sides build the same content (benchmarks/minimal/pytorch-cpu.Dockerfile: the same Debian
base, MPI packages and wheels) with the same classic Docker builder and the same inputs (the
wheelhouse and CA bundle the tests pass, tests/imagebuild.py), from the same cache state: each
build starts FROM its own private copy of the base (the base plus one label, a new image id), so
no layer comes from the cache and the cache chains of other builds are left alone. Builds
alternate (hpcai, minimal, then minimal, hpcai, …) so that load drifts on a shared machine hit
both alike; the figure is the ratio of the medians, with the per-round ratios beside it. After the
first round both images are checked to hold the same Debian packages and Python distributions.

    python benchmarks/cold_build.py [--runs 2] [--keep]

Needs a Docker daemon and the flavor's base image (minutes: four 1.4 GB builds at --runs 2).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import figure, not_run
from minimal import build_minimal, content_difference, contents, private_base

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
NAME = "build: cold build / a minimal image's build"
TARGET = 1.20


def build_hpcai(tag: str, base: str, inputs: list[str]) -> float:
    argv = [sys.executable, "-m", "hpcai", "build", "pytorch-cpu", "--base", base, "--tag", tag, *inputs]
    start = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if res.returncode:
        raise SystemExit(f"hpcai build failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return seconds


def drop(base: str) -> None:
    """Every image built on a private base (they all carry its label), then the base."""
    ids = subprocess.run(["docker", "images", "-a", "-q", "--filter", f"label=hpcai.bench.private-base={base}"],
                         capture_output=True, text=True, check=False).stdout.split()
    for ref in [*dict.fromkeys(ids)]:
        subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, check=False)
    subprocess.run(["docker", "rmi", base], capture_output=True, check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="builds of each (default 2)")
    ap.add_argument("--keep", action="store_true", help="keep the images (tags hpcai-bench/cold-*)")
    args = ap.parse_args()
    from imagebuild import pip_build_inputs
    from hpcai.image.spec import make_spec

    base = make_spec("pytorch-cpu").base
    if subprocess.run(["docker", "image", "inspect", base], capture_output=True, check=False).returncode:
        print(f"cold_build: no base image {base} (make base-debian); skipped")
        not_run(NAME, TARGET, "x", why=f"no base image {base}")
        return 0
    inputs = pip_build_inputs()
    ours: list[float] = []
    theirs: list[float] = []
    note = ""
    with tempfile.TemporaryDirectory(prefix="hpcai-cold-") as tmp:
        for i in range(args.runs):
            order = ("hpcai", "minimal") if i % 2 == 0 else ("minimal", "hpcai")
            bases = {side: private_base(base, Path(tmp), f"cold-{side}") for side in order}
            tags = {side: f"hpcai-bench/cold-{side}:{i}" for side in order}
            try:
                for side in order:
                    if side == "hpcai":
                        ours.append(build_hpcai(tags[side], bases[side], inputs))
                    else:
                        theirs.append(build_minimal(tags[side], bases[side], inputs, Path(tmp)))
                    print(f"cold_build: round {i + 1}: {side} {(ours if side == 'hpcai' else theirs)[-1]:.1f} s",
                          flush=True)
                if i == 0:
                    extra, missing = content_difference(contents(tags["hpcai"]), contents(tags["minimal"]))
                    print(f"cold_build: content: only in hpcai's {extra or 'nothing'}; only in the minimal "
                          f"{missing or 'nothing'}")
                    if missing:
                        note = f"; the minimal image holds more: {', '.join(missing[:5])}"
            finally:
                if not args.keep:
                    for side in order:
                        drop(bases[side])
    a, b = statistics.median(ours), statistics.median(theirs)
    ratio = a / b
    rounds = ", ".join(f"{x / y:.2f}" for x, y in zip(ours, theirs))
    print(f"cold_build: pytorch-cpu, {args.runs} cold builds each, interleaved")
    print(f"  hpcai build  : median {a:.1f} s  ({', '.join(f'{x:.1f}' for x in ours)})")
    print(f"  minimal      : median {b:.1f} s  ({', '.join(f'{x:.1f}' for x in theirs)})")
    print(f"  ratio {ratio:.3f} (target <= {TARGET:.2f}): {'PASS' if ratio <= TARGET else 'FAIL'}; per round {rounds}")
    figure(NAME, ratio, TARGET, "x", note=f"medians {a:.0f} / {b:.0f} s of {args.runs} each, "
                                          f"per round {rounds}{note}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
