"""payloads/mila-training: the port of Mila's code, hpcai's benchutils and the wrapper's parts that
run without torch (the whole payload runs Mila's scripts in the CPU image:
tests/integration/test_payloads_image.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
from argparse import Namespace
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PAYLOAD = REPO / "payloads" / "mila-training"
ARCHIVE = REPO / "tests/infra/mirror/github/mila-iqia/training/224a69c36fb9388635af729f3ed186ac75989f25.tar.gz"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def wrapper():
    return load(PAYLOAD / "mila_training.py", "mila_training_wrapper")


@pytest.fixture
def benchutils(monkeypatch):
    monkeypatch.syspath_prepend(str(PAYLOAD / "install"))
    for name in [m for m in sys.modules if m == "benchutils" or m.startswith("benchutils.")]:
        monkeypatch.delitem(sys.modules, name)
    import benchutils.chrono
    import benchutils.statstream

    return benchutils


@pytest.fixture(scope="module")
def mila_src(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("mila")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(dest, filter="data")
    return next(dest.iterdir())


def test_warm_up_drop_is_milas(benchutils):
    """Experiment(skip_obs=10): 12 observations give count 2, the mean of the last two; the 10th
    is kept for min and max (the re-based arithmetic of the stream Mila ran with)."""
    stream = benchutils.statstream.StatStream(10)
    obs = [5.0, 4.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 0.5, 2.0, 4.0]
    for x in obs:
        stream.update(x)
    assert stream.count == 2 and stream.avg == pytest.approx(3.0) and stream.sd == pytest.approx(1.0)
    assert stream.min == 0.5 and stream.max == 4.0
    short = benchutils.statstream.StatStream(10)
    for x in obs[:9]:
        short.update(x)
    assert short.avg == 0.0 and short.count == 1  # nothing counted yet: Mila's report shows 0
    none_dropped = benchutils.statstream.StatStream(0)
    for x in (1.0, 2.0, 3.0):
        none_dropped.update(x)
    assert none_dropped.to_dict() == {"avg": 2.0, "min": 1.0, "max": 3.0, "sd": pytest.approx((2 / 3) ** 0.5),
                                      "count": 3, "unit": "s"}


def test_chrono_syncs_around_each_block_and_skips_a_failed_one(benchutils):
    calls = []
    chrono = benchutils.chrono.MultiStageChrono(skip_obs=0, sync=lambda: calls.append("sync"), name="toy_reg")
    with chrono.time("train") as stream:
        calls.append("work")
    with pytest.raises(RuntimeError), chrono.time("train"):
        raise RuntimeError("a batch failed")
    assert calls == ["sync", "work", "sync", "sync", "sync"] and stream.current_count == 1
    report = chrono.to_dict({"batch_size": 4})
    assert report["name"] == "toy_reg" and report["batch_size"] == 4 and report["train"]["count"] == 1


def test_port_applies_each_change_once_and_refuses_a_moved_pin(mila_src, tmp_path):
    port = load(PAYLOAD / "install" / "port.py", "mila_port")
    port.port(mila_src)
    for rel, old, new, _why in port.CHANGES:
        text = (mila_src / rel).read_text()
        assert new in text and (old not in text or old in new)
    with pytest.raises(SystemExit, match=r"run\.py: expected"):
        port.port(mila_src)  # already ported: the original lines are gone


def test_jobs_are_milas_own_narrowed_and_resized(wrapper, mila_src, capsys):
    jobs = json.loads((mila_src / "profiles/fast.json").read_text())
    names = [j["name"] for j in jobs]
    assert len(set(names)) == len(names) == 19  # Mila's 19 benchmarks, by Mila's names
    picked = wrapper.select(jobs, "wlm,toy_reg")
    assert [j["name"] for j in picked] == ["toy_reg", "wlm"]  # fast.json's order
    with pytest.raises(SystemExit) as bad:
        wrapper.select(jobs, "toy_reg,resnet")
    assert bad.value.code == 2
    assert capsys.readouterr().err.startswith("mila-training: unknown benchmark 'resnet'; valid: all, toy_reg, toy_lstm")
    opts = Namespace(number=2, repeat=12, batch_size=0)
    toy_lstm = wrapper.adapt(next(j for j in jobs if j["name"] == "toy_lstm"), opts, False, None)
    assert toy_lstm["args"]["--number"] == 2 and toy_lstm["args"]["--repeat"] == 12
    assert "--batch-size" not in toy_lstm["args"] and "--cuda" not in toy_lstm["args"]
    assert toy_lstm["args"]["--no-cuda"] == "" and toy_lstm["cmd"] == "./time_sequence_prediction/lstm/pytorch/run.sh"
    wlm = wrapper.adapt(next(j for j in jobs if j["name"] == "wlm"), opts, True, Path("/d/wikitext-2"))
    assert wlm["args"]["--batch-size"] == 64 and wlm["args"]["--cuda"] == "" and wlm["args"]["--data"] == "/d/wikitext-2"


def test_stand_in_corpus_and_data_links(wrapper, mila_src, tmp_path):
    corpus = wrapper.stand_in_corpus(mila_src, tmp_path, 5)
    shipped = mila_src / "natural_language_processing/word_language_model/data/wikitext-2"
    assert not (shipped / "train.txt").exists()  # the mirror could not have it
    assert (corpus / "train.txt").read_text() == (corpus / "valid.txt").read_text()
    assert (corpus / "valid.txt").read_text().splitlines() == (shipped / "valid.txt").read_text().splitlines()[:5]
    user = tmp_path / "user-data"
    (user / "ImageNet" / "train").mkdir(parents=True)
    data = wrapper.data_folder(tmp_path / "base", str(user))
    assert (data / "ImageNet").is_symlink() and (data / "ImageNet" / "train").is_dir()


def test_stand_in_movielens_has_ml20m_columns_and_enough_ratings_for_fast_json(wrapper, mila_src, tmp_path):
    how = wrapper.stand_in_movielens(tmp_path / "ml-20m")
    rows = (tmp_path / "ml-20m" / "ratings.csv").read_text().splitlines()
    assert rows[0] == "userId,movieId,rating,timestamp"  # what Mila's load.py load_ml_20m reads
    per_user: dict[str, int] = {}
    for row in rows[1:]:
        user, movie, rating, stamp = row.split(",")
        per_user[user] = per_user.get(user, 0) + 1
        assert 1 <= int(movie) <= wrapper.MOVIELENS_MOVIES and 1.0 <= float(rating) <= 5.0 and int(stamp) > 0
    assert min(per_user.values()) >= 20  # convert.py drops users with fewer than MIN_RATINGS
    recom = next(j for j in json.loads((mila_src / "profiles/fast.json").read_text()) if j["name"] == "recom")
    samples = (len(rows) - 1 - len(per_user)) * 5  # less each user's held-out test item; 4 negatives each
    assert samples >= (recom["args"]["--number"] + 1) * recom["args"]["--batch-size"]  # Mila reads number + 1
    assert how.startswith("1000 users x 30 ratings of 2000 movies")
    assert wrapper.stand_in_movielens(tmp_path / "again") == how
    assert (tmp_path / "again" / "ratings.csv").read_text() == (tmp_path / "ml-20m" / "ratings.csv").read_text()


def test_stand_in_wmt16_uses_rnn_translators_file_names(wrapper, mila_src, tmp_path):
    folder = tmp_path / "wmt16"
    wrapper.stand_in_wmt16(mila_src, folder)
    config = (mila_src / "natural_language_processing/rnn_translator/pytorch/seq2seq/data/config.py").read_text()
    for name in ("vocab.bpe.32000", "train.tok.clean.bpe.32000.en", "train.tok.clean.bpe.32000.de"):
        assert f"'{name}'" in config and (folder / name).is_file()
    english = (folder / "train.tok.clean.bpe.32000.en").read_text().splitlines()
    assert english == (folder / "train.tok.clean.bpe.32000.de").read_text().splitlines()  # a copy task
    assert len(english) > 11 * 64 and all(1 <= len(s.split()) <= 50 for s in english)  # fast.json: 64 x (10 + 1)
    vocab = set((folder / "vocab.bpe.32000").read_text().split())
    assert {w for s in english for w in s.split()} == vocab and not any(s.startswith("=") for s in english)


def test_recom_converts_then_trains_in_one_run(tmp_path):
    """Ported run.sh: config.env's EXEC=exec no longer ends the job with the conversion, and the
    conversion gets the job's --no-cuda (a python that logs its argv stands in: no torch here)."""
    port = load(PAYLOAD / "install" / "port.py", "mila_port")
    src = tmp_path / "src"
    script = "recommendation/neural_collaborative_filtering/pytorch/run.sh"
    (src / script).parent.mkdir(parents=True)
    with tarfile.open(ARCHIVE) as tar:  # the unported file (mila_src is ported by an earlier test)
        member = next(m for m in tar.getmembers() if m.name.endswith("/" + script))
        (src / script).write_bytes(tar.extractfile(member).read())
    port.port_one(src, next(c for c in port.CHANGES if c[0] == script))
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python").write_text('#!/bin/sh\necho "python $*" >> "$LOG"\n')
    (bin_ / "python").chmod(0o755)
    (src / "config.env").write_text("export EXEC=exec\n")
    log = tmp_path / "log"
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "DATA_DIRECTORY": str(tmp_path / "data"), "LOG": str(log)}
    subprocess.run(["bash", str(src / script), str(tmp_path / "data/ml-20m"), "--number", "2", "--no-cuda"],
                   env=env, check=True, cwd=tmp_path)
    convert, ncf = log.read_text().splitlines()
    assert convert.endswith("convert.py " + f"{tmp_path}/data/ml-20m/ratings.csv {tmp_path}/data/ml-20m --negatives 999 --no-cuda")
    assert ncf.endswith(f"ncf.py {tmp_path}/data/ml-20m --number 2 --no-cuda")


def test_reports_of_every_copy_are_read_and_summarized(wrapper, tmp_path):
    report = (REPO / "tests/fixtures/logs/mila_training_report_0.json").read_text()
    (tmp_path / "hpcai_0.json").write_text(report)
    (tmp_path / "hpcai_1.json").write_text(report)
    reports = wrapper.read_reports(tmp_path)
    assert [(r["name"], r["copy"]) for r in reports] == [("toy_reg", "0"), ("toy_lstm", "0"), ("wlm", "0"),
                                                        ("toy_reg", "1"), ("toy_lstm", "1"), ("wlm", "1")]
    summary = wrapper.summarize(reports, [], ["wlm"])
    toy_reg = summary["benchmarks"]["toy_reg"]
    assert toy_reg["copies"] == 2 and toy_reg["items_per_sec_total"] == pytest.approx(2 * toy_reg["items_per_sec"])
    rates = [b["items_per_sec"] for b in summary["benchmarks"].values()]
    assert summary["score"] == pytest.approx((rates[0] * rates[1] * rates[2]) ** (1 / 3))
