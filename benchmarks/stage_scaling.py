"""Targets (issue 29, item 5): starting an image on N nodes, the direct path against `launch
--stage`, side by side in one run on the 4-node test cluster, for N = 1, 2, 4, cold and warm:

- bytes read from the shared path: staged cold = 1x the image size for any N (target 1.01x:
  planning reads the SIF's labels from the site copy, a few KiB; direct: N x what each node's
  ranks touch);
- time to first rank and to all ranks, staging included: the staged time to all ranks grows no
  faster than log2 N (figure: t_all(4) / (t_all(1) x (1 + log2 4)) <= 1);
- a warm stage (every node holds the digest) under 2 s of staging.

The shared path is benchmarks/_countfs.py, FUSE views that count every byte read through them,
mounted under the test cluster's shared-propagation folder so every node reads through them
(tests/infra/slurm-up.sh: HPCAI_SLURM_SHARED): the direct path reads through a view with no page
cache (the 4 "nodes" share one kernel, and must not share what one of them read), the stage's
sbcast through one that allows mmap, which sbcast reads its source with. Each rank runs `python3 -c "import
torch; print(time.time())"` in the image by Apptainer (user-namespace mode: squashfuse reads the
SIF lazily, the way it does on a cluster); times are from the launch's start to those prints.
Then benchmarks/stage_model.py is calibrated on the run and predicts 64 ... 4,096 nodes: a table,
and a plot with --plot PNG.

    python benchmarks/stage_scaling.py [--image SIF] [--nodes 1,2,4] [--plot build/bench/stage-scaling.png]
    python benchmarks/stage_scaling.py --from-rows build/bench/stage-rows.json --fs-bandwidth 2e11 --plot X.png

IMAGE: a SIF of at least 1 GiB (default: the pytorch-cpu image made into a SIF, padded to 1 GiB
with a generic data object of random bytes when smaller, which a copy must move and a run never
reads; kept in build/bench/stage/ by the image's id).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import figure, not_run
from stage_model import SCALES, Params, depth, predict, with_overrides

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HPCAI_SLURM_SHARED", "/var/lib/hpcai-slurm/shared"))
NODE_LOCAL = os.environ.get("HPCAI_SLURM_NODE_LOCAL", "/var/cache/hpcai-node")
NODE_STATE = Path("/var/lib/hpcai-slurm/node-local")
GIB = 1 << 30
PROBE = "import time, torch; print(time.time())"
HPCAI = [sys.executable, "-m", "hpcai"]


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kw)


def build_image(out_dir: Path) -> Path:
    """The pytorch-cpu image as a SIF of at least 1 GiB, reused while the image id is the same."""
    tags = sh(["docker", "images", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}", "hpcai/pytorch-cpu-hpc"])
    found = [line.split() for line in tags.stdout.splitlines() if line.strip()]
    if not found:
        raise SystemExit("no hpcai/pytorch-cpu-hpc image: make build-pytorch-cpu first (or give --image)")
    tag, image_id = found[0]
    sif = out_dir / f"pytorch-cpu-{image_id[:12]}.sif"
    if not sif.is_file():
        out_dir.mkdir(parents=True, exist_ok=True)
        made = sh([*HPCAI, "sif", tag, "-o", str(sif)])
        if made.returncode != 0:
            raise SystemExit(f"hpcai sif {tag} failed: {made.stderr.strip()[-500:]}")
        short = GIB - sif.stat().st_size
        if short > 0:  # a generic data object, which Apptainer never reads at run time, of random bytes
            pad = out_dir / "pad.bin"
            with open(pad, "wb") as fh:
                for _ in range(short // (1 << 20) + 1):
                    fh.write(os.urandom(1 << 20))
            added = sh(["apptainer", "sif", "add", "--datatype", "7", "--filename", "hpcai-bench-pad", str(sif),
                        str(pad)])
            pad.unlink()
            if added.returncode != 0:
                sif.unlink()
                raise SystemExit(f"padding {sif} to 1 GiB failed: {added.stderr.strip()[-500:]}")
    return sif


def read_counts(mountpoint: Path) -> dict[str, int]:
    """The bytes read through the counting view so far, per file (benchmarks/_countfs.py)."""
    return json.loads((mountpoint / ".hpcai-bytes-read").read_bytes().rstrip(b" ") or b"{}")


class SharedPath:
    """Two counting FUSE views of a folder holding the image, under the cluster's shared folder:
    `direct` (no page cache: the nodes' own reads, which share this machine's kernel, all reach
    it) and `single` (the page cache within an open, so sbcast can mmap it: one reader)."""

    VIEWS = {"direct": [], "single": ["--mmap"]}

    def __init__(self, image: Path):
        self.base = Path(tempfile.mkdtemp(prefix="stage-bench-", dir=SHARED))
        (self.base / "root").mkdir()
        try:
            os.link(image, self.base / "root" / image.name)
        except OSError:
            shutil.copy2(image, self.base / "root" / image.name)
        self.procs = []
        for view, flags in self.VIEWS.items():
            (self.base / view).mkdir()
            self.procs.append(subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "_countfs.py"),
                                                str(self.base / "root"), str(self.base / view), *flags]))
        for _ in range(100):
            if all(os.path.ismount(self.base / view) for view in self.VIEWS):
                break
            time.sleep(0.1)
        else:
            self.close()
            raise SystemExit("the counting file system did not mount (is fuse3 installed? see benchmarks/_countfs.py)")
        self.name = image.name

    def image(self, view: str) -> Path:
        return self.base / view / self.name

    def bytes_read(self) -> int:
        """Through both views so far."""
        return sum(read_counts(self.base / view).get("/" + self.name, 0) for view in self.VIEWS)

    def close(self) -> None:
        for view in self.VIEWS:
            for tool in ("fusermount3", "fusermount"):
                if shutil.which(tool) and sh([tool, "-u", str(self.base / view)]).returncode == 0:
                    break
        for proc in self.procs:
            proc.wait(timeout=30)
        shutil.rmtree(self.base, ignore_errors=True)


def launch(image: Path, nodes: int, run_dir: Path, stage: bool, env: dict[str, str]) -> dict[str, float]:
    """One launch in an allocation of NODES nodes; seconds to the first and to every rank, from
    just before salloc, and the stage's own seconds."""
    start = time.time()
    # the same nodes every time (nid001…): a warm stage is warm only on the nodes it staged to
    res = sh(["salloc", "-N", str(nodes), "-w", f"nid[001-{nodes:03d}]", "--quiet", *HPCAI, "launch", *(["--stage"] if stage else []),
              "--runtime", "apptainer", "--userns", "-N", str(nodes), "--no-entrypoint", "--image", str(image),
              "-o", str(run_dir), "--cmd", "--", "python3", "-c", PROBE], env=env)
    if res.returncode != 0:
        raise SystemExit(f"launch on {nodes} nodes failed: {res.stderr.strip()[-800:]}")
    ready = [float((run_dir / "logs" / f"rank-{r}.out").read_text().split()[-1]) for r in range(nodes)]
    said = re.search(r"in ([0-9.]+) s: ", res.stderr)
    return {"first_s": min(ready) - start, "all_s": max(ready) - start,
            "stage_s": float(said.group(1)) if said else 0.0}


def measure(image: Path, scales: list[int], work: Path) -> list[dict]:
    shared = SharedPath(image)
    node_dir = f"{NODE_LOCAL}/{shared.base.name}"
    env = {**os.environ, "HPCAI_NODE_CACHE": node_dir, "HPCAI_IMAGE_CACHE": str(work / "site-cache")}
    rows = []
    try:
        # The launcher hashes an image file once for its record (hpcai.run.digests keeps it by path and
        # stat): done here for both views, so neither path's first launch counts that read.
        for view in SharedPath.VIEWS:
            sh([sys.executable, "-c", "import sys; from hpcai.run.digests import image_sha256; "
                "image_sha256(sys.argv[1])", str(shared.image(view))], env=env)
        for n in scales:
            for path in ("direct", "staged"):
                if path == "staged":  # cold: no node holds the image yet
                    for node in NODE_STATE.iterdir():
                        shutil.rmtree(node / shared.base.name, ignore_errors=True)
                for state in ("cold", "warm"):
                    before = shared.bytes_read()
                    got = launch(shared.image("direct" if path == "direct" else "single"), n,
                                 work / f"{path}-{state}-{n}", path == "staged", env)
                    rows.append({"nodes": n, "path": path, "state": state, **got,
                                 "bytes": shared.bytes_read() - before})
                    print(f"  {n} node(s) {path:6} {state}: {rows[-1]['bytes'] / GIB:6.3f} GiB read, first rank "
                          f"{got['first_s']:6.2f} s, all {got['all_s']:6.2f} s, staging {got['stage_s']:.2f} s",
                          flush=True)
    finally:
        shared.close()
        for node in NODE_STATE.iterdir():
            shutil.rmtree(node / shared.base.name, ignore_errors=True)
    return rows


def calibrate(rows: list[dict], size: int, fanout: int) -> Params:
    """The model's parameters from the measured rows (stage_model.py says what each one is): t_run
    from a warm stage on 1 node less its staging; B_node from the direct path's extra time on 1
    node, B_fs from it on the most nodes (no slower than B_node where 4 readers show no
    contention); t_srun and t_hop from the warm stage's seconds on 1 and on the most nodes;
    B_cast from the cold stage on 1 node less its two steps."""
    def row(n, path, state):
        return next(r for r in rows if (r["nodes"], r["path"], r["state"]) == (n, path, state))

    top = max(r["nodes"] for r in rows)
    touched = row(1, "direct", "warm")["bytes"]
    warm1 = row(1, "staged", "warm")
    run_s = warm1["all_s"] - warm1["stage_s"]
    extra_1 = max(row(1, "direct", "cold")["all_s"] - run_s, 0.01)
    extra_top = max(row(top, "direct", "cold")["all_s"] - run_s, 0.01)
    srun_s = max(warm1["stage_s"], 0.01)
    hop_s = max((row(top, "staged", "warm")["stage_s"] - srun_s) / max(depth(top, fanout), 1), 0.001)
    cast_s = max(row(1, "staged", "cold")["stage_s"] - 2 * srun_s, 0.01)
    return Params(image_bytes=size, touched_bytes=touched, node_bandwidth=touched / extra_1,
                  fs_bandwidth=max(top * touched / extra_top, touched / extra_1), cast_bandwidth=size / cast_s,
                  run_s=run_s, srun_s=srun_s, hop_s=hop_s, fanout=fanout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", help="A SIF of at least 1 GiB (default: pytorch-cpu, padded).")
    parser.add_argument("--nodes", default="1,2,4")
    parser.add_argument("--fanout", type=int, default=8)
    parser.add_argument("--plot", help="Write the model's plot here (PNG).")
    parser.add_argument("--rows", default=str(REPO / "build" / "bench" / "stage-rows.json"),
                        help="Where the measured rows are written (default build/bench/stage-rows.json).")
    parser.add_argument("--from-rows", metavar="JSON", help="Measure nothing: the model (and --plot) from rows "
                                                           "an earlier run wrote, e.g. with other bandwidths.")
    for name in ("fs-bandwidth", "node-bandwidth", "cast-bandwidth"):
        parser.add_argument(f"--{name}", type=float, help=f"Model with this {name} (bytes/s) instead of the fit.")
    args = parser.parse_args()
    scales = [int(n) for n in args.nodes.split(",")]
    if args.from_rows:
        saved = json.loads(Path(args.from_rows).read_text())
        print_measured(saved["rows"], saved["image_bytes"])
        return model(saved["rows"], saved["image_bytes"], args)
    names = ("stage: shared-FS bytes, staged cold, 4 nodes / image size",
             "stage: time to all ranks, 4 nodes / (1 node x (1 + log2 4))", "stage: warm staging, 4 nodes")
    if not shutil.which("salloc") or sh(["scontrol", "ping"]).returncode != 0 or not SHARED.is_dir():
        for name, target, unit in zip(names, (1.01, 1.0, 2.0), ("x", "x", "s")):
            not_run(name, target, unit, why="needs the Slurm test cluster (tests/infra/slurm-up.sh)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="hpcai-stage-bench-"))
    image = Path(args.image) if args.image else build_image(REPO / "build" / "bench" / "stage")
    size = image.stat().st_size
    print(f"image {image}: {size / GIB:.2f} GiB; nodes {scales}; shared path: a counting FUSE view", flush=True)
    try:
        rows = measure(image, scales, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    Path(args.rows).parent.mkdir(parents=True, exist_ok=True)
    Path(args.rows).write_text(json.dumps({"image_bytes": size, "rows": rows}, indent=1))
    print_measured(rows, size)
    top = max(scales)

    def pick(n, path, state):
        return next(r for r in rows if (r["nodes"], r["path"], r["state"]) == (n, path, state))

    figure(names[0], pick(top, "staged", "cold")["bytes"] / size, 1.01, "x",
           note=f"direct: {pick(top, 'direct', 'cold')['bytes'] / size:.2f}x; {size / GIB:.2f} GiB image")
    figure(names[1], pick(top, "staged", "cold")["all_s"] / (pick(1, "staged", "cold")["all_s"]
                                                              * (1 + math.log2(top))), 1.0, "x",
           note="staged, cold, staging included")
    figure(names[2], pick(top, "staged", "warm")["stage_s"], 2.0, "s")
    return model(rows, size, args)


def model(rows: list[dict], size: int, args: argparse.Namespace) -> int:
    """The model calibrated on ROWS (bandwidths given on the command line replace the fit's)."""
    params = with_overrides(calibrate(rows, size, args.fanout), fs_bandwidth=args.fs_bandwidth,
                            node_bandwidth=args.node_bandwidth, cast_bandwidth=args.cast_bandwidth)
    print_model(params)
    if args.plot:
        plot(params, rows, Path(args.plot))
    return 0


def print_measured(rows: list[dict], size: int) -> None:
    print(f"\n{'nodes':>5} {'path':>7} {'state':>5} {'GiB read':>9} {'x image':>8} {'first s':>8} {'all s':>7} "
          f"{'stage s':>8}")
    for r in rows:
        print(f"{r['nodes']:>5} {r['path']:>7} {r['state']:>5} {r['bytes'] / GIB:>9.3f} {r['bytes'] / size:>8.2f} "
              f"{r['first_s']:>8.2f} {r['all_s']:>7.2f} {r['stage_s']:>8.2f}")


def print_model(p: Params) -> None:
    print(f"\nmodel (benchmarks/stage_model.py), calibrated: image {p.image_bytes / GIB:.2f} GiB, touched "
          f"{p.touched_bytes / GIB:.3f} GiB per node, FS {p.fs_bandwidth / 1e9:.2f} GB/s shared, client "
          f"{p.node_bandwidth / 1e9:.2f} GB/s, sbcast {p.cast_bandwidth / 1e9:.2f} GB/s, ready from local "
          f"storage {p.run_s:.2f} s, srun step {p.srun_s:.2f} s, "
          f"hop {p.hop_s * 1000:.0f} ms, fan-out {p.fanout}")
    print(f"{'nodes':>6} {'direct s':>9} {'direct TiB':>11} {'staged cold s':>14} {'cold GiB':>9} {'warm s':>7}")
    for r in predict(p, SCALES):
        print(f"{r['nodes']:>6} {r['direct_s']:>9.1f} {r['direct_bytes'] / (1 << 40):>11.2f} {r['cold_s']:>14.1f} "
              f"{r['cold_bytes'] / GIB:>9.2f} {r['warm_s']:>7.1f}")


def plot(p: Params, measured: list[dict], out: Path) -> None:
    """The model's lines, 1 … 4,096 nodes, and the measured points on them (crosses)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scales = (1, 2, 4, 8, 16, 32, *SCALES)
    rows = predict(p, scales)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    series = (("direct_s", "direct", "direct", "cold"), ("cold_s", "staged, cold", "staged", "cold"),
              ("warm_s", "staged, warm", "staged", "warm"))
    for key, label, path, state in series:
        line, = left.plot(scales, [r[key] for r in rows], marker="o", markersize=3, label=f"{label} (model)")
        points = [r for r in measured if (r["path"], r["state"]) == (path, state)]
        left.plot([r["nodes"] for r in points], [r["all_s"] for r in points], "x", color=line.get_color(),
                  markersize=9, label=f"{label} (measured)")
    left.set(xlabel="nodes", ylabel="time to all ranks, staging included (s)", yscale="log",
             title="start-up")
    for key, label, path in (("direct_bytes", "direct", "direct"), ("cold_bytes", "staged, cold", "staged")):
        line, = right.plot(scales, [r[key] / GIB for r in rows], marker="o", markersize=3, label=f"{label} (model)")
        points = [r for r in measured if (r["path"], r["state"]) == (path, "cold")]
        right.plot([r["nodes"] for r in points], [r["bytes"] / GIB for r in points], "x", color=line.get_color(),
                   markersize=9, label=f"{label} (measured)")
    right.set(xlabel="nodes", ylabel="read from the shared file system (GiB)", yscale="log",
              title="shared file system")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("hpcai stage: model calibrated on the 4-node test cluster (benchmarks/stage_scaling.py)", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")


if __name__ == "__main__":
    sys.exit(main())
