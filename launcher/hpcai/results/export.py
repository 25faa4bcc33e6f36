"""CSV/JSON export: one row per run, CARAML-style columns plus provenance.

CARAML's ResNet-50 and LLM tables (JobID, System, Version, Queue, Runtime(s), Model, ModelSize,
Dataset, Nodes, Devices, Tasks/Node, Threads/Task, GlobalBatchSize, BatchSize/Device, PP/TP/DP,
Iterations, Time/iteration(s), Images/second, Tokens/second, Avg_TFLOPs/GPU, EnergyFile) are kept
by name, filled from the variables as the run resolved them (defaults and profiles too); the
headline is also given as Metric/Value/Unit so every payload fits one table; provenance (image,
digest, component versions, hpcai version, argv) closes each row. Version is the software's
(the framework requirement, else the base image's tag), not the image path. Every text cell of
the CSV passes `csv_cell`: a spreadsheet opens it, and a record is text anyone may have edited.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from hpcai import labels as label
from hpcai.output import csv_cell
from hpcai.results.energy import COMBINED
from hpcai.results.runs import RunRecord

COLUMNS = [
    "JobID", "System", "Version", "Queue", "Runtime(s)", "Payload", "Model", "ModelSize", "Dataset", "Nodes",
    "Devices", "Tasks/Node", "Threads/Task", "GlobalBatchSize", "BatchSize/Device", "PipelineParallel",
    "TensorParallel", "DataParallel", "Iterations", "Time/iteration(s)", "Metric", "Value", "Unit",
    "Images/second", "Tokens/second", "Avg_TFLOPs/GPU", "Energy(Wh)", "EnergyFile", "Status", "Image",
    "ImageDigest", "ComponentVersions", "HpcaiVersion", "RunDir",
]


def _first(values: dict[str, Any], *names: str) -> Any:
    """The first given value; 0 is not one (payload variables use 0 for "the payload's own")."""
    return next((values[n] for n in names if values.get(n) not in (None, "", "0", 0)), None)


def _count(value: Any) -> Any:
    """A count as a whole number (GBS 4, not 4.0: JSON records and the log parsers hold floats,
    variables hold text). Anything that is not a whole number stays as it is."""
    if isinstance(value, bool):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return value
    return int(number) if number.is_integer() else value


def _nonzero(value: Any) -> bool:
    try:
        return float(value) != 0
    except (TypeError, ValueError, OverflowError):
        return bool(value)


def _iterations(pvars: dict[str, Any], details: dict[str, Any]) -> Any:
    """The iterations that ran. The run's own count first (hf-clm's Trainer steps: with epochs
    set, its `steps` variable is an unused default); then the variables; then the last logged
    iteration (Megatron). A `steps` variable is no count when epochs are set (hf-clm: "steps,
    when epochs is 0"), so an older record without the run's count gets none rather than it."""
    if details.get("train_steps") not in (None, ""):
        return details["train_steps"]
    steps = () if _nonzero(pvars.get("epochs")) else ("steps",)
    iterations = _first(pvars, "iterations", "train_iters", "iters", *steps)
    if iterations is None and isinstance(details.get("iterations"), list) and details["iterations"]:
        last = details["iterations"][-1]
        iterations = last.get("iteration") if isinstance(last, dict) else None
    return iterations


def _size(n_params: Any) -> str:
    """124439808 -> 124M, 6738415616 -> 6.7B (CARAML's ModelSize column)."""
    try:
        n = float(n_params)
    except (TypeError, ValueError):
        return str(n_params or "")
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"


def _version(plan: dict[str, Any]) -> str:
    """The software version a CARAML table means: the framework's, else the base image's tag."""
    labels = plan.get("image_labels") or {}
    if not isinstance(labels, dict):
        labels = {}
    if labels.get(label.component("framework")):
        return str(labels[label.component("framework")])
    base = str(labels.get(label.BASE) or "")
    if base:
        name, _, tag = base.rpartition(":")
        return f"{name.rsplit('/', 1)[-1]} {tag}" if name and "/" not in tag else base
    return str(plan.get("hpcai_version") or "")


def _labels(plan: dict[str, Any]) -> dict[str, str]:
    labels = plan.get("image_labels") or plan.get("labels") or {}
    return {k: v for k, v in labels.items() if k.startswith(label.PREFIX)} if isinstance(labels, dict) else {}


def row(rec: RunRecord) -> dict[str, Any]:
    plan = rec.plan
    # every variable as the runner resolved it (defaults, profiles), then the explicit overrides
    pvars = {**(plan.get("payload_values") or {}), **(plan.get("payload_vars") or {})}
    res = rec.result
    head = res.headline if res else None

    def metric(*names: str) -> Any:
        found = next((m for n in names if res and (m := res.get(n))), None)
        return found.value if found else ""

    details = res.details if res else {}
    # the run's own statement of its shape (details) wins over variables left at 0 ("the payload's")
    batch = _first(pvars, "batch_size", "micro_batch_size") or _first(details, "batch_size", "micro_batch_size")
    gbs = _first(pvars, "global_batch_size") or _first(details, "global_batch_size")
    if gbs is None and type(per_device := _count(batch)) is int:  # a whole number, not text or a bool
        gbs = per_device * rec.devices
    tp = _first(pvars, "tp", "tensor_parallel") or _first(details, "tp")
    pp = _first(pvars, "pp", "pipeline_parallel") or _first(details, "pp")
    dp = _first(pvars, "dp", "data_parallel") or _first(details, "dp")
    if dp is None and tp and pp:
        dp = rec.devices // (int(tp) * int(pp)) or ""
    iterations = _iterations(pvars, details)
    energy_dir = rec.path / "energy"
    return {
        "JobID": plan.get("job_id") or "",
        "System": rec.system,
        "Version": _version(plan),
        "Queue": plan.get("partition") or "",
        "Runtime(s)": rec.status.get("wall_s") or "",
        "Payload": rec.payload,
        "Model": _first(pvars, "model") or details.get("model") or "",
        "ModelSize": _first(details, "model_size") or _first(pvars, "model_size") or _size(details.get("n_params")),
        "Dataset": _first(pvars, "dataset") or "",
        # counts as whole numbers, whatever the record held them as (4, not 4.0)
        "Nodes": _count(rec.nodes),
        "Devices": _count(rec.devices),
        "Tasks/Node": _count(plan.get("ntasks_per_node") or 1),
        "Threads/Task": _count(plan.get("cpus_per_task") or ""),
        "GlobalBatchSize": _count(gbs or ""),
        "BatchSize/Device": _count(batch or ""),
        "PipelineParallel": _count(pp or ""),
        "TensorParallel": _count(tp or ""),
        "DataParallel": _count(dp or ""),
        "Iterations": _count(iterations or ""),
        "Time/iteration(s)": metric("time_per_iteration"),
        "Metric": head.name if head else "",
        "Value": head.value if head else "",
        "Unit": head.unit if head else "",
        "Images/second": metric("images_per_sec", "img_per_sec_total"),
        "Tokens/second": metric("tokens_per_second"),
        "Avg_TFLOPs/GPU": metric("tflops_per_gpu"),
        "Energy(Wh)": metric("energy_wh"),
        # CARAML's column names its combined_energy.csv; a record from before that file, the folder
        "EnergyFile": (str(energy_dir / COMBINED) if (energy_dir / COMBINED).is_file()
                       else str(energy_dir) if energy_dir.is_dir() else ""),
        "Status": rec.state if not rec.error else f"{rec.state} ({rec.error})",
        "Image": plan.get("image") or "",
        "ImageDigest": plan.get("image_digest") or "",
        "ComponentVersions": json.dumps(_labels(plan), sort_keys=True),
        "HpcaiVersion": plan.get("hpcai_version") or "",
        "RunDir": str(rec.path),
    }


def to_csv(records: list[RunRecord]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for rec in records:  # record fields are text from files anyone may have edited
        writer.writerow({k: csv_cell(v) for k, v in row(rec).items()})
    return buf.getvalue()


def to_json(records: list[RunRecord]) -> str:
    """Rows as above, each with every metric and the plan's argv for full provenance."""
    out = []
    for rec in records:
        r = row(rec)
        r["metrics"] = [m.to_dict() for m in rec.result.metrics] if rec.result else []
        r["argv"] = rec.plan.get("argv")
        r["payload_vars"] = rec.plan.get("payload_vars") or {}
        out.append(r)
    from hpcai.files import dumps  # valid JSON: a NaN or infinite value is null

    return dumps(out, indent=2, default=str) + "\n"


def write(path: Path, text: str) -> None:
    """`results export -o PATH`: hpcai.files.write_atomic, so a link at PATH (a victim's file) is
    refused in one line, never written through, and a failed write leaves no half a file. Mode as
    open() would give (0666 less the umask): an export is made to be shared."""
    from hpcai import files

    files.write_atomic(path, text, None, "-o")
