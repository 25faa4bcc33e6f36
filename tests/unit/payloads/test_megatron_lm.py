"""payloads/megatron-gpt/megatron_lm.py, CARAML's Megatron-LM path, around pretrain_gpt.py.

pretrain_gpt.py itself needs a GPU, which this machine lacks (make gpu-check runs it): here a
MOCK pretrain_gpt.py (it prints the lines CARAML's patched Megatron-LM prints and checks the
arguments and environment it is given) stands in for it. The real one is baked and its tools run
in tests/integration/test_gpu_recipe.py; CARAML's arguments are checked against CARAML's yaml in
tests/unit/payloads/test_caraml_parity.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

PAYLOAD = Path(__file__).resolve().parents[3] / "payloads" / "megatron-gpt"

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
    assert "implementation=megatron-lm (Megatron-LM f7727433 + CARAML's NVIDIA patch) kernels=torch " in printed
    assert printed.count("elapsed time per iteration (s):") == 3  # Megatron's own lines pass through
    got = json.loads((out / "megatron-gpt.json").read_text())
    assert got["time_per_iteration"] == pytest.approx(8.0 / 3)  # every interval, as CARAML's JUBE result
    assert got["tokens_per_second"] == pytest.approx(32 * 2048 * 3 / 8.0)
    assert (got["implementation"], got["iterations"], got["tflops_per_gpu"], got["nan_iterations"]) == \
        ("megatron-lm", 15, 100.0, 0)
    assert got["kernels"].startswith("torch (hpcai port")


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
    assert why == ("Megatron-LM f7727433 needs apex and flash-attn, or the torch port (port_torch.py), "
                   "which this tree lacks")
    (prefix / "share" / "megatron-lm" / "megatron").mkdir(exist_ok=True)
    (prefix / "share" / "megatron-lm" / "megatron" / "torch_port.py").write_text("")
    assert megatron_lm.unavailable(str(prefix), True) is None
    assert megatron_lm.kernels() == "torch (hpcai port for apex, flash-attn: megatron/torch_port.py)"


def test_stand_in_corpus_is_the_trees_markdown(megatron_lm, prefix, tmp_path):
    root = prefix / "share" / "megatron-lm"
    (root / "README.md").write_text("# Megatron\n\nA line.\n")
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("Another.\n")
    text = megatron_lm.stand_in_text(str(root), str(tmp_path / "stand-in.txt"))
    assert Path(text).read_text() == "# Megatron\nA line.\nAnother.\n"


def write_index(prefix: Path, tokens: int, docs: int, code: int = 8) -> str:
    """An mmap data set's .idx header (Megatron's MMIDIDX, version 1, dtype code, sequence count)
    and a .bin of TOKENS items of that dtype: all corpus_size reads."""
    import struct

    prefix.parent.mkdir(parents=True, exist_ok=True)
    (prefix.parent / (prefix.name + ".idx")).write_bytes(
        b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code) + struct.pack("<Q", docs)
        + struct.pack("<Q", docs + 1))
    with (prefix.parent / (prefix.name + ".bin")).open("wb") as fh:
        fh.truncate(tokens * {8: 2, 4: 4}[code])  # sparse: only its size is read
    return str(prefix)


def test_a_data_set_too_small_for_carams_samples_is_refused_before_megatron_starts(megatron_lm, prefix, tmp_path,
                                                                                    capsys):
    """CARAML's 300,000,000 samples over the stand-in corpus would have Megatron index it millions of
    times over (doc_idx far beyond int32 and memory): one clear line and exit 2, nothing started;
    with iters=N the same set is fine."""
    data = write_index(tmp_path / "d" / "corpus_text_document", tokens=30_000, docs=1_100)
    assert megatron_lm.corpus_size(data) == (30_000, 1_100)
    rc = megatron_lm.run(SIZE, "800M", data, str(tmp_path / "o"), str(prefix), 30, 5, 0, "H100", 0, 1)
    err = capsys.readouterr().err
    assert rc == 2 and "too small for 300000000 samples of 2048 tokens" in err and "Give iters=N" in err, err
    assert not (tmp_path / "o" / "megatron-gpt.json").exists()
    assert megatron_lm.too_small(data, SIZE, 30) is None  # 960 samples: about 66 passes over 1,100 documents
    assert megatron_lm.corpus_size(str(tmp_path / "missing")) is None
    big = write_index(tmp_path / "oscar" / "oscar_text_document", tokens=10**9, docs=10**6, code=4)
    assert megatron_lm.corpus_size(big) == (10**9, 10**6)
