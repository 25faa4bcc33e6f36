"""Records for the HTML report's tests (issue 30, item 4): a ddp-bench series that regresses on a
new image, an osu series on one image whose payload variable is hostile text."""

from __future__ import annotations

import json
from pathlib import Path

OLD, NEW = "sha256:" + "a" * 64, "sha256:" + "b" * 64
HOSTILE = "<script>alert(1)</script>"


def put(root: Path, name: str, payload: str, metric: str, unit: str, value: float, digest: str, day: int,
        pvars: dict | None = None) -> Path:
    run = root / name
    (run / "logs").mkdir(parents=True)
    plan = {"payload": payload, "site": "local", "partition": "debug", "nodes": 1, "ntasks_per_node": 1,
            "image": "hpcai/pytorch-cpu:test", "image_digest": digest, "payload_vars": pvars or {},
            "image_labels": {"hpcai.component.nccl": "2.21.5"}, "env": {"NCCL_PROTO": "^LL128"}}
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "metrics.json").write_text(json.dumps({"parser": payload, "warnings": [], "details": {}, "metrics": [
        {"name": metric, "value": value, "unit": unit, "headline": True,
         "better": "lower" if unit == "us" else "higher"}]}))
    (run / "status.json").write_text(json.dumps({"state": "completed", "started": f"2026-11-{day:02d}T10:00:00+0000"}))
    return run


def series(root: Path, regress: bool = True) -> Path:
    for i, v in enumerate([100.0, 101.0, 99.0, 100.0]):
        put(root, f"ddp-old{i}", "ddp-bench", "examples_per_sec", "ex/s", v, OLD, 10 + i)
    for i, v in enumerate([80.0, 81.0, 79.0, 80.0] if regress else [100.5, 99.5, 100.0, 101.0]):
        put(root, f"ddp-new{i}", "ddp-bench", "examples_per_sec", "ex/s", v, NEW, 20 + i)
    for i, v in enumerate([5.0, 5.1, 4.9]):
        put(root, f"osu{i}", "osu", "latency", "us", v, OLD, 10 + i, {"note": HOSTILE})
    return root
