"""The README's first command: `make demo` builds pytorch-cpu and runs 2 local DDP ranks in Docker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.docker
def test_demo_builds_runs_and_prints_results_table(tmp_path, pytorch_cpu_image):
    # The fixture has built the same image, so the demo's build is served from the layer cache.
    bindir = Path(sys.executable).parent
    env = {**os.environ, "DEMO_RUNS": str(tmp_path / "runs"),
           "HPCAI": str(bindir / "hpcai"), "PIP": str(bindir / "pip")}
    res = subprocess.run(["bash", str(REPO / "tests/infra/demo.sh")], capture_output=True, text=True,
                         env=env, timeout=1800, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    table_rows = [line for line in res.stdout.splitlines() if "ddp-bench" in line and "│" in line]
    assert table_rows, res.stdout[-3000:]
    row = table_rows[-1]
    assert "1×2" in row and "ex_per_sec_total" in row and "completed" in row
    (record,) = (tmp_path / "runs").iterdir()
    assert (record / "metrics.json").is_file() and (record / "logs" / "rank-1.out").is_file()
