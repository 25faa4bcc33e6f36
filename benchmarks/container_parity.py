"""Targets: inside each container runtime, the same workloads run at the host's speed:
bandwidth and throughput >= 0.97x the host's, latency <= 1.05x (the performance issue).

Both sides run the same scripts with the same Open MPI (Debian's 4.1.4), mpi4py (Debian's 3.1.4)
and Python (Debian's 3.11): the host through Debian's packages and a venv holding the image's own
torch and numpy pins (its `hpcai.component.framework` label, from pip's configured wheelhouse);
the image through the same Debian packages and its venv. Every run goes through srun on the
Slurm test cluster with the same geometry and `--mpi=pmix`: the host side as `srun … sh PERNODE
python SCRIPT …`, each runtime as `hpcai launch --runtime R … --cmd -- sh PERNODE python SCRIPT …`
(so hpcai's own container flags are what is measured), the scripts bound at the same path.

Workloads (2 nodes x 1 rank, and x 2 ranks where ranks share a node):
  pingpong latency, 8 B      benchmarks/pingpong.py (osu_latency's loop; the OSU micro-benchmarks
  pingpong bandwidth, 4 MiB  have no reachable source here), parsed by hpcai's `osu` parser
  mpi-allreduce busbw        payloads/mpi-allreduce/allreduce.py, largest size
  ddp-bench ex/s             payloads/ddp-bench/ddp_bench.py, CPU, gloo, the built-in convnet

The test cluster's fake nodes share this machine's host name and /dev/shm: PERNODE gives each
fake node its own Open MPI shared-memory directory (else ranks of two "nodes" would map each
other's segments), keeps TCP on the loopback, and makes waiting ranks yield (4 ranks, 2 cores),
on both sides alike. Runs are interleaved (host, docker, podman, …, then again). Each figure is the
ratio of the runtime's mean to the host's with its 95 % bootstrap interval, the method of `hpcai
results compare` (benchmarks/_repeats.py): every comparison runs --repeats times, then only the
undecided ones again until their interval lies wholly on one side of the target or they reach
--max-repeats; PASS, FAIL or "undecided" is the interval's verdict.

Apptainer runs the SIF `hpcai sif` makes of the image (cached by image Id), in user-namespace mode
where this host's root cannot run it otherwise; each node's two ranks share one instance.

    python benchmarks/container_parity.py [--quick] [--repeats 5] [--max-repeats 15]
                                          [--runtimes docker,podman,charliecloud,pyxis,apptainer]
                                          [--image TAG] [--podman-image TAG] [--out DIR]

Writes DIR/parity.json (every run's value), DIR/parity.png (hpcai.results' bars: one panel per
workload, one bar per side). Default DIR: build/bench/container-parity.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _parity_images import podman_copy, sif, sqsh
from _repeats import judge, note, still_open
from _report import figure, not_run
from hpcai.files import dumps
from launch_overhead import default_image, hpcai_argv, squashfs

REPO = Path(__file__).resolve().parents[1]
HOST_PYTHON = "/usr/bin/python3"  # Debian's: the one python3-mpi4py is built for, as in the image
PERNODE = """#!/bin/sh
# The test cluster's fake nodes share one /dev/shm and host name: one Open MPI shared-memory
# directory per fake node, TCP on the loopback, ranks that yield while they wait (2 cores).
d="/dev/shm/hpcai-parity-${SLURMD_NODENAME:-node}"
mkdir -p "$d"
export OMPI_MCA_btl_vader_backing_directory="$d" OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_mpi_yield_when_idle=1
exec "$@"
"""
TARGETS = {"higher": 0.97, "lower": 1.05}


@dataclass(frozen=True)
class Workload:
    name: str       # figure name part
    script: str     # file copied into the shared work folder
    args: tuple[str, ...]
    parser: str
    metric: str
    better: str
    per_node: int

    @property
    def label(self) -> str:
        return f"{self.name}, 2x{self.per_node}"


def workloads(quick: bool) -> list[Workload]:
    iters = "200" if quick else "1000"
    ddp = ("--model", "convnet", "--image-size", "32", "--batch-size", "8", "--iters", "5" if quick else "10",
           "--warmup", "2", "--backend", "gloo", "--threads", "1", "--json", "/dev/null")
    sweep = ("--min-bytes", "8", "--max-bytes", "4194304", "--iters", "20" if quick else "50", "--warmup", "5")
    out = [Workload("pingpong latency 8 B", "pingpong.py", ("latency", "--sizes", "8", "--iters", iters),
                    "osu", "latency_8B", "lower", 1),
           Workload("pingpong bandwidth 4 MiB", "pingpong.py", ("bw", "--sizes", "4194304", "--iters", iters),
                    "osu", "bandwidth_4194304B", "higher", 1)]
    for per_node in (1, 2):
        out.append(Workload("mpi-allreduce busbw", "allreduce.py", sweep, "mpi-allreduce", "busbw_max_size",
                            "higher", per_node))
    out.append(Workload("ddp-bench ex/s", "ddp_bench.py", ddp, "ddp-bench", "ex_per_sec_total", "higher", 1))
    if not quick:
        out.append(Workload("pingpong latency 8 B", "pingpong.py", ("latency", "--sizes", "8", "--iters", iters),
                            "osu", "latency_8B", "lower", 2))
        out.append(Workload("pingpong bandwidth 4 MiB", "pingpong.py", ("bw", "--sizes", "4194304", "--iters", iters),
                            "osu", "bandwidth_4194304B", "higher", 2))
        out.append(Workload("ddp-bench ex/s", "ddp_bench.py", ddp, "ddp-bench", "ex_per_sec_total", "higher", 2))
    return out


def run(argv: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def image_pins(image: str) -> list[str]:
    """The image's framework pins (torch==…, numpy==…), from its label."""
    res = run(["docker", "image", "inspect", "--format", '{{index .Config.Labels "hpcai.component.framework"}}',
               image], os.environ)
    pins = res.stdout.split()
    if res.returncode or not pins:
        raise SystemExit(f"container_parity: {image} has no hpcai.component.framework label: {res.stderr.strip()}")
    return pins


def host_venv(out: Path, pins: list[str]) -> Path:
    """A venv over Debian's python3 (its mpi4py seen through system site packages, as in the
    image) with the image's torch and numpy, installed by pip from its configured sources."""
    venv = out / "host-venv"
    stamp = venv / "hpcai-pins.txt"
    if stamp.is_file() and stamp.read_text().split() == pins:
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    for argv in ([HOST_PYTHON, "-m", "venv", "--system-site-packages", str(venv)],
                 [str(venv / "bin" / "pip"), "install", "-q", "--no-cache-dir", *pins]):
        res = run(argv, os.environ, timeout=1800)
        if res.returncode:
            raise SystemExit(f"container_parity: {' '.join(argv)} failed:\n{res.stderr[-2000:]}")
    stamp.write_text(" ".join(pins) + "\n")
    return venv


def prepare(work: Path) -> None:
    """The scripts both sides run, in one folder bound into the containers at the same path."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "pernode.sh").write_text(PERNODE)
    for src in (REPO / "benchmarks" / "pingpong.py", REPO / "payloads" / "mpi-allreduce" / "allreduce.py",
                REPO / "payloads" / "ddp-bench" / "ddp_bench.py"):
        shutil.copy2(src, work / src.name)


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


class Sides:
    """How each side starts the same command: the host through srun, a runtime through hpcai launch."""

    def __init__(self, work: Path, venv: Path, images: dict[str, str], env: dict[str, str]):
        self.work, self.venv, self.images, self.env = work, venv, images, env
        self.count = 0

    def command(self, w: Workload) -> list[str]:
        return ["sh", str(self.work / "pernode.sh"), "python", str(self.work / w.script), *w.args]

    def log(self, side: str, w: Workload) -> Path:
        """Run WORKLOAD on SIDE; rank 0's output file."""
        self.count += 1
        out = self.work / "runs" / f"{self.count:03d}-{side}"
        if side == "host":
            out.mkdir(parents=True)
            env = {**self.env, "PATH": f"{self.venv / 'bin'}:{self.env['PATH']}", "MASTER_PORT": free_port()}
            argv = ["srun", "--nodes=2", f"--ntasks-per-node={w.per_node}", "--mpi=pmix", "--kill-on-bad-exit=1",
                    f"--output={out}/rank-%t.out", f"--error={out}/rank-%t.err", *self.command(w)]
            res, log = run(argv, env), out / "rank-0.out"
        else:
            bind = [] if side == "charliecloud" else ["--bind", f"{self.work}:{self.work}"]
            argv = [*hpcai_argv(), "launch", "--image", self.images[side], "--runtime", side,
                    "--site", "generic-slurm", "-N", "2", "--ntasks-per-node", str(w.per_node), "--mpi", "pmix",
                    *bind, *side_options(side), "--output-dir", str(out), "--cmd", "--", *self.command(w)]
            res, log = run(argv, self.env), out / "logs" / "rank-0.out"
        if res.returncode:
            raise RuntimeError(f"{side} {w.label} exit {res.returncode}: {res.stderr.strip()[-800:]}")
        return log


def value(w: Workload, log: Path) -> float:
    from hpcai.results.parsers import parse_files

    metrics = {m.name: m.value for m in parse_files(w.parser, [log]).metrics}
    if w.metric not in metrics:
        raise RuntimeError(f"{log}: no {w.metric} in {sorted(metrics)}")
    return float(metrics[w.metric])


def plot(results: dict[str, dict[str, list[float]]], units: dict[str, str], path: Path) -> None:
    from hpcai.results.plot import bars

    panels = [(label, units[label], [(side, vals) for side, vals in by_side.items() if vals])
              for label, by_side in results.items() if any(by_side.values())]
    if panels:
        fig = bars(panels)
        fig.savefig(path)


def measure(sides: Sides, wl: list[Workload], runtimes: list[str], repeats: int, bound: int):
    """Interleaved rounds until every comparison is decided or has run BOUND times (_repeats.py):
    (each workload's values by side, the failures, each comparison's judgement)."""
    results: dict[str, dict[str, list[float]]] = {w.label: {s: [] for s in ["host", *runtimes]} for w in wl}
    errors: dict[tuple[str, str], str] = {}
    judged = {}
    start, done = time.monotonic(), 0
    while todo := still_open({(w.label, r) for w in wl for r in runtimes} - set(errors), judged, done, repeats, bound):
        for w in wl:  # interleaved: the host, then each runtime whose comparison is still open
            for side in ["host", *(r for r in runtimes if (w.label, r) in todo)]:
                if side == "host" and not any((w.label, r) in todo for r in runtimes):
                    continue
                try:
                    results[w.label][side].append(value(w, sides.log(side, w)))
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    errors[(w.label, side)] = str(exc).splitlines()[0][:200]
                    print(f"  {side} {w.label}: FAILED {exc}", file=sys.stderr)
                    if side == "host":  # nothing to compare this workload's runtimes with
                        errors.update({(w.label, r): errors[(w.label, side)] for r in runtimes})
                        break
        done += 1
        judged = {(w.label, r): judge(results[w.label]["host"], results[w.label][r], TARGETS[w.better], w.better)
                  for w in wl for r in runtimes if (w.label, r) not in errors}
        print(f"round {done}: {sum(not j.decided for j in judged.values())} of {len(judged)} comparisons undecided "
              f"({time.monotonic() - start:.0f} s)", flush=True)
    return results, errors, judged


def report(wl, runtimes, results, errors, judged, units, repeats: int, bound: int) -> None:
    """The table, and one figure per runtime and workload: the ratio of means and its interval."""
    print(f"\ncontainer parity: runtime / host, ratio of means [95 % interval], {repeats} to {bound} interleaved runs")
    print(f"{'workload':<32} {'host':>10} " + " ".join(f"{r:>34}" for r in runtimes))
    for w in wl:
        host = results[w.label]["host"]
        hm = sum(host) / len(host) if host else None
        cells = []
        for r in runtimes:
            vals, j = results[w.label][r], judged.get((w.label, r))
            name = f"parity: {r}/host, {w.label}"
            if j and j.ratio is not None and j.interval:
                m = sum(vals) / len(vals)
                cells.append(f"{j.ratio:.3f}x [{j.interval[0]:.3f}, {j.interval[1]:.3f}] {j.status}")
                figure(name, j.ratio, TARGETS[w.better], "x", w.better, interval=j.interval,
                       note=note(j, r, m, hm, units[w.label], bound))
            else:
                why = errors.get((w.label, r)) or "no run"
                cells.append("failed")
                not_run(name, TARGETS[w.better], "x", w.better, why=why)
        print(f"{w.label:<32} {hm if hm is not None else float('nan'):10.4g} " + " ".join(f"{c:>34}" for c in cells))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer workloads and repeats (3)")
    ap.add_argument("--repeats", type=int, help="interleaved repeats of every comparison (default 5, --quick 3)")
    ap.add_argument("--max-repeats", type=int, help="the bound: an undecided comparison runs again until decided "
                                                    "or this many times (default 15, --quick 6)")
    ap.add_argument("--runtimes", help="comma-separated (default: docker,podman,charliecloud, pyxis where "
                                       "srun has the plugin, apptainer where it is installed)")
    ap.add_argument("--image", help="pytorch-cpu docker tag (default: $HPCAI_PYTORCH_CPU_IMAGE, else the newest)")
    ap.add_argument("--podman-image", help="the same image in podman's storage (default: copied from docker)")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench" / "container-parity")
    args = ap.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    bound = max(repeats, args.max_repeats or (6 if args.quick else 15))
    runtimes = [r for r in (args.runtimes or default_runtimes()).split(",") if r]
    wl = workloads(args.quick)

    def skip(why: str) -> int:
        print(f"container_parity: {why}; skipped")
        for w in wl:
            for r in runtimes:
                not_run(f"parity: {r}/host, {w.label}", TARGETS[w.better], "x", w.better, why)
        return 0

    image = args.image or default_image()
    if not image:
        return skip("no pytorch-cpu image (give --image or build pytorch-cpu)")
    if not shutil.which("srun"):
        return skip("no srun (start tests/infra/slurm-up.sh)")
    env = {**os.environ, "USER": os.environ.get("USER") or "root"}
    # Under /tmp: ch-run shares the host's /tmp, so the folder is there at the same path without
    # a bind (it cannot make a mount point in a read-only SquashFS image).
    work = Path("/tmp/hpcai-container-parity")
    shutil.rmtree(work, ignore_errors=True)
    prepare(work)
    venv = host_venv(args.out, image_pins(image))
    images = {"docker": image}
    if "podman" in runtimes:
        images["podman"] = args.podman_image or podman_copy(image, env)
    if "charliecloud" in runtimes:
        images["charliecloud"] = squashfs(image, env)
    if "pyxis" in runtimes:
        images["pyxis"] = sqsh(image, env)
    if "apptainer" in runtimes:
        images["apptainer"] = sif(image, env)
    sides = Sides(work, venv, images, env)

    results, errors, judged = measure(sides, wl, runtimes, repeats, bound)
    units = {w.label: "us" if w.better == "lower" else ("ex/s" if w.parser == "ddp-bench" else "MB/s") for w in wl}
    report(wl, runtimes, results, errors, judged, units, repeats, bound)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "parity.json").write_text(dumps(  # valid JSON: a NaN measurement is null
        {"repeats": repeats, "bound": bound, "images": images, "results": results,
         "judged": {f"{k[1]} {k[0]}": vars(v) for k, v in judged.items()},
         "errors": {f"{k[1]} {k[0]}": v for k, v in errors.items()}}, indent=2) + "\n")
    plot(results, units, args.out / "parity.png")
    print(f"written: {args.out / 'parity.json'}, {args.out / 'parity.png'}")
    return 0


def default_runtimes() -> str:
    """docker, podman, charliecloud, pyxis where this cluster's srun has the plugin, apptainer where
    it is installed."""
    plugin = shutil.which("srun") and "--container-image" in run(["srun", "--help"], os.environ).stdout
    return "docker,podman,charliecloud" + (",pyxis" if plugin else "") + (",apptainer" if shutil.which("apptainer") else "")


def side_options(side: str) -> list[str]:
    """apptainer: user-namespace mode where root here cannot run it otherwise (a site file's
    apptainer_userns would say so at a site)."""
    if side != "apptainer":
        return []
    from hpcai.run.runtimes.apptainer import root_caps_missing

    return ["--userns"] if root_caps_missing() else []


if __name__ == "__main__":
    sys.exit(main())
