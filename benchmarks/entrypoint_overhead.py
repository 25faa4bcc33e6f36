#!/usr/bin/env python3
"""What hpcai-entrypoint costs each rank: the same command with and without it, same container.

Two measurements, median of N runs each, interleaved so drift hits both sides alike:

1. in-container (the meaningful figure, target <= 10 ms): inside one running container, time
   `hpcai-entrypoint true` against `true` (both fork+exec from a Python timer), with a Slurm
   rank environment so the rank hooks do real work; --host-lib also mounts a host libfabric
   dir so host-fabric builds its private link dir on every run.
2. docker run: `docker run --rm IMG true` against `docker run --rm --entrypoint '' IMG true`.
   Dominated by container start-up (hundreds of ms), so its ratio is close to 1 and noisy.

3. --local: part 1 on this machine without any container, with the repository's
   entrypoints/ (a quick check where Docker is absent or busy).

Usage: benchmarks/entrypoint_overhead.py [--image TAG] [--runs 20] [--host-lib DIR]
       benchmarks/entrypoint_overhead.py --local [--runs 20] [--host-lib DIR]
       (TAG defaults to $HPCAI_PYTORCH_CPU_IMAGE, else the newest local pytorch-cpu image; the
       image needs python3 for part 1.)
Exit status 1 when the in-container difference is above --limit-ms (default 10).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import figure
from launch_overhead import default_image

ENTRY = "/opt/hpcai/bin/hpcai-entrypoint"
SLURM_ENV = {
    "SLURM_JOB_ID": "123456", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "8", "SLURM_NODEID": "1", "SLURM_TASKS_PER_NODE": "4(x2)",
    "SLURM_JOB_NODELIST": "nid[001234-001236,001300]", "USER": "bench",
}
# Runs inside the container: prints {"with": [...], "without": [...]} in seconds.
IN_CONTAINER = """
import json, subprocess, sys, time
runs, entry = int(sys.argv[1]), sys.argv[2]
def once(argv):
    t = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - t
for _ in range(3):  # warm the page cache for both
    once([entry, "true"]); once(["true"])
out = {"with": [], "without": []}
for _ in range(runs):
    out["with"].append(once([entry, "true"]))
    out["without"].append(once(["true"]))
print(json.dumps(out))
"""


def report(label: str, with_ep: list[float], without: list[float]) -> float:
    a, b = statistics.median(with_ep), statistics.median(without)
    print(f"{label}: median with entrypoint {a * 1e3:8.2f} ms, without {b * 1e3:8.2f} ms, "
          f"ratio {a / b:6.2f}x, difference {(a - b) * 1e3:+7.2f} ms (n={len(with_ep)})")
    return a - b


def in_container(image: str, runs: int, host_lib: str | None) -> float:
    argv = ["docker", "run", "--rm", "--entrypoint", "python3"]
    for key, value in SLURM_ENV.items():
        argv += ["-e", f"{key}={value}"]
    if host_lib:
        argv += ["-v", f"{os.path.abspath(host_lib)}:/host/lib:ro"]
    argv += [image, "-c", IN_CONTAINER, str(runs), ENTRY]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"in-container timing failed: {proc.stderr.strip()[-2000:]}")
    times = json.loads(proc.stdout.strip().splitlines()[-1])
    label = "in-container" + (" (host libfabric mounted)" if host_lib else "")
    return report(label, times["with"], times["without"])


def local(runs: int, host_lib: str | None) -> float:
    entry = Path(__file__).resolve().parents[1] / "entrypoints" / "hpcai-entrypoint"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **SLURM_ENV, "TMPDIR": tmp,
               "HPCAI_HOST_LIB": os.path.abspath(host_lib) if host_lib else f"{tmp}/absent"}
        proc = subprocess.run([sys.executable, "-c", IN_CONTAINER, str(runs), str(entry)],
                              env=env, capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"local timing failed: {proc.stderr.strip()[-2000:]}")
    times = json.loads(proc.stdout.strip().splitlines()[-1])
    label = "local, no container" + (" (host libfabric)" if host_lib else "")
    return report(label, times["with"], times["without"])


def docker_run(image: str, runs: int) -> float:
    def once(*extra: str) -> float:
        t = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", *extra, image, "true"], check=True,
                       capture_output=True, timeout=120)
        return time.perf_counter() - t

    once()
    with_ep, without = [], []
    for _ in range(runs):
        with_ep.append(once())
        without.append(once("--entrypoint", ""))
    return report("docker run  ", with_ep, without)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", help="image with hpcai-entrypoint (default: $HPCAI_PYTORCH_CPU_IMAGE, "
                                        "else the newest local pytorch-cpu image)")
    parser.add_argument("--runs", type=int, default=20, help="runs per side (default 20)")
    parser.add_argument("--host-lib", help="a host libfabric dir to mount at /host/lib")
    parser.add_argument("--limit-ms", type=float, default=10.0, help="target (default 10 ms)")
    parser.add_argument("--skip-docker-run", action="store_true",
                        help="only the in-container measurement")
    parser.add_argument("--local", action="store_true",
                        help="time the repository's entrypoint on this machine, no container")
    args = parser.parse_args()
    if args.local:
        diff = local(args.runs, None)
        if args.host_lib:
            diff = max(diff, local(args.runs, args.host_lib))
        verdict = "OK" if diff * 1e3 <= args.limit_ms else "ABOVE TARGET"
        print(f"target: entrypoint adds <= {args.limit_ms:g} ms: {verdict}")
        figure("entrypoint: overhead per rank, no container", diff * 1e3, args.limit_ms, "ms",
               note=f"median of {args.runs}, repository's entrypoints/"
               + (", host libfabric" if args.host_lib else ""))
        sys.exit(0 if verdict == "OK" else 1)
    args.image = args.image or default_image()
    if not args.image:
        parser.error("no image: give --image, set HPCAI_PYTORCH_CPU_IMAGE or build pytorch-cpu")
    diff = in_container(args.image, args.runs, None)
    if args.host_lib:
        diff = max(diff, in_container(args.image, args.runs, args.host_lib))
    if not args.skip_docker_run:
        docker_run(args.image, args.runs)
    verdict = "OK" if diff * 1e3 <= args.limit_ms else "ABOVE TARGET"
    print(f"target: entrypoint adds <= {args.limit_ms:g} ms in-container: {verdict}")
    figure("entrypoint: overhead per rank, in container", diff * 1e3, args.limit_ms, "ms",
           note=f"median of {args.runs}, {args.image}" + (", host libfabric" if args.host_lib else ""))
    sys.exit(0 if verdict == "OK" else 1)


if __name__ == "__main__":
    main()
