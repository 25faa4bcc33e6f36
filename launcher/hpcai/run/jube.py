"""A sweep as a JUBE benchmark: `hpcai sweep … --jube FILE.xml` writes the file and runs nothing.

JUBE (FZJ-JSC's benchmarking environment, in which CARAML's and MMoCLIP's workflows are written)
then runs it: `jube run FILE.xml`, `jube continue DIR`, `jube result -a DIR`. The parameterset
`hpcai_points` holds the sweep's axes (each `--var`, `nodes`, `repetition` with --repeat, in the
order that makes JUBE's workpackages follow the sweep's points: nodes vary fastest); the step
`run` runs one point per workpackage in its work folder, leaving the point's run record in
`record/` and `hpcai results export`'s JSON beside it; the patternset reads that file's status and
headline, and the result table `hpcai` shows one row per point. The step, as JUBE runs it:

    env -u batch_size -u nodes /venv/bin/hpcai submit --image IMG --site S … --nodes "$nodes" \
        --output-dir record --done-file ready -- PAYLOAD "batch_size=$batch_size"     (done_file="ready")
    /venv/bin/hpcai results export record --json --output hpcai-result.json

On a batch site (Slurm, PBS Pro, Flux) the step is asynchronous, as CARAML's are: `jube run`
submits every point and returns; the job's launch writes `ready` once its record is final, and `jube continue` then runs
the export of each point whose job has ended (`jube status` says FINISHED when all have). With
`--wait` (or `--wait-timeout`) the step waits for its job instead (`hpcai submit --wait`), and
elsewhere, or with --no-submit, it runs `hpcai launch` in place.

A value crosses three readers, and each is handled in one place: `text` (one line, characters XML
can hold, every `$` doubled: JUBE reads `$name` as its parameter and `$$` as `$`; a `$` JUBE cannot
give back, before a space or at the end, is refused), `word` (that,
shell-quoted: JUBE runs a step's `do` with /bin/sh) and ElementTree (XML escaping). The axes reach
the shell as exported variables, quoted where the command reads them, so a value is never shell
code; `env -u` keeps them out of the job's environment.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpcai.errors import UsageError, one_line

RECORD = "record"                   # the point's run record, in the workpackage's work folder
RESULT_FILE = "hpcai-result.json"   # `hpcai results export record --json`, read by the patterns
DONE_FILE = "ready"                 # the job's launch writes it (--done-file): JUBE's done_file
STEP = "run"
POINTS = "hpcai_points"
TABLE = "hpcai"
# What the table reads from RESULT_FILE (the row as hpcai.results.export.row names its columns):
# (pattern name, JUBE type, regular expression).
PATTERNS = (
    ("status", None, r'"Status": "([^"]*)"'),
    ("metric", None, r'"Metric": "([^"]*)"'),
    ("value", "float", r'"Value": $jube_pat_fp'),
    ("unit", None, r'"Unit": "([^"]*)"'),
    ("record_nodes", "int", r'"Nodes": $jube_pat_int'),
    ("job_id", None, r'"JobID": "([^"]*)"'),
)
# An axis becomes a JUBE parameter and an exported shell variable of that name: lower-case words
# (every shipped payload's variables are), none of the table's other names.
_AXIS = re.compile(r"[a-z][a-z0-9_]*")
RESERVED = ("nodes", "repetition", *(name for name, _, _ in PATTERNS))


@dataclass(frozen=True)
class JubeSweep:
    """What the benchmark file holds (benchmark() renders it; nothing here is checked yet)."""

    payload: str
    nodes: tuple[int, ...]
    variables: tuple[tuple[str, tuple[str, ...]], ...]  # (name, values), in the sweep's (sorted) order
    repeat: int
    options: tuple[str, ...]        # `hpcai launch` options every point shares (options_argv, no --nodes/-o)
    hpcai: tuple[str, ...]          # the argv that runs this hpcai, absolute
    submit: bool                    # `hpcai submit` (Slurm, PBS Pro, Flux), else `hpcai launch`
    wait: bool = False              # submit: wait for the job in the step, not with JUBE's done_file
    wait_timeout: float | None = None
    outpath: str = "bench_run"      # where `jube run` puts its runs (relative: to the file's folder)


def text(what: str, value: object) -> str:
    """VALUE as text of the JUBE file: one line (errors.one_line), only characters XML 1.0 can
    hold, every `$` doubled. WHAT names the option it came from, for the error."""
    s = one_line(what, value)
    if any(0xD800 <= ord(c) <= 0xDFFF or c in "\ufffe\uffff" for c in s):
        raise UsageError(f"{what} {s!r}: holds a character an XML file cannot (a lone surrogate, U+FFFE or U+FFFF)")
    # JUBE 2.7's last substitution pass doubles a `$` before a space or at the end (util.substitution),
    # so no escaping can give one there; every other `$` comes back from `$$`
    if re.search(r"\$(?=\s|\Z)", s):
        raise UsageError(f"{what} {s!r}: a '$' at the end or before a space cannot be written for JUBE "
                         "(its substitution would double it)")
    return s.replace("$", "$$")


def word(what: str, value: object) -> str:
    """VALUE as one shell word of a step's command (shell-quoted, then `text`)."""
    return text(what, shlex.quote(one_line(what, value)))


def check_axes(variables: dict[str, list[str]]) -> None:
    """Each --var name a shell variable the table may show, each value one JUBE keeps as it is."""
    for name, values in variables.items():
        if not _AXIS.fullmatch(name) or name in RESERVED or name.startswith("jube"):
            raise UsageError(f"--var {name}: with --jube a variable's name must be a lower-case word "
                             f"([a-z][a-z0-9_]*, not jube… nor {', '.join(RESERVED)}): it becomes a JUBE "
                             "parameter and a shell variable")
        for value in values:
            text(f"--var {name}", value)
            if value != value.strip():
                raise UsageError(f"--var {name} value {value!r}: JUBE strips spaces around a parameter's "
                                 "values; give it without them")


def _param(parent: ET.Element, name: str, values: list[str], export: bool) -> None:
    # Format: <parameter name="batch_size" type="int" export="true">32,64</parameter>
    attrs = {"name": name}
    if all(re.fullmatch(r"-?[0-9]+", v) for v in values):
        attrs["type"] = "int"  # sorted as numbers in the table
    if export:
        attrs["export"] = "true"
    ET.SubElement(parent, "parameter", attrs).text = ",".join(text(f"--var {name}", v) for v in values)


def run_command(js: JubeSweep) -> str:
    """The step's `do`: this hpcai runs one point, its record in ./record (see the module doc)."""
    names = [name for name, _ in js.variables]
    words = ["env", *(f"-u {n}" for n in (*names, "nodes")), *(word("hpcai", w) for w in js.hpcai),
             "submit" if js.submit else "launch"]
    words += [word("option", w) for w in js.options]
    words += ["--nodes", '"$$nodes"', "--output-dir", RECORD]
    if js.submit and js.wait:
        words.append("--wait")
        if js.wait_timeout is not None:
            words += ["--wait-timeout", word("--wait-timeout", js.wait_timeout)]
    elif js.submit:
        words += ["--done-file", DONE_FILE]
    words += ["--", word("payload", js.payload), *(f'"{n}=$${n}"' for n in names)]
    return " ".join(words)


def result_command(js: JubeSweep) -> str:
    return " ".join([*(word("hpcai", w) for w in js.hpcai), "results", "export", RECORD, "--json",
                     "--output", RESULT_FILE])


def benchmark(js: JubeSweep) -> ET.Element:
    """The `<jube>` document (pure)."""
    root = ET.Element("jube")
    bench = ET.SubElement(root, "benchmark", name=text("payload", f"hpcai-{js.payload}"),
                          outpath=text("--output-dir", js.outpath))
    ET.SubElement(bench, "comment").text = text("payload", (
        f"hpcai sweep of {js.payload}, written by `hpcai sweep --jube`: one workpackage per point, whose "
        f"work folder holds its run record in {RECORD}/ (`hpcai results show` reads it)."))
    points = ET.SubElement(bench, "parameterset", name=POINTS)
    for name, values in js.variables:  # outermost first: JUBE varies the last parameter fastest
        _param(points, name, list(values), export=True)
    _param(points, "nodes", [str(n) for n in js.nodes], export=True)
    rep = ["repetition"] if js.repeat > 1 else []
    if rep:
        _param(points, "repetition", [str(i) for i in range(1, js.repeat + 1)], export=False)

    step = ET.SubElement(bench, "step", name=STEP)
    ET.SubElement(step, "use").text = POINTS
    # Format: <do done_file="ready">… hpcai submit … --done-file ready …</do>: the step's next `do`
    # runs in a later `jube continue`, once the job's launch has written the file
    run = ET.SubElement(step, "do", {"done_file": DONE_FILE} if js.submit and not js.wait else {})
    run.text = run_command(js)
    ET.SubElement(step, "do").text = result_command(js)

    patterns = ET.SubElement(bench, "patternset", name="hpcai_result")
    for name, kind, regex in PATTERNS:
        ET.SubElement(patterns, "pattern", {"name": name, **({"type": kind} if kind else {})}).text = regex
    analyser = ET.SubElement(bench, "analyser", name="hpcai_analyse")
    ET.SubElement(analyser, "use").text = "hpcai_result"
    ET.SubElement(ET.SubElement(analyser, "analyse", step=STEP), "file").text = RESULT_FILE

    result = ET.SubElement(bench, "result")
    ET.SubElement(result, "use").text = "hpcai_analyse"
    axes = [*(name for name, _ in js.variables), "nodes", *rep]
    table = ET.SubElement(result, "table", name=TABLE, style="pretty", sort=",".join(axes))
    for column in (*axes, "status", "metric", "value", "unit", "job_id", "jube_wp_id"):
        ET.SubElement(table, "column").text = column
    return root


def to_xml(js: JubeSweep) -> str:
    root = benchmark(js)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def hpcai_argv() -> tuple[str, ...]:
    """This hpcai, by absolute path: its console script when that is what runs, else this Python
    with `-m hpcai` (JUBE's shell has its own PATH; another hpcai there may be another version)."""
    arg0 = Path(sys.argv[0])
    if arg0.name == "hpcai" and arg0.is_file():
        return (str(arg0.absolute()),)
    return (sys.executable, "-m", "hpcai")


def jube_file(path: Path) -> Path:
    if path.suffix != ".xml":
        raise UsageError(f"--jube {path}: give a .xml file (JUBE chooses its reader by the file's extension)")
    if path.is_dir():
        raise UsageError(f"--jube {path}: is a folder; give the benchmark file's name")
    return path


def make(payload: str, nodes: list[int], variables: dict[str, list[str]], repeat: int, base: dict[str, Any],
         submit: bool | None, wait: bool, wait_timeout: float | None, outpath: str | None) -> JubeSweep:
    """Plan every point as the sweep would (check=False: nothing is run, no record is made), then
    the options they share, with the site pinned and relative paths made absolute (JUBE runs the
    step in a folder of its own)."""
    from hpcai.redact import redact_argv
    from hpcai.run.options import options_argv
    from hpcai.run.plan import plan_launch
    from hpcai.run.sweep import point_options, points

    check_axes(variables)
    probe = Path(tempfile.gettempdir(), f"hpcai-jube-{os.getpid()}", RECORD)  # a name only, never made
    plan = opts = None
    for point in points(nodes, variables, repeat):
        opts = point_options({**base, "payload": payload, "nodes": point["nodes"],
                              "payload_vars": point["payload_vars"], "output_dir": str(probe)})
        plan = plan_launch(opts, check=False)
    assert plan is not None and opts is not None  # points() gives one at least
    batch = bool(plan.backend.batch)  # each step `hpcai submit`s its point: sbatch, qsub or flux batch
    if submit and not batch:
        raise UsageError(f"--jube --submit needs a Slurm, PBS Pro or Flux site; {plan.site} uses the "
                         f"{plan.backend.name} backend")
    submit = batch if submit is None else submit
    if (wait or wait_timeout is not None) and not submit:
        raise UsageError("--wait and --wait-timeout are for `hpcai submit`; this export runs `hpcai launch`")
    image = str(Path(opts.image).absolute()) if plan.runtime.image_is_file else opts.image
    shared = replace(opts, nodes=None, output_dir=None, payload_args=(), site=plan.site, image=image,
                     data=str(Path(opts.data).absolute()) if opts.data else "")
    argv = options_argv(shared)
    assert argv[-2:] == ["--", payload], argv
    argv = argv[:-2]
    if redact_argv(argv) != argv:
        raise UsageError("an option holds a secret value, which is never written into a file: pass it as "
                         "--env NAME, copied from the environment `jube run` runs in")
    return JubeSweep(payload=payload, nodes=tuple(nodes),
                     variables=tuple((k, tuple(variables[k])) for k in sorted(variables)), repeat=repeat,
                     options=tuple(argv), hpcai=hpcai_argv(), submit=submit,
                     wait=submit and (wait or wait_timeout is not None), wait_timeout=wait_timeout,
                     outpath=str(Path(outpath).absolute()) if outpath else "bench_run")


def write(path: Path, js: JubeSweep) -> None:
    """The file, whole (written aside and renamed; a link at PATH is refused, never followed)."""
    from hpcai import files

    files.write_atomic(jube_file(path), to_xml(js), None, "--jube")
