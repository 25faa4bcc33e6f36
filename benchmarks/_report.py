"""The benchmarks' shared record: each figure a script measures, printed as one line and, when
HPCAI_BENCH_OUT names a file, appended to it as one JSON line; and what benchmarks/report.py makes of
those lines (the table, the verdicts, the side-by-side comparison of two reports, the machine).

A figure has a target and a direction (`better="lower"`: measured <= target passes; "higher":
measured >= target). One that was not measured (no image, no cluster, `--quick`) is recorded with
measured None and is "not run", never PASS. A figure measured with a confidence interval
(`interval=(low, high)`, as container_parity.py's ratios are) is judged by the interval: PASS when
all of it meets the target, FAIL when none of it does, "undecided" when it straddles the target
(its repeats cannot tell; more of them would).

    from _report import figure, not_run
    figure("render: whole matrix", 0.41, 1.0, "s")
    figure("parse: CLI throughput", 96.5, 50, "MB/s", better="higher", note="16 MB log")
    not_run("image: size / minimal image", 1.10, "x", why="--quick")
"""

from __future__ import annotations

import datetime
import math
import os
import platform
from pathlib import Path
from typing import Any

from hpcai.files import BadFile, dumps, parse_json, read_json, read_text
from hpcai.output import plain

OUT_ENV = "HPCAI_BENCH_OUT"
PASS, FAIL, NOT_RUN, UNDECIDED = "PASS", "FAIL", "not run", "undecided"
BETTER = ("lower", "higher")


class ReportError(ValueError):
    """A figures file or report that cannot be used: one line naming the file and the key."""


def verdict(measured: float | None, target: float, better: str, interval: tuple[float, float] | None = None) -> str:
    """PASS, FAIL, or "not run" when nothing was measured; with an INTERVAL, "undecided" when it
    straddles the target."""
    if better not in BETTER:
        raise ValueError(f"better must be one of {BETTER}, not {better!r}")
    if measured is None:
        return NOT_RUN

    def meets(x: float) -> bool:
        return x <= target if better == "lower" else x >= target

    if interval is None:
        return PASS if meets(measured) else FAIL
    low_meets, high_meets = meets(interval[0]), meets(interval[1])
    return PASS if low_meets and high_meets else FAIL if not (low_meets or high_meets) else UNDECIDED


def ratio(measured: float | None, target: float) -> float | None:
    """measured / target (None when not measured or the target is 0)."""
    return None if measured is None or not target else measured / target


def record(name: str, measured: float | None, target: float, unit: str, better: str = "lower",
           note: str = "", interval: tuple[float, float] | None = None) -> dict[str, Any]:
    """One figure as report.json holds it. A measurement that is not a finite number (a timer that
    divided by zero) is no measurement: "not run", with the value in the note."""
    if measured is not None and not math.isfinite(float(measured)):
        note = f"measured {float(measured)}, not a finite number" + (f"; {note}" if note else "")
        measured = interval = None
    if measured is None:
        interval = None
    rec = {"name": name, "measured": None if measured is None else float(measured),
           "target": float(target), "unit": unit, "better": better, "note": note,
           "ratio": ratio(measured, target), "status": verdict(measured, target, better, interval)}
    if interval is not None:
        rec["interval"] = [float(interval[0]), float(interval[1])]
    return rec


def _emit(rec: dict[str, Any]) -> dict[str, Any]:
    print(plain(f"figure: {rec['name']}: {_value(rec['measured'], rec['unit'])} "
                f"(target {_bound(rec)}): {rec['status']}{' - ' + rec['note'] if rec['note'] else ''}"), flush=True)
    out = os.environ.get(OUT_ENV)
    if out:
        with open(out, "a", encoding="utf-8") as f:  # one short line per write: appends stay whole
            f.write(dumps(rec) + "\n")
    return rec


def figure(name: str, measured: float, target: float, unit: str, better: str = "lower",
           note: str = "", interval: tuple[float, float] | None = None) -> dict[str, Any]:
    """Print and record a measured figure; returns its record (status PASS or FAIL, or undecided
    when its INTERVAL straddles the target)."""
    return _emit(record(name, measured, target, unit, better, note, interval))


def not_run(name: str, target: float, unit: str, better: str = "lower", why: str = "") -> dict[str, Any]:
    """Print and record a figure that was not measured, and why."""
    return _emit(record(name, None, target, unit, better, why))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The figures a run recorded (a later record of the same name replaces an earlier one); none
    when PATH does not exist (no step recorded any). A bad line is a ReportError naming it."""
    figures: dict[str, dict[str, Any]] = {}
    if os.path.lexists(path):
        for n, line in enumerate(_read(read_text, path).splitlines(), 1):
            if line.strip():
                where = f"{path}: line {n}"
                rec = checked(_read(parse_json, line, where), where)
                figures[rec["name"]] = rec
    return list(figures.values())


def _read(reader: Any, *args: Any) -> Any:
    """READER(*ARGS), a hpcai.files reader (regular files, size and depth bounds, no NaN); a file
    that is missing, unreadable, not JSON or too deep is a ReportError in one line."""
    try:
        return reader(*args)
    except BadFile as exc:
        raise ReportError(str(exc)) from None
    except OSError as exc:
        raise ReportError(f"{args[0]}: cannot be read ({exc.strerror or exc})") from None


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _size(x: Any) -> bool:
    """A figure's measurement or target: a time, a size, a rate, a count or a ratio, never below 0."""
    return _number(x) and x >= 0


# A figure as a figures line or report.json holds it: name, target and unit required, measured a
# number >= 0 or null, target a number >= 0 (a time, size, count or ratio is never negative), better
# "lower" or "higher" (default lower), note text. Its ratio and status are recomputed, never taken
# from the file (a record claiming PASS unmeasured is "not run"). A report names each figure once.
def checked(rec: Any, where: str) -> dict[str, Any]:
    """REC as a figure record, or a ReportError naming WHERE and the key."""
    if not isinstance(rec, dict):
        raise ReportError(f"{where}: a figure is a JSON object, not {type(rec).__name__}")
    problems = [
        ("name", isinstance(rec.get("name"), str) and rec["name"] != "", "text"),
        ("target", _size(rec.get("target")), "a finite number >= 0"),
        ("unit", isinstance(rec.get("unit"), str), "text (\"\" for none)"),
        ("measured", rec.get("measured") is None or _size(rec["measured"]), "a finite number >= 0 or null"),
        ("better", rec.get("better", "lower") in BETTER, " or ".join(BETTER)),
        ("note", isinstance(rec.get("note", ""), str), "text"),
        ("interval", rec.get("interval") is None or (
            isinstance(rec["interval"], list) and len(rec["interval"]) == 2 and all(map(_size, rec["interval"]))
            and rec["interval"][0] <= rec["interval"][1]), "[low, high], finite numbers >= 0, low <= high, or null"),
    ]
    for key, ok, shape in problems:
        if not ok:
            got = "missing" if key not in rec else f"got {rec[key]!r}"
            raise ReportError(f"{where}: figure {rec.get('name', '?')!r}: {key} must be {shape} ({got})")
    return record(rec["name"], rec.get("measured"), rec["target"], rec["unit"], rec.get("better", "lower"),
                  rec.get("note", ""), rec.get("interval"))


def read_report(path: Path) -> dict[str, Any]:
    """A report.json (--from, --compare): its figures checked one by one, its machine an object."""
    report = _read(read_json, path)
    if not isinstance(report, dict):
        raise ReportError(f"{path}: a report is a JSON object with \"figures\", not {type(report).__name__}")
    if not isinstance(report.get("figures"), list):
        raise ReportError(f"{path}: figures must be a list of figure objects "
                          f"({'missing' if 'figures' not in report else type(report['figures']).__name__})")
    for key, kind in (("machine", dict), ("steps", list), ("mode", str)):
        if key in report and not isinstance(report[key], kind):
            raise ReportError(f"{path}: {key} must be a JSON {'object' if kind is dict else kind.__name__}")
    for i, step in enumerate(report.get("steps", [])):
        if not isinstance(step, dict) or not isinstance(step.get("exit", 0), int):
            raise ReportError(f"{path}: steps[{i}] must be an object with an integer exit")
    figures = [checked(f, f"{path}: figures[{i}]") for i, f in enumerate(report["figures"])]
    seen: dict[str, int] = {}
    for i, f in enumerate(figures):  # figures are looked up by name: a second one would silently win
        if f["name"] in seen:
            raise ReportError(f"{path}: figures[{i}]: figure {f['name']!r} is given twice "
                              f"(also figures[{seen[f['name']]}]); a report names each figure once")
        seen[f["name"]] = i
    return {**report, "figures": figures}


# --- formatting ---------------------------------------------------------------------------------

def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def _value(x: float | None, unit: str, interval: list[float] | None = None) -> str:
    if x is None:
        return "-"
    return f"{_num(x)}{f' [{_num(interval[0])}, {_num(interval[1])}]' if interval else ''} {unit}".rstrip()


def _bound(rec: dict[str, Any]) -> str:
    return f"{'<=' if rec['better'] == 'lower' else '>='} {_value(rec['target'], rec['unit'])}"


def _grid(header: list[str], rows: list[list[str]], markdown: bool = False) -> str:
    """The table as text; every cell passes `plain` (names and notes come from files: a control
    character is shown escaped, never sent to the terminal), before the widths are measured."""
    header, rows = [plain(c) for c in header], [[plain(c) for c in r] for r in rows]
    if markdown:
        lines = [header, ["---"] * len(header), *rows]
        return "\n".join("| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [header, ["-" * w for w in widths], *rows])


def table(figures: list[dict[str, Any]], markdown: bool = False) -> str:
    """figure, target, measured, ratio (measured / target), PASS/FAIL/not run, note."""
    rows = [[f["name"], _bound(f), _value(f["measured"], f["unit"], f.get("interval")),
             "-" if f["ratio"] is None else f"{f['ratio']:.2f}", f["status"], f.get("note", "")]
            for f in figures]
    return _grid(["figure", "target", "measured", "ratio", "result", "note"], rows, markdown)


def summary(figures: list[dict[str, Any]]) -> str:
    counts = {s: sum(f["status"] == s for f in figures) for s in (PASS, FAIL, UNDECIDED, NOT_RUN)}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n or s != UNDECIDED)


def compare(old: dict[str, Any], new: dict[str, Any], markdown: bool = False) -> str:
    """Two reports side by side: each figure's old and new measurement, the change, both verdicts
    (figures in either report; "-" where one lacks it), then the two machines when they differ."""
    a = {f["name"]: f for f in old["figures"]}
    b = {f["name"]: f for f in new["figures"]}
    rows = []
    for name in [*b, *(n for n in a if n not in b)]:
        x, y = a.get(name), b.get(name)
        unit = (y or x)["unit"]
        xm, ym = (x or {}).get("measured"), (y or {}).get("measured")
        change = f"{(ym - xm) / xm:+.1%}" if xm and ym is not None else "-"
        rows.append([name, _value(xm, unit), _value(ym, unit), change,
                     x["status"] if x else "-", y["status"] if y else "-"])
    head = [f"old: {_when(old)}", f"new: {_when(new)}"]
    if old.get("machine", {}).get("cpu") != new.get("machine", {}).get("cpu"):
        head.append("different machines: " + machine_line(old.get("machine", {})) + " vs "
                    + machine_line(new.get("machine", {})))
    return "\n".join(map(plain, head)) + "\n" + _grid(["figure", "old", "new", "change", "old result", "new result"],
                                          rows, markdown)


def _when(report: dict[str, Any]) -> str:
    m = report.get("machine", {})
    return f"{m.get('date', '?')} at {str(m.get('git_sha', '?'))[:12]}"


# --- the machine ----------------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return None


def _git_sha() -> str | None:
    """The checkout's commit, as run records take it (read from .git: no git process needed)."""
    try:
        from hpcai.resources import git_sha
    except ImportError:
        return None
    sha = git_sha()
    return None if sha == "unknown" else sha


def machine() -> dict[str, Any]:
    """What the figures ran on: CPU model, cores, memory, kernel, OS, Python, load, date, git sha."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_gib(),
        "kernel": platform.release(),
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
        "load_avg": load,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_sha": _git_sha(),
    }


def machine_line(m: dict[str, Any]) -> str:
    sha = str(m.get("git_sha") or "?")[:12]
    load = m.get("load_avg")
    return (f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory_gib', '?')} GiB, "
            f"kernel {m.get('kernel', '?')}, Python {m.get('python', '?')}"
            + (f", load {load[0]}" if isinstance(load, list) and load else "") + f"; {m.get('date', '?')}, git {sha}")
