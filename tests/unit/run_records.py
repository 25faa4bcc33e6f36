"""Run records as `hpcai launch` leaves them, for the results tests in every folder: a record with
its plan, status and rank-0 log (make_run), a Horovod synthetic benchmark's log (hvd_log), and a
finished run whose metrics.json holds one headline metric (record)."""

from __future__ import annotations

import json
from pathlib import Path


def make_run(root: Path, name: str, payload: str, log: str, *, site="local", partition="debug", nodes=1,
             state="completed", pvars=None) -> Path:
    """A run record as hpcai launch leaves it (plan.json, status.json, logs/rank-0.out)."""
    run = root / name
    (run / "logs").mkdir(parents=True)
    plan = {"payload": payload, "site": site, "partition": partition, "nodes": nodes, "ntasks_per_node": 1,
            "payload_vars": pvars or {}, "image": "hpcai/pytorch-cpu:test", "job_id": name}
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "status.json").write_text(json.dumps({"state": state, "exit_code": 0 if state == "completed" else 1}))
    (run / "logs" / "rank-0.out").write_text(log)
    return run


def hvd_log(total: float) -> str:
    return f"Img/sec per GPU: {total / 4:.1f} +-1.0\nTotal img/sec on 4 GPU(s): {total} +-4.0\n"


def record(root: Path, name: str, payload: str, metric: str, unit: str, value, *, nodes: int = 1,
           parser: str = "x", details: dict | None = None) -> Path:
    """A finished run whose metrics.json holds one headline metric (VALUE may be "nan", as hpcai
    writes a non-finite one)."""
    run = make_run(root, name, payload, "", nodes=nodes)
    doc = {"parser": parser, "metrics": [{"name": metric, "value": value, "unit": unit, "headline": True}],
           "details": details or {}, "warnings": []}
    (run / "metrics.json").write_text(json.dumps(doc))
    return run

