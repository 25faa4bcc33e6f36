"""Run the Mila training suite (mila-iqia/training @224a69c3) through its own harness, `run.py`.

    python mila_training.py --src /opt/hpcai/share/mila-training --out OUT --bench toy_reg,toy_lstm \
        [--number N] [--repeat N] [--batch-size N] [--data DIR] [--device auto|cpu|gpu] [--corpus-lines N]

The jobs are Mila's own (`profiles/fast.json`: each benchmark's script, arguments and cgroup),
narrowed to --bench; --number, --repeat and --batch-size replace Mila's values where a job has
them (0 keeps Mila's). hpcai writes them as a jobs file in OUT and runs Mila's run.py (without
cgexec and nocache, which need root on a node): one copy per GPU, CUDA_VISIBLE_DEVICES=i, as
Mila does, each timing `number` batches `repeat` times, the first 10 observations dropped, and
appending its JSON report to OUT/mila/output/hpcai_<copy>.json. Then this prints one line per
benchmark and copy and the suite's score (the geometric mean of the benchmarks' items/s) and
writes OUT/mila-training.json. A job Mila's summary.txt does not mark `passed` fails the run.

Data (Mila's $DATA_DIRECTORY): --data DIR is read in place (DIR/ImageNet/train, DIR/mnist, DIR/coco,
DIR/wmt16, DIR/ml-20m, DIR/wikitext-2 …); toy_lstm's sine waves are made by Mila's own
generate_sine_wave.py when DIR has none. WikiText-2's train.txt is not in the pinned archive (see
the mirror's README): without DIR/wikitext-2/train.txt, wlm and wlmfp16 train on a stand-in
corpus, the archive's valid.txt as train.txt, cut to --corpus-lines lines when above 0, and the
run says so (`stand-in`). Likewise recom without DIR/ml-20m trains on a stand-in MovieLens (its
ratings.csv columns, seeded ratings; Mila's own convert.py makes the training files), and
translator without DIR/wmt16 on a stand-in WMT16 (the archive's WikiText-2 sentences as a copy
task, in rnn_translator's file names).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

WORD_LM = ("wlm", "wlmfp16")
SINE_WAVES = "time_series_prediction/traindata.pt"
TAG = "mila-training:"


def select(jobs: list[dict], bench: str) -> list[dict]:
    names = [job["name"] for job in jobs]
    wanted = names if bench == "all" else [b for b in bench.split(",") if b]
    unknown = [b for b in wanted if b not in names]
    if unknown or not wanted:
        print(f"mila-training: unknown benchmark {','.join(unknown) or bench!r}; valid: all, {', '.join(names)}",
              file=sys.stderr)
        sys.exit(2)
    return [job for job in jobs if job["name"] in wanted]


def adapt(job: dict, opts: argparse.Namespace, on_gpu: bool, wikitext: Path | None) -> dict:
    """Mila's job with the run's sizes, its device, and the WikiText-2 folder for the word LMs."""
    args = dict(job["args"])
    for key, value in (("--number", opts.number), ("--repeat", opts.repeat), ("--batch-size", opts.batch_size)):
        if value > 0 and key in args:
            args[key] = value
    if not on_gpu:  # Mila's perf options: --cuda is the default, --no-cuda turns it off
        args.pop("--cuda", None)
        args["--no-cuda"] = ""
    if job["name"] in WORD_LM and wikitext is not None:
        args["--data"] = str(wikitext)  # after run.sh's own --data: argparse keeps the last
    return {**job, "args": args}


def data_folder(base: Path, data: str) -> Path:
    """$BASE/data as Mila's config.env sets it: links to the entries of --data (read in place)."""
    folder = base / "data"
    folder.mkdir(parents=True, exist_ok=True)
    if data:
        for entry in sorted(Path(data).resolve().iterdir()):
            link = folder / entry.name
            if not link.exists():
                link.symlink_to(entry)
    return folder


def stand_in_corpus(src: Path, base: Path, lines: int) -> Path:
    """WikiText-2 from the archive's valid.txt and test.txt, valid.txt also standing in as train.txt."""
    shipped = src / "natural_language_processing/word_language_model/data/wikitext-2"
    corpus = base / "wikitext-2-stand-in"
    corpus.mkdir(parents=True, exist_ok=True)
    for name, origin in (("train.txt", "valid.txt"), ("valid.txt", "valid.txt"), ("test.txt", "test.txt")):
        text = (shipped / origin).read_text(encoding="utf-8").splitlines(keepends=True)
        (corpus / name).write_text("".join(text[:lines] if lines > 0 else text), encoding="utf-8")
    return corpus


def wikitext_sentences(src: Path) -> list[str]:
    """The archive's WikiText-2 valid and test text, split at ' . ', without headings."""
    shipped = src / "natural_language_processing/word_language_model/data/wikitext-2"
    sentences = []
    for name in ("valid.txt", "test.txt"):
        for line in (shipped / name).read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.strip().startswith("="):
                sentences += [f"{s.strip()} ." for s in line.split(" . ") if s.strip()]
    return sentences


# Sized for fast.json's recom (batch 2048, number 50; Mila's loop takes number + 1 batches): 29,000
# training ratings, each with 4 negatives, give 145,000 samples, more than the 104,448 it reads.
MOVIELENS_USERS, MOVIELENS_MOVIES, MOVIELENS_PER_USER = 1000, 2000, 30


def stand_in_movielens(folder: Path) -> str:
    """ratings.csv with MovieLens-20M's columns, seeded: every user rates 30 movies (convert.py keeps
    users with 20 or more, and holds out each user's latest for its test set)."""
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "ratings.csv", "w", newline="", encoding="utf-8") as out:
        rows = csv.writer(out)
        rows.writerow(["userId", "movieId", "rating", "timestamp"])
        for user in range(1, MOVIELENS_USERS + 1):
            for movie in rng.sample(range(1, MOVIELENS_MOVIES + 1), MOVIELENS_PER_USER):
                rows.writerow([user, movie, rng.choice((1.0, 2.0, 3.0, 3.5, 4.0, 4.5, 5.0)),
                               1_100_000_000 + rng.randrange(100_000_000)])
    return (f"{MOVIELENS_USERS} users x {MOVIELENS_PER_USER} ratings of {MOVIELENS_MOVIES} movies "
            "in ratings.csv (seeded), converted by Mila's convert.py")


def stand_in_wmt16(src: Path, folder: Path) -> str:
    """rnn_translator's WMT16 files (seq2seq/data/config.py's names): the archive's WikiText-2
    sentences of 1 to 50 words (train.py's --max-length-train) as both English and German, a
    copy task, and their words as the vocabulary."""
    sentences = [s for s in wikitext_sentences(src) if len(s.split()) <= 50]
    folder.mkdir(parents=True, exist_ok=True)
    words = sorted({word for sentence in sentences for word in sentence.split()})
    (folder / "vocab.bpe.32000").write_text("\n".join(words) + "\n", encoding="utf-8")
    for lang in ("en", "de"):
        (folder / f"train.tok.clean.bpe.32000.{lang}").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return f"{len(sentences)} WikiText-2 sentences from the archive as a copy task, {len(words)} words"


def read_reports(output: Path) -> list[dict]:
    """Every copy's reports. Mila appends `{…},` to a file it opened with `[`, never closing it."""
    reports = []
    for path in sorted(output.glob("hpcai_*.json")):
        text = path.read_text(encoding="utf-8").strip()
        data = json.loads(text.rstrip(",") + "]")
        reports += [dict(r, copy=path.stem.rsplit("_", 1)[1]) for r in data if isinstance(r, dict)]
    return reports


def summarize(reports: list[dict], failed: list[str], stand_in: list[str]) -> dict:
    benchmarks: dict[str, dict] = {}
    for report in reports:
        rate = report.get("train_item", {}).get("avg")
        if isinstance(rate, (int, float)) and rate > 0:
            entry = benchmarks.setdefault(report["name"], {"items_per_sec": [], "train_s": []})
            entry["items_per_sec"].append(rate)
            entry["train_s"].append(report["train"]["avg"])
    summary = {name: {"copies": len(e["items_per_sec"]),
                      "items_per_sec": sum(e["items_per_sec"]) / len(e["items_per_sec"]),
                      "items_per_sec_total": sum(e["items_per_sec"]),
                      "train_s": sum(e["train_s"]) / len(e["train_s"])}
               for name, e in benchmarks.items()}
    rates = [b["items_per_sec"] for b in summary.values()]
    score = math.exp(sum(math.log(r) for r in rates) / len(rates)) if rates else 0.0
    return {"benchmarks": summary, "score": score, "failed": failed, "stand_in": stand_in}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", required=True, type=Path, help="the ported repository")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--bench", default="all")
    parser.add_argument("--number", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument("--data", default="")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument("--corpus-lines", type=int, default=0)
    opts = parser.parse_args()

    jobs = select(json.loads((opts.src / "profiles/fast.json").read_text()), opts.bench)
    on_gpu = opts.device == "gpu"
    if opts.device == "auto":
        import torch

        on_gpu = torch.cuda.is_available()
    base = (opts.out / "mila").resolve()
    output = base / "output"
    output.mkdir(parents=True, exist_ok=True)
    data = data_folder(base, opts.data)
    env = {**os.environ, "BASE": str(base), "OUTPUT_DIRECTORY": str(output), "DATA_DIRECTORY": str(data),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # Mila's `python`
    names = [job["name"] for job in jobs]
    if "toy_lstm" in names and not (data / SINE_WAVES).exists():
        subprocess.run([sys.executable, "time_sequence_prediction/lstm/generate_sine_wave.py"],
                       cwd=opts.src, env=env, check=True)
    wikitext, stand_in = data / "wikitext-2", []
    if any(n in WORD_LM for n in names) and not (wikitext / "train.txt").is_file():
        wikitext = stand_in_corpus(opts.src, base, opts.corpus_lines)
        stand_in = [n for n in names if n in WORD_LM]
        print(f"{TAG} stand-in WikiText-2 for {', '.join(stand_in)}: valid.txt as train.txt "
              f"({opts.corpus_lines or 'all'} lines), no train.txt in the pinned archive", flush=True)
    for name, dataset, label, make in (("recom", "ml-20m", "MovieLens-20M", stand_in_movielens),
                                       ("translator", "wmt16", "WMT16", lambda f: stand_in_wmt16(opts.src, f))):
        if name in names and not (data / dataset).exists():  # --data has none: Mila's path, in BASE
            print(f"{TAG} stand-in {label} for {name}: {make(data / dataset)}", flush=True)
            stand_in.append(name)
    jobs_file = base / "hpcai.json"
    jobs_file.write_text(json.dumps([adapt(job, opts, on_gpu, wikitext) for job in jobs], indent=2))

    # Mila's harness runs each job (its copies) in turn and keeps going after a failure.
    subprocess.run([sys.executable, "run.py", "--no-cgexec", "--no-nocache", "--jobs", str(jobs_file)],
                   cwd=opts.src, env=env, check=False)
    lines = (output / "summary.txt").read_text().splitlines() if (output / "summary.txt").exists() else []
    verdicts = [line for line in lines if not line.startswith("Total Time")][-len(jobs):]
    failed = [name for name, line in zip(names, verdicts + [""] * len(names)) if not line.endswith(" passed")]
    summary = summarize(read_reports(output), failed, stand_in)
    failed += [n for n in names if n not in summary["benchmarks"] and n not in failed]  # passed, but no report
    for name, bench in summary["benchmarks"].items():
        print(f"{TAG} {name} {bench['items_per_sec']:.6g} items/s per copy, {bench['copies']} copies, "
              f"train {bench['train_s']:.6g} s")
    if summary["benchmarks"]:
        print(f"{TAG} score {summary['score']:.6g} items/s over {len(summary['benchmarks'])} benchmarks")
    (opts.out / "mila-training.json").write_text(json.dumps(summary, indent=2))
    if failed:
        print(f"{TAG} failed: {', '.join(failed)} (Mila's summary: {output / 'summary.txt'})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
