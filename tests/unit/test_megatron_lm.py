"""payloads/megatron-gpt/megatron_lm.py, CARAML's Megatron-LM path, around pretrain_gpt.py.

pretrain_gpt.py itself needs a GPU, apex and flash_attn, none of which this machine has: here a
MOCK pretrain_gpt.py (it prints the lines CARAML's patched Megatron-LM prints and checks the
arguments and environment it is given) stands in for it. The real one is baked and its tools run
in tests/integration/test_gpu_recipe.py; CARAML's arguments are checked against CARAML's yaml in
tests/unit/test_caraml_parity.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

PAYLOAD = Path(__file__).resolve().parents[2] / "payloads" / "megatron-gpt"

MOCK = r'''
import os, sys
args = sys.argv[1:]
assert args[args.index("--data-path") + 1] == "/d/corpus_text_document", args
assert os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] == "1" and os.environ["ACCELERATOR"] == "H100"
assert os.environ["ENERGY_PATH"].endswith("/H100_power.csv")
for i, secs in ((5, 4.0), (10, 2.0), (15, 2.0)):
    print(f" iteration {i:8d}/ 146484 | consumed samples: {i * 32:12d} | elapsed time per iteration (s): {secs:.4f} |"
          f" samples per second: 10.000 | TFLOPs: 100.00 | TFLOPs(megatron): 99.00 | number of nan iterations:   0 |")
sys.exit(int(os.environ.get("MOCK_EXIT", "0")))
'''


@pytest.fixture
def megatron_lm():
    sys.path.insert(0, str(PAYLOAD))
    try:
        spec = importlib.util.spec_from_file_location("megatron_lm_under_test", PAYLOAD / "megatron_lm.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(PAYLOAD))


@pytest.fixture
def prefix(tmp_path):
    root = tmp_path / "prefix" / "share" / "megatron-lm"
    (root / "caraml-tokenizers").mkdir(parents=True)
    (root / "pretrain_gpt.py").write_text(MOCK)
    for name in ("gpt2-vocab.json", "gpt2-merges.txt"):
        (root / "caraml-tokenizers" / name).write_text("{}")
    return tmp_path / "prefix"


SIZE = dict(layers=16, hidden=2048, heads=8, ffn=8192, micro=4, tp=1, pp=1, gas=1, gbs=32, precision="fp16",
            dp=4, microbatches=2, seq=2048, vocab=50304)


def test_rank_zero_reports_caramls_tokens_per_second(megatron_lm, prefix, tmp_path, capsys):
    out = tmp_path / "out"
    rc = megatron_lm.run(SIZE, "800M", "/d/corpus_text_document", str(out), str(prefix), 30, 5, 0, "H100", 0, 1)
    assert rc == 0
    printed = capsys.readouterr().out
    assert "implementation=megatron-lm (Megatron-LM f7727433 + CARAML's NVIDIA patch)" in printed
    assert printed.count("elapsed time per iteration (s):") == 3  # Megatron's own lines pass through
    got = json.loads((out / "megatron-gpt.json").read_text())
    assert got["time_per_iteration"] == pytest.approx(8.0 / 3)  # every interval, as CARAML's JUBE result
    assert got["tokens_per_second"] == pytest.approx(32 * 2048 * 3 / 8.0)
    assert (got["implementation"], got["iterations"], got["tflops_per_gpu"], got["nan_iterations"]) == \
        ("megatron-lm", 15, 100.0, 0)


def test_a_failing_run_keeps_its_status(megatron_lm, prefix, tmp_path, monkeypatch):
    monkeypatch.setenv("MOCK_EXIT", "3")
    rc = megatron_lm.run(SIZE, "800M", "/d/corpus_text_document", str(tmp_path / "o"), str(prefix), 30, 5, 0,
                         "H100", 0, 1)
    assert rc == 3


def test_it_is_chosen_only_where_it_can_run(megatron_lm, prefix, tmp_path):
    assert megatron_lm.unavailable(str(tmp_path / "none"), True) == \
        "Megatron-LM f7727433 is baked into CUDA images only (install.sh)"
    assert megatron_lm.unavailable(str(prefix), False) == \
        "Megatron-LM f7727433's pretrain_gpt.py needs a GPU (CUDA and NCCL)"
    why = megatron_lm.unavailable(str(prefix), True)  # this machine has neither apex nor flash_attn
    assert why == "Megatron-LM f7727433 with CARAML's arguments needs apex and flash_attn, missing here: apex, flash_attn"


def test_stand_in_corpus_is_the_trees_markdown(megatron_lm, prefix, tmp_path):
    root = prefix / "share" / "megatron-lm"
    (root / "README.md").write_text("# Megatron\n\nA line.\n")
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("Another.\n")
    text = megatron_lm.stand_in_text(str(root), str(tmp_path / "stand-in.txt"))
    assert Path(text).read_text() == "# Megatron\nA line.\nAnother.\n"
