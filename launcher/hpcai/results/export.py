"""CSV/JSON export: one row per run, CARAML-style columns plus provenance.

CARAML's tables (JobID, System, Version, Queue, Runtime(s), Model, Dataset, Nodes, Devices,
Tasks/Node, GlobalBatchSize, BatchSize/Device, <throughput>, Avg_TFLOPs/GPU, EnergyFile) are
kept by name; the throughput is split into Metric/Value/Unit so every payload fits one table;
provenance (image, digest, component versions, hpcai version, argv) closes each row.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from hpcai.results.records import RunRecord

COLUMNS = [
    "JobID", "System", "Version", "Queue", "Runtime(s)", "Payload", "Model", "Dataset", "Nodes",
    "Devices", "Tasks/Node", "GlobalBatchSize", "BatchSize/Device", "Metric", "Value", "Unit",
    "Avg_TFLOPs/GPU", "Energy(Wh)", "EnergyFile", "Status", "Image", "ImageDigest",
    "ComponentVersions", "HpcaiVersion", "RunDir",
]


def _labels(plan: dict[str, Any]) -> dict[str, str]:
    labels = plan.get("image_labels") or plan.get("labels") or {}
    return {k: v for k, v in labels.items() if k.startswith("hpcai.")} if isinstance(labels, dict) else {}


def row(rec: RunRecord) -> dict[str, Any]:
    plan, pvars = rec.plan, rec.plan.get("payload_vars") or {}
    res = rec.result
    head = res.headline if res else None
    tflops = res.get("tflops_per_gpu") if res else None
    energy = res.get("energy_wh") if res else None
    details = res.details if res else {}
    batch = pvars.get("batch_size") or details.get("batch_size")
    gbs = pvars.get("global_batch_size") or details.get("global_batch_size")
    if gbs is None and batch is not None:
        gbs = int(batch) * rec.devices
    energy_dir = rec.path / "energy"
    return {
        "JobID": plan.get("job_id") or "",
        "System": rec.system,
        "Version": plan.get("image") or "",
        "Queue": plan.get("partition") or "",
        "Runtime(s)": rec.status.get("wall_s") or "",
        "Payload": rec.payload,
        "Model": pvars.get("model") or details.get("model") or "",
        "Dataset": pvars.get("dataset") or "",
        "Nodes": rec.nodes,
        "Devices": rec.devices,
        "Tasks/Node": plan.get("ntasks_per_node") or 1,
        "GlobalBatchSize": gbs or "",
        "BatchSize/Device": batch or "",
        "Metric": head.name if head else "",
        "Value": head.value if head else "",
        "Unit": head.unit if head else "",
        "Avg_TFLOPs/GPU": tflops.value if tflops else "",
        "Energy(Wh)": energy.value if energy else "",
        "EnergyFile": str(energy_dir) if energy_dir.is_dir() else "",
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
    for rec in records:
        writer.writerow(row(rec))
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
    return json.dumps(out, indent=2, default=str) + "\n"
