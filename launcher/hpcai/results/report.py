"""`hpcai results report RUNS… -o report.html`: one self-contained HTML page over run records
(issue 30, item 4): per payload, one plot per metric (its unit on the axis, never two payloads on
one axis), the runs as a table, each run's provenance, and the regressions marked.

A regression is judged where a stack change can explain it: within one configuration (payload,
nodes, ranks per node, payload variables), the runs on the newest image digest against those on
the digest before it, figure by figure, by hpcai.results.significance (a change only when the
bootstrap interval lies beyond the tolerance). Those runs' rows are marked and listed at the top.

The page needs nothing beside it: the plots are SVG in data: URIs, the style is inline, there is
no script. Every value read from a record reaches the page through Jinja2's autoescaping, so a
payload variable holding `<script>` is shown as text.
"""

from __future__ import annotations

import base64
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcai.results.compare import config_key
from hpcai.results.runs import RunRecord

TEMPLATE = Path(__file__).with_name("report.html.j2")


@dataclass
class Finding:
    payload: str
    config: str
    metric: str
    unit: str
    before: str       # the earlier image digest
    after: str        # the newest
    change: Any       # hpcai.results.significance.Change
    runs: list[str] = field(default_factory=list)  # the newest image's runs: their rows are marked


def _started(rec: RunRecord) -> str:
    return str(rec.status.get("started") or "")


def findings(records: list[RunRecord], tolerance: float) -> list[Finding]:
    """Each figure of each configuration whose newest image changed it, with the verdict."""
    from hpcai.results.significance import compare_samples

    found = []
    configs: dict[str, list[RunRecord]] = {}
    for rec in sorted(records, key=lambda r: (_started(r), r.path.name)):
        if rec.succeeded and rec.result:
            configs.setdefault(config_key(rec), []).append(rec)
    for config, runs in configs.items():
        digests = list(dict.fromkeys(str(r.plan.get("image_digest") or "") for r in runs))
        if len(digests) < 2:
            continue
        before = [r for r in runs if str(r.plan.get("image_digest") or "") == digests[-2]]
        after = [r for r in runs if str(r.plan.get("image_digest") or "") == digests[-1]]
        for metric in after[0].result.metrics:
            va = [m.value for r in before for m in [r.result.get(metric.name)] if m is not None and m.measured]
            vb = [m.value for r in after for m in [r.result.get(metric.name)] if m is not None and m.measured]
            change = compare_samples(va, vb, metric.better, tolerance)
            found.append(Finding(after[0].payload, config, metric.name, metric.unit, digests[-2], digests[-1], change,
                                 [r.path.name for r in after]))
    return found


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode()


def render(records: list[RunRecord], tolerance: float = 0.05) -> tuple[str, list[Finding]]:
    """The page, as text, and the regressions it marks."""
    import jinja2

    from hpcai.results.history import point_of
    from hpcai.results.plot import history_figure
    from hpcai.results.significance import REGRESSION

    judged = findings(records, tolerance)
    regressions = [f for f in judged if f.change.verdict == REGRESSION]
    marked_runs = {(f.payload, run) for f in regressions for run in f.runs}
    payloads = []
    for payload in sorted({r.payload for r in records}):
        runs = sorted((r for r in records if r.payload == payload), key=lambda r: (_started(r), r.path.name))
        points = [point_of(r) for r in runs]
        metrics = list(dict.fromkeys(n for p in points for n in p.values))
        marked = {f.metric: {i for i, r in enumerate(runs) if r.path.name in f.runs}
                  for f in regressions if f.payload == payload}
        plot = _svg(history_figure(payload, points, marked)) if metrics else ""
        payloads.append({"name": payload, "plot": plot, "metrics": metrics, "points": points,
                         "units": {n: next(p.units[n] for p in points if n in p.units) for n in metrics},
                         "runs": [{"record": r, "point": p, "regressed": (payload, r.path.name) in marked_runs,
                                   "provenance": _provenance(r)} for r, p in zip(runs, points)]})
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(TEMPLATE.read_text())
    return template.render(generated=time.strftime("%Y-%m-%d %H:%M:%S %z"), runs=len(records), payloads=payloads,
                           findings=judged, regressions=regressions, tolerance=tolerance), regressions


def _provenance(rec: RunRecord) -> list[tuple[str, str]]:
    """What a reader needs to reproduce or explain the run, as (name, value) rows."""
    plan = rec.plan
    labels = plan.get("image_labels") or {}
    rows = [("record", str(rec.path)), ("state", rec.state), ("site", f"{plan.get('site', '-')} "
                                                                       f"({plan.get('partition') or '-'})"),
            ("runtime / backend", f"{plan.get('runtime', '-')} / {plan.get('backend', '-')}"),
            ("image", str(plan.get("image") or "-")), ("image digest", str(plan.get("image_digest") or "-")),
            ("payload variables", " ".join(f"{k}={v}" for k, v in (plan.get("payload_vars") or {}).items()) or "-"),
            ("hpcai", f"{plan.get('hpcai_version', '-')} ({plan.get('git_sha') or '-'})")]
    rows += [(f"label {k}", str(v)) for k, v in sorted(labels.items()) if str(k).startswith("hpcai.")]
    rows += [(f"env {k}", str(v)) for k, v in sorted((plan.get("env") or {}).items())]
    if rec.error:
        rows.append(("no metrics", rec.error))
    return rows


def write(records: list[RunRecord], output: Path, tolerance: float = 0.05) -> int:
    """Render and write OUTPUT (.html) atomically; the number of regressions marked."""
    from hpcai import files
    from hpcai.errors import UsageError

    if output.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"report output must end in .html, got {output.name!r}")
    files.refuse_link(output, "-o")
    page, regressions = render(records, tolerance)
    files.write_atomic(output, page, None, "-o")
    return len(regressions)
