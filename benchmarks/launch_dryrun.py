"""Target: `hpcai launch --dry-run` for a 4,096-node allocation in under 0.5 s wall, interpreter
start included.

Runs the real CLI as a fresh process inside a fake allocation (SLURM_JOB_NODELIST=nid[000001-004096],
so MASTER_ADDR comes from expanding the whole host list) several times and prints the median and
the worst wall time against the target. Exit status 1 when the median misses it.

    python benchmarks/launch_dryrun.py [--runs 10] [--site cray-ex-nvidia] [--target 0.5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import figure

NODES = 4096
NODELIST = f"nid[000001-{NODES:06d}]"


def hpcai_argv() -> list[str]:
    """The installed console script (what users run), else `python -m hpcai`."""
    script = Path(sys.executable).with_name("hpcai")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "hpcai"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--site", default="cray-ex-nvidia")
    ap.add_argument("--target", type=float, default=0.5, help="seconds")
    args = ap.parse_args()

    env = {**os.environ, "SLURM_JOB_NODELIST": NODELIST, "SLURM_JOB_NUM_NODES": str(NODES),
           "SLURM_JOB_ID": "4242424"}
    argv = [*hpcai_argv(), "launch", "--dry-run", "--image", "/images/pytorch.sif", "--site", args.site,
            "-N", str(NODES), "--cmd", "--", "true"]
    workdir = tempfile.mkdtemp(prefix="hpcai-dryrun-")
    try:
        first = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=workdir, check=False)
        if first.returncode != 0 or "nid000001" not in first.stdout:
            print(f"dry-run failed (exit {first.returncode}):\n{first.stderr}", file=sys.stderr)
            return 2
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, env=env, cwd=workdir, check=True)
            times.append(time.perf_counter() - start)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    median = statistics.median(times)
    ok = median < args.target
    print(f"hpcai launch --dry-run, {NODES} nodes ({NODELIST}), site {args.site}, {args.runs} runs")
    print(f"  wall median {median:.3f} s   min {min(times):.3f} s   max {max(times):.3f} s")
    print(f"  target < {args.target:.3f} s: {'PASS' if ok else 'FAIL'} "
          f"(ratio {median / args.target:.2f} of the target)")
    figure("launch: --dry-run, 4,096 nodes", median, args.target, "s",
           note=f"median of {args.runs}, interpreter start included")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
