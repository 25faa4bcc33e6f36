"""Target: `hpcai results parse --json` reads nccl-tests logs at 50 MB/s or more, interpreter start
included, with peak memory flat in the log's size (issue 12, item 8: a 250 MB log once failed with
MemoryError at 11.5 GB; 25 MB took 37 s and 3.3 GB and printed 80 MB of JSON).

Synthetic logs are made from the test fixtures (the nccl-tests header, the size table repeated up to
the size asked, the summary lines), once plain and once as `srun --label` writes them, in a
temporary folder. Each is parsed by the real CLI as a fresh process; the wall time gives MB/s and
the process's own peak RSS (wait4) the memory. Exit status 1 when a log is read below the target,
when the peak RSS grows by more than --flat MB from the smallest log to the largest, or when the
JSON printed is not a small summary.

    python benchmarks/parse_throughput.py [--sizes 50,200] [--target 50] [--flat 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOGS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs"
SHAPES = {"plain": "nccl_allreduce_2.21.log", "srun --label": "nccl_srun_label.log"}
MB = 1 << 20
SUMMARY_BYTES = 16 * 1024  # what --json may print without --rows, whatever the log's size


def hpcai_argv() -> list[str]:
    """The installed console script (what users run), else `python -m hpcai`."""
    script = Path(sys.executable).with_name("hpcai")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "hpcai"]


def write_log(fixture: Path, size_mb: int, path: Path) -> int:
    """FIXTURE's header, its table rows repeated to SIZE_MB, its closing lines; the size written."""
    lines = fixture.read_text().splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines)
            if line.split(": ", 1)[-1].strip()[:1].isdigit() and "#" not in line]
    head, table, tail = lines[:rows[0]], "".join(lines[rows[0]:rows[-1] + 1]), lines[rows[-1] + 1:]
    with path.open("w") as f:
        f.write("".join(head))
        for _ in range(size_mb * MB // len(table)):
            f.write(table)
        f.write("".join(tail))
    return path.stat().st_size


def measure(log: Path, out: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, JSON bytes) of one `results parse --json` process."""
    argv = [*hpcai_argv(), "results", "parse", "-p", "nccl-tests", "--json", str(log)]
    with out.open("w") as stdout:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"results parse failed on {log.name}: {proc.stderr.read().decode(errors='replace')}")
    json.loads(out.read_text())  # a complete document
    return wall, usage.ru_maxrss / 1024, out.stat().st_size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,200", help="log sizes in MB, comma-separated")
    ap.add_argument("--target", type=float, default=50.0, help="MB/s")
    ap.add_argument("--flat", type=float, default=30.0, help="MB of peak RSS growth allowed across sizes")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))

    workdir = Path(tempfile.mkdtemp(prefix="hpcai-parse-"))
    failed = False
    print(f"hpcai results parse --json, nccl-tests logs, target >= {args.target:g} MB/s, "
          f"peak RSS flat within {args.flat:g} MB")
    print(f"  {'log':<22} {'size':>8} {'wall':>8} {'MB/s':>8} {'ratio':>6} {'peak RSS':>10} {'JSON':>9}")
    try:
        for shape, fixture in SHAPES.items():
            peaks = []
            for size_mb in sizes:
                log = workdir / f"nccl-{size_mb}.log"
                size = write_log(LOGS / fixture, size_mb, log) / MB
                wall, peak, printed = measure(log, workdir / "out.json")
                rate = size / wall
                peaks.append(peak)
                failed |= rate < args.target or printed > SUMMARY_BYTES
                print(f"  {shape:<22} {size:>5.0f} MB {wall:>6.2f} s {rate:>8.1f} {rate / args.target:>6.2f} "
                      f"{peak:>7.0f} MB {printed:>7} B")
                log.unlink()
            growth = peaks[-1] - peaks[0]
            failed |= growth > args.flat
            print(f"  {shape:<22} peak RSS {sizes[0]} MB -> {sizes[-1]} MB: {growth:+.1f} MB")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"  target: {'PASS' if not failed else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
