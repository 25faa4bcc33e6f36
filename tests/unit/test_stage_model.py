"""The start-up model of benchmarks/stage_model.py and its calibration in stage_scaling.py (issue 29,
item 5): the model's shape (bytes: N x touched direct, 1 x the image staged cold, 0 warm; the tree's
depth), and the calibration recovering the parameters of rows the model itself made."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import stage_model as model  # noqa: E402
from stage_scaling import calibrate  # noqa: E402

GIB = 1 << 30
P = model.Params(image_bytes=1.2 * GIB, touched_bytes=0.4 * GIB, fs_bandwidth=3e9, node_bandwidth=1e9,
                 cast_bandwidth=2e9, run_s=6.0, srun_s=0.3, hop_s=0.05, fanout=8)


@pytest.mark.parametrize("nodes, fanout, levels", [(1, 8, 0), (2, 8, 1), (8, 8, 1), (9, 8, 2), (64, 8, 2),
                                                   (65, 8, 3), (4096, 8, 4), (4096, 2, 12)])
def test_tree_depth(nodes, fanout, levels):
    assert model.depth(nodes, fanout) == levels


def test_bytes_from_the_shared_file_system():
    for n in (1, 64, 4096):
        assert model.direct(P, n)[1] == n * P.touched_bytes
        assert model.staged(P, n, warm=False)[1] == P.image_bytes
        assert model.staged(P, n, warm=True)[1] == 0


def test_direct_slows_once_readers_share_the_file_system_and_staging_stays_logarithmic():
    rows = model.predict(P, model.SCALES)
    assert [r["direct_s"] for r in rows] == sorted(r["direct_s"] for r in rows)
    # 4,096 readers share 3 GB/s: each gets 0.7 MB/s, far under its own 1 GB/s
    assert rows[-1]["direct_s"] == pytest.approx(P.run_s + P.touched_bytes * 4096 / P.fs_bandwidth)
    cold = [r["cold_s"] for r in rows]
    assert cold[-1] - cold[0] == pytest.approx(3 * (model.depth(4096, 8) - model.depth(64, 8)) * P.hop_s)
    assert all(r["warm_s"] < r["cold_s"] < r["direct_s"] for r in rows)


def measured(p: model.Params, nodes: int, path: str, state: str) -> dict:
    """A row as stage_scaling.measure writes it, made by the model itself."""
    if path == "direct":
        all_s, read = model.direct(p, nodes)
        stage_s = 0.0
    else:
        all_s, read = model.staged(p, nodes, warm=state == "warm")
        stage_s = all_s - p.run_s
    return {"nodes": nodes, "path": path, "state": state, "all_s": all_s, "first_s": all_s, "stage_s": stage_s,
            "bytes": read}


def test_calibration_recovers_the_parameters_of_model_made_rows():
    p = model.Params(image_bytes=1.2 * GIB, touched_bytes=0.4 * GIB, fs_bandwidth=1.5e9, node_bandwidth=1e9,
                     cast_bandwidth=2e9, run_s=6.0, srun_s=0.3, hop_s=0.05, fanout=8)  # 4 readers contend
    rows = [measured(p, n, path, state) for n in (1, 2, 4) for path in ("direct", "staged")
            for state in ("cold", "warm")]
    got = calibrate(rows, p.image_bytes, 8)
    for key, want in asdict(p).items():
        assert getattr(got, key) == pytest.approx(want, rel=1e-6), key
