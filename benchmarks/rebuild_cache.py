#!/usr/bin/env python3
"""Rebuild after changing one payload file vs. the cold build of pytorch-cpu; target < 10 %.

1. cold: `hpcai build pytorch-cpu` on a private copy of the base image (same files, new image
   id: `FROM base` + a label), so no layer can come from the cache, and the cache chains other
   builds use are left alone (`--no-cache` would add competing, half-built chains that make
   concurrent builds miss);
2. touch one payload run script (in a private copy of the payloads tree, never the repo's);
3. warm: `hpcai build pytorch-cpu` again; only the payload layers and labels may rebuild.
Prints both times, the cached-step counts and the ratio. Needs a Docker daemon (minutes).

First, without Docker (and alone with --render-only): a component bump keeps the layers before
its own step. Two pytorch-ngc Dockerfiles that differ only in the aws-ofi-nccl version must be
identical up to the aws-ofi-nccl step, whose ENV holds its pins, so a build reuses the libfabric,
PMIx and Open MPI layers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import figure

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
TARGET = 0.10
BUMP = ("aws-ofi-nccl", "1.18.0", "# Step: aws-ofi-nccl")  # component, other vetted version, its step


def build(*args: str) -> float:
    from hpcai.cli.main import run

    start = time.perf_counter()
    try:
        run(["build", "pytorch-cpu", *args])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise SystemExit(f"rebuild_cache: build failed (exit {exc.code})") from None
    return time.perf_counter() - start


def private_base(base: str, tmp: Path) -> str:
    """A copy of `base` with a new image id (a label layer): a cache namespace of our own."""
    tag = f"hpcai-bench/base:{int(time.time())}"
    (tmp / "Dockerfile").write_text(f"FROM {base}\nLABEL hpcai.bench.rebuild-cache={tag!r}\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(tmp)], check=True, capture_output=True,
                   env={**os.environ, "DOCKER_BUILDKIT": "0"})
    return tag


def pins_stay_local() -> bool:
    """Render pytorch-ngc at the default and at a bumped aws-ofi-nccl; print how many builder
    instructions before the first difference the two share, and whether that difference is the
    bumped component's own step."""
    from hpcai.image.render import render
    from hpcai.image.spec import make_spec

    name, version, step = BUMP
    fixed = {"sha": "0123456789ab", "build_date": "2026-01-01T00:00:00Z"}
    before = render(make_spec("pytorch-ngc", **fixed), "docker").splitlines()
    after = render(make_spec("pytorch-ngc", sets=[f"{name}={version}"], **fixed), "docker").splitlines()
    first = next(i for i, (x, y) in enumerate(zip(before, after)) if x != y)
    froms = [i for i, line in enumerate(before) if line.startswith("FROM ")]

    def instructions(lines: list[str]) -> int:  # not comments, not continuation lines
        return sum(1 for line in lines if line[:1].isupper())

    shared, total = instructions(before[froms[0]:first]), instructions(before[froms[0]:froms[1]])
    ok = before[first - 1] == step
    print(f"rebuild_cache: bumping {name} to {version} keeps {shared} of {total} builder instructions "
          f"(identical up to {before[first - 1]!r}): {'OK' if ok else 'EARLIER DIFFERENCE'}")
    # the figure: instructions kept / those before the bumped step (all of them: 1.0)
    expected = instructions(before[froms[0]:before.index(step) if step in before else froms[1]])
    figure("rebuild: builder steps kept on a component bump", shared / max(expected, 1), 1.0, "x",
           better="higher", note=f"{name} -> {version}: {shared} of {total} builder instructions kept")
    return ok


def main() -> int:
    if not pins_stay_local():
        return 1
    if "--render-only" in sys.argv[1:]:
        return 0
    import hpcai.payloads
    from conftest import pip_build_inputs
    from hpcai.image.spec import make_spec

    inputs = pip_build_inputs()
    with tempfile.TemporaryDirectory(prefix="hpcai-bench-") as tmp:
        root = Path(tmp) / "payloads"
        shutil.copytree(hpcai.payloads.payloads_root(), root, ignore=shutil.ignore_patterns("__pycache__"))
        hpcai.payloads.payloads_root = lambda: root  # the CLI runs in-process and reads this
        (Path(tmp) / "base").mkdir()
        base = private_base(make_spec("pytorch-cpu", payloads="none").base, Path(tmp) / "base")
        tag = ["--base", base, "--tag", "hpcai-bench/rebuild:1"]
        try:
            cold = build(*inputs, *tag)
            script = root / "sanity" / "sanity.py"
            script.write_text(script.read_text() + f"\n# rebuild_cache {time.time()}\n")
            warm = build(*inputs, *tag)
        finally:
            subprocess.run(["docker", "rmi", "hpcai-bench/rebuild:1", base], capture_output=True, check=False)
    ratio = warm / cold
    print(f"rebuild_cache: cold {cold:.1f} s, rebuild after one payload file {warm:.1f} s; "
          f"ratio {ratio:.3f} (target < {TARGET:.2f}: {'OK' if ratio < TARGET else 'OVER TARGET'})")
    figure("rebuild: one payload file edited / cold build", ratio, TARGET, "x",
           note=f"cold {cold:.1f} s, rebuild {warm:.1f} s (pytorch-cpu)")
    return 0 if ratio < TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
