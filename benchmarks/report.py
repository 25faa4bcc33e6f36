#!/usr/bin/env python3
"""Run the benchmarks and print one table: figure, target, measured, ratio, PASS/FAIL/undecided/not run.

Each benchmark script records its figures through benchmarks/_report.py into one JSON-lines file
(HPCAI_BENCH_OUT); this script runs them in turn (their own output passes through), then prints the
table and writes build/bench/report.json: the figures and the machine they ran on (CPU model, cores,
memory, kernel, date, git sha), so two runs can be compared (--compare OLD.json).

Every target the performance issue sets is in the table: one a step did not measure (--quick, no
image or cluster, a step that failed, no benchmark for it yet) is "not run" with the reason; only a
measured figure can PASS.

    python benchmarks/report.py                  # every benchmark (Docker builds, the Slurm cluster)
    python benchmarks/report.py --quick          # the light ones: no image, build or cluster
    python benchmarks/report.py --compare OLD.json          # ... then old vs new, side by side
    python benchmarks/report.py --from build/bench/report.json --compare OLD.json   # no run
    python benchmarks/report.py --jsonl FIGURES.jsonl       # table of recorded figures, no run
    python benchmarks/report.py --from REPORT.json --markdown   # the table for the README

Exit status 1 when a figure FAILs or a step exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _report  # noqa: E402
from hpcai.files import dumps  # noqa: E402
from hpcai.output import plain  # noqa: E402

REPO = HERE.parent
DEFAULT_OUT = REPO / "build" / "bench" / "report.json"


@dataclass(frozen=True)
class Step:
    script: str
    args: tuple[str, ...] = ()
    quick: tuple[str, ...] | None = ()  # the arguments under --quick; None: not run then
    needs: str = ""  # what it needs that --quick leaves out


STEPS = (
    Step("render_matrix.py"),
    Step("launch_dryrun.py"),
    Step("entrypoint_overhead.py", ("--local",), ("--local",)),
    Step("entrypoint_overhead.py", ("--skip-docker-run",), None, "a Docker image"),
    Step("launch_overhead.py", (), None, "an image and the Slurm test cluster"),
    Step("launch_overhead.py", ("--payload", "sanity"), None, "an image and the Slurm test cluster"),
    Step("parse_throughput.py"),
    Step("rebuild_cache.py", (), ("--render-only",), "two Docker builds of pytorch-cpu"),
    Step("image_size.py", (), None, "a pytorch-cpu image (built when absent)"),
    Step("container_parity.py", (), None, "an image, podman, charliecloud and the Slurm test cluster"),
    Step("cold_build.py", (), None, "four cold Docker builds of pytorch-cpu"),
    Step("stage_scaling.py", ("--plot", "build/bench/stage-scaling.png"), None,
         "a 1 GiB SIF, Apptainer and the Slurm test cluster"),
)

# Every target of the performance issue: name -> (target, unit, better, the step that records it).
# A step's own record is authoritative; these fill in what was not measured.
EXPECTED: dict[str, tuple[float, str, str, Step | None]] = {
    "render: whole matrix, both formats": (1.0, "s", "lower", STEPS[0]),
    "launch: --dry-run, 4,096 nodes": (0.5, "s", "lower", STEPS[1]),
    "entrypoint: overhead per rank, no container": (10.0, "ms", "lower", STEPS[2]),
    "entrypoint: overhead per rank, in container": (10.0, "ms", "lower", STEPS[3]),
    "launch: 8-rank true job / hand srun (docker)": (1.15, "x", "lower", STEPS[4]),
    "launch: 8-rank sanity job / hand srun (docker)": (1.03, "x", "lower", STEPS[5]),
    "parse: nccl-tests log, CLI (slowest size)": (50.0, "MB/s", "higher", STEPS[6]),
    "parse: nccl-tests log, in-process (slowest size)": (50.0, "MB/s", "higher", STEPS[6]),
    "parse: peak RSS growth, smallest -> largest log": (10.0, "MB", "lower", STEPS[6]),
    "rebuild: builder steps kept on a component bump": (1.0, "x", "higher", STEPS[7]),
    "rebuild: one payload file edited / cold build": (0.10, "x", "lower", STEPS[7]),
    "image: toolchain/source files left in the image": (0.0, "files", "lower", STEPS[8]),
    "image: size / a minimal image": (1.10, "x", "lower", STEPS[8]),
    "build: cold build / a minimal image's build": (1.20, "x", "lower", STEPS[9]),
    "stage: shared-FS bytes, staged cold, 4 nodes / image size": (1.01, "x", "lower", STEPS[10]),
    "stage: time to all ranks, 4 nodes / (1 node x (1 + log2 4))": (1.0, "x", "lower", STEPS[10]),
    "stage: warm staging, 4 nodes": (2.0, "s", "lower", STEPS[10]),
}


def run_steps(quick: bool, jsonl: Path) -> tuple[list[dict[str, Any]], dict[Step, str]]:
    """Run each step (or skip it under --quick); the steps' records and why a step recorded nothing."""
    done, why = [], {}
    env = {**os.environ, _report.OUT_ENV: str(jsonl)}
    for step in STEPS:
        args = step.quick if quick else step.args
        label = " ".join(["benchmarks/" + step.script, *(args or ())])
        if args is None:
            why[step] = f"--quick (needs {step.needs})"
            continue
        print(f"\n=== {label}", flush=True)
        start = time.perf_counter()
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.run([sys.executable, str(HERE / step.script), *args], env=env, cwd=REPO,
                                  stderr=err, check=False)
            err.seek(0)
            stderr = err.read()
        if stderr.strip():
            sys.stderr.write("".join(stderr.splitlines(keepends=True)[-40:]))
        last = stderr.strip().splitlines()[-1][:160] if stderr.strip() else "no message"
        if proc.returncode:
            why[step] = f"{label} exited {proc.returncode}: {last}"
        elif quick and step.quick != step.args:  # a lighter run of it: the rest is left out on purpose
            why[step] = f"--quick (needs {step.needs})"
        else:
            why[step] = f"{label} recorded nothing"
        done.append({"step": label, "exit": proc.returncode, "seconds": round(time.perf_counter() - start, 2)})
    return done, why


def complete(figures: list[dict[str, Any]], why: dict[Step, str]) -> list[dict[str, Any]]:
    """The recorded figures, and each expected one that was not recorded as "not run" with its reason;
    in the order of EXPECTED, then any other figure a step recorded."""
    have = {f["name"]: f for f in figures}
    out = []
    for name, (target, unit, better, step) in EXPECTED.items():
        if name in have:
            out.append(have.pop(name))
        else:
            reason = why.get(step, "not run") if step else "no benchmark measures this yet"
            out.append(_report.record(name, None, target, unit, better, reason))
    return out + list(have.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the benchmarks that need no image, build or cluster")
    ap.add_argument("--out", type=Path, help=f"report to write (default {DEFAULT_OUT.relative_to(REPO)}; "
                    "with --jsonl, only when given)")
    ap.add_argument("--compare", type=Path, metavar="OLD.json", help="print OLD.json's figures beside these")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--from", dest="source", type=Path, metavar="REPORT.json", help="an existing report: run nothing")
    src.add_argument("--jsonl", type=Path, help="figures recorded by the scripts (HPCAI_BENCH_OUT): run nothing")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    args = ap.parse_args(argv)
    try:
        return _main(args)
    except _report.ReportError as exc:  # a file given (--from, --compare, --jsonl) that is not usable
        print(plain(f"report.py: error: {exc}"), file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    out = None
    old = _report.read_report(args.compare) if args.compare else None  # before any benchmark runs
    if args.source:
        report = _report.read_report(args.source)
    elif args.jsonl:
        if not os.path.lexists(args.jsonl):  # given by name: missing is a mistake, not "nothing recorded"
            raise _report.ReportError(f"{args.jsonl}: no such figures file")
        report = {"mode": f"figures from {args.jsonl}", "machine": _report.machine(),
                  "figures": complete(_report.read_jsonl(args.jsonl), {}), "steps": []}
        out = args.out
    else:
        out = args.out or DEFAULT_OUT
        out.parent.mkdir(parents=True, exist_ok=True)
        jsonl = out.with_suffix(".jsonl")
        jsonl.unlink(missing_ok=True)
        machine = _report.machine()  # the load before the benchmarks add theirs
        steps, why = run_steps(args.quick, jsonl)
        report = {"mode": "quick" if args.quick else "full", "machine": machine,
                  "figures": complete(_report.read_jsonl(jsonl), why), "steps": steps}
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dumps(report, indent=2) + "\n")

    figures = report["figures"]
    # text from the report file (mode, machine, figure names and notes) is shown escaped (plain)
    print(plain(f"\nBenchmarks ({report.get('mode', '?')}) on {_report.machine_line(report.get('machine', {}))}"))
    print(_report.table(figures, args.markdown))
    print(_report.summary(figures))
    if out:
        print(plain(f"written: {out}"))
    if old is not None:
        print()
        print(_report.compare(old, report, args.markdown))
    failed = any(f["status"] == _report.FAIL for f in figures) or any(s["exit"] for s in report.get("steps", []))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
