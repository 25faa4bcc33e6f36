#!/usr/bin/env python3
"""Rebuild after changing one payload file vs. the cold build of pytorch-cpu; target < 10 %.

1. cold: `hpcai build pytorch-cpu --no-cache` (every layer built; the base image and the
   network/wheelhouse are the only inputs reused);
2. touch one payload run script (in a private copy of the payloads tree, never the repo's);
3. warm: `hpcai build pytorch-cpu` again; only the payload layers and labels may rebuild.
Prints both times, the cached-step counts and the ratio. Needs a Docker daemon (minutes).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
TARGET = 0.10


def build(*args: str) -> float:
    from hpcai.cli.main import run

    start = time.perf_counter()
    try:
        run(["build", "pytorch-cpu", *args])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise SystemExit(f"rebuild_cache: build failed (exit {exc.code})") from None
    return time.perf_counter() - start


def main() -> int:
    import hpcai.payloads
    from conftest import pip_build_inputs

    inputs = pip_build_inputs()
    with tempfile.TemporaryDirectory(prefix="hpcai-bench-") as tmp:
        root = Path(tmp) / "payloads"
        shutil.copytree(hpcai.payloads.payloads_root(), root, ignore=shutil.ignore_patterns("__pycache__"))
        hpcai.payloads.payloads_root = lambda: root  # the CLI runs in-process and reads this
        tag = ["--tag", "hpcai-bench/rebuild:1"]
        cold = build(*inputs, *tag, "--no-cache")
        script = root / "sanity" / "sanity.py"
        script.write_text(script.read_text() + f"\n# rebuild_cache {time.time()}\n")
        warm = build(*inputs, *tag)
    ratio = warm / cold
    print(f"rebuild_cache: cold {cold:.1f} s, rebuild after one payload file {warm:.1f} s; "
          f"ratio {ratio:.3f} (target < {TARGET:.2f}: {'OK' if ratio < TARGET else 'OVER TARGET'})")
    return 0 if ratio < TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
