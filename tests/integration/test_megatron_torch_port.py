"""megatron_torch_port.py, the torch stand-ins port_torch.py gives Megatron-LM f7727433 where apex
and flash-attn are missing, checked against plain torch in the real pytorch-cpu image (fp32 on
CPU; make gpu-check runs the same script on CUDA in fp16)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.docker


def test_torch_port_matches_torch_in_the_pytorch_cpu_image(pytorch_cpu_image):
    port = REPO / "payloads/megatron-gpt/install/megatron_torch_port.py"
    check = REPO / "tests/gpu/torch_port_check.py"
    res = subprocess.run(["docker", "run", "--rm", "-v", f"{port}:/check/port.py:ro", "-v", f"{check}:/check/run.py:ro",
                          "--entrypoint", "/opt/hpcai/venv/bin/python", pytorch_cpu_image,
                          "/check/run.py", "/check/port.py", "cpu"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0 and res.stdout.strip().endswith("torch port: ok"), (res.stdout, res.stderr)
