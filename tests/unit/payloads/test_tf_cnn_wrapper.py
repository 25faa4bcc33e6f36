"""payloads/tf-cnn-benchmarks/tf_cnn.py, the parts that run without TensorFlow (the whole payload
runs in the TensorFlow image: tests/integration/test_payloads_image.py and test_payloads_slurm.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

WRAPPER = Path(__file__).resolve().parents[3] / "payloads" / "tf-cnn-benchmarks" / "tf_cnn.py"


@pytest.fixture
def tf_cnn():
    spec = importlib.util.spec_from_file_location("tf_cnn_wrapper", WRAPPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_global_batch_is_split_as_caraml_does(tf_cnn):
    assert tf_cnn.per_device_batch(64, 0, 4) == 64  # no global batch: the per-device one
    assert [tf_cnn.per_device_batch(8, g, 4) for g in (16, 100, 4096)] == [4, 25, 1024]  # int(G / devices)
    with pytest.raises(SystemExit, match="global_batch_size 2 is below one image per device"):
        tf_cnn.per_device_batch(8, 2, 4)


def test_our_options_and_the_benchmarks_flags_are_split_at_the_double_dash(tf_cnn):
    assert tf_cnn._split(["--out", "o", "--", "--model=x", "--"]) == (["--out", "o"], ["--model=x", "--"])
    assert tf_cnn._split(["--out", "o"]) == (["--out", "o"], [])


def test_several_ranks_without_horovod_is_one_line(tf_cnn, monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS", "4")
    monkeypatch.setitem(sys.modules, "horovod", None)  # not importable, wherever the tests run
    with pytest.raises(SystemExit, match=r"^tf-cnn-benchmarks: 4 ranks need Horovod \(variable_update=horovod\)"):
        tf_cnn.variable_update("auto")
    assert tf_cnn.variable_update("replicated") == "replicated"  # asked for: passed on
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert tf_cnn.variable_update("auto") == "parameter_server"


def test_rank_and_world_come_from_slurm_then_torchrun_style_variables(tf_cnn, monkeypatch):
    for name in ("SLURM_NTASKS", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("RANK", "5")
    assert (tf_cnn.world(), tf_cnn.rank()) == (8, 5)
    monkeypatch.setenv("SLURM_PROCID", "2")
    assert tf_cnn.rank() == 2


def test_a_power_method_that_cannot_start_is_replaced_and_said(tf_cnn, monkeypatch, capsys):
    """jpwr's measuring process would die on nvmlInit and leave the fork waiting for ever."""
    monkeypatch.delenv("ACCELERATOR", raising=False)
    broken = type(sys)("jpwr.gpu.pynvml")

    class NoNvml:
        def init(self, values):
            raise RuntimeError("NVML Shared Library Not Found")

    broken.power = NoNvml
    monkeypatch.setitem(sys.modules, "jpwr.gpu.pynvml", broken)
    tf_cnn.power_methods_that_work()
    assert "jpwr jpwr.gpu.pynvml cannot measure here (NVML Shared Library Not Found)" in capsys.readouterr().out
    method = sys.modules["jpwr.gpu.pynvml"].power()
    values = {"timestamps": []}
    method.init(values)
    method.measure(values)
    assert values == {"timestamps": []} and method.finalize(values) == {}


def test_a_power_method_that_starts_is_kept(tf_cnn, monkeypatch, capsys):
    monkeypatch.setenv("ACCELERATOR", "MI250")  # the fork's test: jpwr's ROCm method
    working = type(sys)("jpwr.gpu.rocm")

    class Rocm:
        def init(self, values):
            values["rocm:0"] = []

    working.power = Rocm
    monkeypatch.setitem(sys.modules, "jpwr.gpu.rocm", working)
    tf_cnn.power_methods_that_work()
    assert sys.modules["jpwr.gpu.rocm"] is working and capsys.readouterr().out == ""
