"""Fixtures of both gpu-check modules (NVIDIA: test_gpu_bare_metal.py, AMD: test_gpu_rocm.py)."""

from __future__ import annotations

import pytest
from gpucheck import new_session_dir


@pytest.fixture(scope="module")
def session_dir():
    path = new_session_dir()
    print(f"gpu-check: logs under {path}")
    return path
