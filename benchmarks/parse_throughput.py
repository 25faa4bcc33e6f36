"""Target: `hpcai results parse --json` reads nccl-tests logs at 50 MB/s or more, interpreter start
included, with peak memory flat in the log's size (issue 12, item 8: a 250 MB log once failed with
MemoryError at 11.5 GB; 25 MB took 37 s and 3.3 GB and printed 80 MB of JSON).

Synthetic logs are made from the test fixtures (the nccl-tests header, the size table repeated up to
the size asked, the summary lines), once plain and once as `srun --label` writes them, in a
temporary folder. Each is parsed by the real CLI as a fresh process; the wall time gives MB/s and
the process's own peak RSS (wait4) the memory. Each log is parsed a second time in a bare
interpreter (parse_files and the JSON summary, timed from inside: the parser's own rate, without
the CLI's start-up). Exit status 1 when a log is read below the target either way, when the CLI's
peak RSS grows by more than --flat MB from the smallest log to the largest, or when the JSON
printed is not a small summary.

    python benchmarks/parse_throughput.py [--sizes 16,64,256] [--target 50] [--flat 10]
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

from _report import figure

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


# Run in a fresh interpreter: the parse alone (no CLI start-up), timed from inside; prints seconds.
IN_PROCESS = """
import sys, time
from pathlib import Path
from hpcai.files import dumps  # as `results parse --json` writes it (hpcai.output.emit_json)
from hpcai.results.parsers import parse_files, summary
start = time.perf_counter()
doc = dumps(summary(parse_files("nccl-tests", [Path(sys.argv[1])])))
print(time.perf_counter() - start)
"""


def _run(argv: list[str], out: Path, what: str) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one process writing its stdout to OUT."""
    with out.open("w") as stdout:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{what} failed: {proc.stderr.read().decode(errors='replace')}")
    proc.stderr.close()
    return wall, usage.ru_maxrss / 1024


def measure(log: Path, out: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, JSON bytes) of one `results parse --json` process."""
    argv = [*hpcai_argv(), "results", "parse", "-p", "nccl-tests", "--json", str(log)]
    wall, peak = _run(argv, out, f"results parse on {log.name}")
    json.loads(out.read_text())  # a complete document
    return wall, peak, out.stat().st_size


def measure_in_process(log: Path, out: Path) -> tuple[float, float]:
    """(parse seconds, peak RSS in MB) of parse_files + the --json summary in a bare interpreter."""
    _, peak = _run([sys.executable, "-c", IN_PROCESS, str(log)], out, f"in-process parse of {log.name}")
    return float(out.read_text().split()[-1]), peak


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,64,256", help="log sizes in MB, comma-separated")
    ap.add_argument("--target", type=float, default=50.0, help="MB/s")
    ap.add_argument("--flat", type=float, default=10.0, help="MB of peak RSS growth allowed across sizes")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))

    workdir = Path(tempfile.mkdtemp(prefix="hpcai-parse-"))
    failed = False
    cli_rates, own_rates, growths = [], [], []  # (MB/s, where)
    print(f"hpcai results parse --json, nccl-tests logs, target >= {args.target:g} MB/s, "
          f"peak RSS flat within {args.flat:g} MB; CLI: the real command, interpreter start included; "
          "in-process: parse_files + the JSON summary in a bare interpreter")
    print(f"  {'log':<13} {'size':>6} {'CLI wall':>8} {'CLI MB/s':>8} {'CLI RSS':>8} "
          f"{'in-proc':>8} {'MB/s':>7} {'RSS':>7} {'JSON':>7}")
    try:
        for shape, fixture in SHAPES.items():
            peaks = []
            for size_mb in sizes:
                log = workdir / f"nccl-{size_mb}.log"
                size = write_log(LOGS / fixture, size_mb, log) / MB
                wall, peak, printed = measure(log, workdir / "out.json")
                own, own_peak = measure_in_process(log, workdir / "own.txt")
                rate, own_rate = size / wall, size / own
                peaks.append(peak)
                cli_rates.append((rate, f"{shape}, {size:.0f} MB"))
                own_rates.append((own_rate, f"{shape}, {size:.0f} MB"))
                failed |= rate < args.target or own_rate < args.target or printed > SUMMARY_BYTES
                print(f"  {shape:<13} {size:>3.0f} MB {wall:>6.2f} s {rate:>8.1f} {peak:>5.0f} MB "
                      f"{own:>6.2f} s {own_rate:>7.1f} {own_peak:>4.0f} MB {printed:>5} B")
                log.unlink()
            growth = peaks[-1] - peaks[0]
            growths.append((growth, f"{shape}: CLI peak RSS {peaks[0]:.1f} -> {peaks[-1]:.1f} MB"))
            failed |= growth > args.flat
            print(f"  {shape:<13} CLI peak RSS {sizes[0]} MB -> {sizes[-1]} MB: {growth:+.1f} MB")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"  target: {'PASS' if not failed else 'FAIL'}")
    for label, rates in (("CLI", cli_rates), ("in-process", own_rates)):
        worst, best = min(rates), max(rates)
        figure(f"parse: nccl-tests log, {label} (slowest size)", worst[0], args.target, "MB/s", better="higher",
               note=f"slowest {worst[1]}; fastest {best[0]:.0f} MB/s ({best[1]})")
    worst = max(growths)
    figure("parse: peak RSS growth, smallest -> largest log", max(0.0, worst[0]), args.flat, "MB",
           note=f"{sizes[0]} -> {sizes[-1]} MB logs; {worst[1]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
