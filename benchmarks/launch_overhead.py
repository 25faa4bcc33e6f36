"""Target: an 8-rank `true` job through `hpcai launch` on the Slurm test cluster takes at most
1.15x the wall time of the equivalent hand-written `srun … <runtime> … true` line (the
performance issue's target, with a single CLI definition; it was 1.10x).

Both sides start the same containers on the same nodes (4 nodes x 2 ranks) and run the image's
entrypoint before `true`; what differs is hpcai itself: planning, the per-rank shim, the run record.
The hand line is the bare one (no per-rank logs, names or variables), so the comparison is strict.
Runs alternate (hpcai, hand, hpcai, hand, …) so machine load drifts affect both alike; the ratio
of the medians is the figure checked (exit status 1 above the target). Also printed: the median
of the per-pair ratios (less sensitive to load drift), and the floor no Python launcher can go
below: an interpreter that imports what any launcher needs (subprocess, json, pathlib, argparse,
tomllib), as a share of the hand line, beside the bare interpreter (`python -c pass`, and
`python -S -c pass` without site-packages).

With --baseline-launcher DIR (a folder holding another version of the `hpcai` package, e.g. a copy
made before a change), that version is timed too, in the same interleaved rounds, and printed
beside the current one (no figure is recorded for it).

With --payload sanity the job is the sanity payload instead of `true` (target 1.03x): hpcai launches
`sanity` (and parses its ranks' output into the run record) against the hand line running the
image's `/opt/hpcai/bin/hpcai-bench sanity` on every rank.

    python benchmarks/launch_overhead.py [--image IMAGE] [--runtime docker|charliecloud] [--runs 5]
                                         [--payload sanity]

IMAGE: a docker tag, or for charliecloud a SquashFS file (a docker tag is converted with
tests/infra/ch-image.sh). Default: $HPCAI_PYTORCH_CPU_IMAGE, else the newest local
hpcai/pytorch-cpu-hpc image. Needs the cluster from tests/infra/slurm-up.sh.
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

from _report import figure, not_run

from hpcai.paths import ENTRYPOINT, RUNNER  # how the image starts and runs a payload

REPO = Path(__file__).resolve().parents[1]
NODES, PER_NODE = 4, 2
FLOOR = "import subprocess, json, pathlib, argparse, tomllib"  # what any Python launcher imports
TARGETS = {None: 1.15, "sanity": 1.03}  # the job: `true`, or a payload


def hpcai_argv() -> list[str]:
    script = Path(sys.executable).with_name("hpcai")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "hpcai"]


def hand_line(runtime: str, image: str, entrypoint: bool, payload: str | None = None) -> list[str]:
    """What a user would type for the same job (docker runs the image's ENTRYPOINT itself)."""
    srun = ["srun", f"--nodes={NODES}", f"--ntasks-per-node={PER_NODE}", "--kill-on-bad-exit=1"]
    cmd = [RUNNER, payload] if payload else ["true"]
    if runtime == "docker":
        # The container as hpcai starts it (runtimes/docker.py): the host's network, IPC and PID
        # namespaces and the seccomp profile that lets ranks use CMA; what differs is hpcai.
        profile = REPO / "launcher" / "hpcai" / "run" / "runtimes" / "seccomp-ranks.json"
        run = ["docker", "run", "--rm", "--network", "host", "--ipc", "host", "--pid", "host",
               "--security-opt", f"seccomp={profile}"]
        if not entrypoint:
            return srun + run + ["--entrypoint", cmd[0], image, *cmd[1:]]
        return srun + run + [image, *cmd]
    return srun + ["ch-run", image, "--"] + ([ENTRYPOINT] if entrypoint else []) + cmd


def default_image() -> str | None:
    if os.environ.get("HPCAI_PYTORCH_CPU_IMAGE"):
        return os.environ["HPCAI_PYTORCH_CPU_IMAGE"]
    res = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}",
                          "hpcai/pytorch-cpu-hpc"], capture_output=True, text=True, check=False)
    tags = res.stdout.split()
    return tags[0] if tags else None  # docker lists the newest first


def squashfs(image: str, env: dict[str, str]) -> str:
    """A SquashFS for ch-run: the file itself, or the docker image converted (cached by id)."""
    if Path(image).is_file():
        return image
    cache = os.environ.get("HPCAI_CH_CACHE", "/var/tmp/hpcai-ch")
    res = subprocess.run(["bash", str(REPO / "tests" / "infra" / "ch-image.sh"), image, cache],
                         capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise SystemExit(f"cannot convert {image} for ch-run:\n{res.stderr[-2000:]}")
    return res.stdout.strip()


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    wall = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"failed (exit {res.returncode}): {' '.join(argv)}\n{res.stderr[-3000:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default=None)
    ap.add_argument("--runtime", default="docker", choices=["docker", "charliecloud"])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--payload", choices=[p for p in TARGETS if p], help="a payload instead of `true`")
    ap.add_argument("--target", type=float, help="ratio (default 1.15 for `true`, 1.03 for sanity)")
    ap.add_argument("--no-entrypoint", action="store_true", help="image without hpcai-entrypoint")
    ap.add_argument("--baseline-launcher", type=Path, metavar="DIR",
                    help="also time the hpcai package in DIR (PYTHONPATH), interleaved")
    args = ap.parse_args()
    args.target = args.target or TARGETS[args.payload]
    job = args.payload or "true"
    name = f"launch: 8-rank {job} job / hand srun ({args.runtime})"

    env = {**os.environ, "USER": os.environ.get("USER") or "root"}  # ch-run needs USER
    # As installed: bytecode cached. With this set, every launch would recompile each module
    # changed since the last import that could write its .pyc (~3 ms per module).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    args.image = args.image or default_image()
    if not args.image:
        print("launch_overhead: no image (give --image or build pytorch-cpu); skipped")
        not_run(name, args.target, "x", why="no image: give --image or build pytorch-cpu")
        return 0
    if not shutil.which("srun"):
        print("launch_overhead: no srun (start the cluster: tests/infra/slurm-up.sh); skipped")
        not_run(name, args.target, "x", why="no srun: start tests/infra/slurm-up.sh")
        return 0
    if args.runtime == "charliecloud":
        args.image = squashfs(args.image, env)
    workdir = tempfile.mkdtemp(prefix="hpcai-overhead-")
    hand = hand_line(args.runtime, args.image, not args.no_entrypoint, args.payload)
    try:
        def hpcai(i: int) -> list[str]:
            return [*hpcai_argv(), "launch", "--image", args.image, "--runtime", args.runtime,
                    "--site", "generic-slurm", "-N", str(NODES), "--ntasks-per-node", str(PER_NODE),
                    "--output-dir", os.path.join(workdir, f"run-{i}"),
                    *(["--no-entrypoint"] if args.no_entrypoint else []),
                    *([args.payload] if args.payload else ["--cmd", "--", "true"])]

        other = {**env, "PYTHONPATH": str(args.baseline_launcher)} if args.baseline_launcher else None
        # what the console script runs, with PYTHONPATH picking the package
        other_argv = [sys.executable, "-c", "from hpcai.cli.main import main; main()"]

        timed(hpcai(-1), env, workdir)  # warm-up: page cache, image layers, squashfuse
        timed(hand, env, workdir)
        if other:
            timed([*other_argv, *hpcai(-2)[len(hpcai_argv()):]], other, workdir)
        ours, theirs, base = [], [], []
        for i in range(args.runs):
            ours.append(timed(hpcai(i), env, workdir))
            theirs.append(timed(hand, env, workdir))
            if other:
                base.append(timed([*other_argv, *hpcai(1000 + i)[len(hpcai_argv()):]], other, workdir))
        floors = {what: statistics.median(timed([sys.executable, *argv], env, workdir) for _ in range(args.runs))
                  for what, argv in (("imports", ["-c", FLOOR]), ("-c pass", ["-c", "pass"]),
                                     ("-S -c pass", ["-S", "-c", "pass"]))}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    a, b = statistics.median(ours), statistics.median(theirs)
    ratio = a / b
    paired = statistics.median(x / y for x, y in zip(ours, theirs))
    print(f"8-rank `{job}` job ({NODES} nodes x {PER_NODE}), runtime {args.runtime}, {args.runs} runs each")
    print(f"  hpcai launch : median {a:.3f} s  (min {min(ours):.3f}, max {max(ours):.3f})")
    print(f"  hand srun    : median {b:.3f} s  (min {min(theirs):.3f}, max {max(theirs):.3f})")
    print(f"  hand line    : {' '.join(hand)}")
    if base:
        c = statistics.median(base)
        print(f"  baseline     : median {c:.3f} s  (min {min(base):.3f}, max {max(base):.3f}) = {c / b:.3f}x "
              f"the hand line, per-pair {statistics.median(x / y for x, y in zip(base, theirs)):.3f} "
              f"({args.baseline_launcher})")
    floor = floors["imports"]
    print(f"  per-pair ratio median {paired:.3f}; Python floor {1000 * floor:.0f} ms = {floor / b:.1%} of the hand line "
          f"(python -c pass {1000 * floors['-c pass']:.0f} ms, python -S -c pass {1000 * floors['-S -c pass']:.0f} ms)")
    print(f"  ratio {ratio:.3f} (target <= {args.target:.2f}): {'PASS' if ratio <= args.target else 'FAIL'}")
    baseline = (f"; baseline {args.baseline_launcher.name}: {statistics.median(base) / b:.3f}x" if base else "")
    figure(name, ratio, args.target, "x",
           note=f"medians {a:.3f} / {b:.3f} s of {args.runs}, per-pair ratio {paired:.3f}; Python floor "
                f"{1000 * floor:.0f} ms (-c pass {1000 * floors['-c pass']:.0f} ms, -S {1000 * floors['-S -c pass']:.0f} ms)"
                + baseline)
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
