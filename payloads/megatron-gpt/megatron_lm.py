"""CARAML's LLM benchmark from CARAML's own code path: Megatron-LM at f7727433 with CARAML's
NVIDIA patch (aux/nvidia_energy_llm_fix.patch), both baked by install.sh on CUDA images.

- The data set: Megatron's own tools/preprocess_data.py with CARAML's GPT-2 tokenizer files
  (aux/tokenizers) makes `<prefix>.bin`/`.idx` at run time from a text file (one document per
  line, or JSON lines with a "text" key); a ready prefix (CARAML's OSCAR, oscar_text_document)
  is used as it is. `prepare` also serves the Megatron Core stand-in.
- The run: pretrain_gpt.py with CARAML's arguments (`caraml_argv`, the yaml's gptargs,
  optimizerargs, additionalargs and outputargs for NVIDIA systems), one process per GPU started
  by hpcai's launcher as CARAML's torchrun would (RANK, WORLD_SIZE, MASTER_ADDR/PORT), stopped by
  --exit-duration-in-mins like CARAML.
- tokens/s as CARAML's JUBE result computes it: global batch x sequence length / the mean of every
  logged `elapsed time per iteration (s)` (its pattern's `elp_pat_avg`).

Megatron prints its iteration lines on the last rank only; `share_from_last` hands that rank's
figures to rank 0, which reports. Standard library only at import: the host's tests load this file.
"""

import json
import os
import re
import struct
import subprocess
import sys

ELAPSED = re.compile(r"elapsed time per iteration \(s\):\s+([-+.\deE]+)")
TFLOPS = re.compile(r"\| TFLOPs:\s+([-+.\deE]+)")
NAN_ITERATIONS = re.compile(r"number of nan iterations:\s+(\d+)")
ITERATION = re.compile(r"iteration\s+(\d+)/\s*\d+ \|")

TRAIN_SAMPLES = 300_000_000  # CARAML's --train-samples, which its wall time cuts short
# Megatron's index of a data set repeats its documents once per epoch (int32 entries, shuffled in
# memory): past this a run cannot start, however soon its wall time would end it.
MAX_INDEX_ENTRIES = 2**31 - 1
ITEM_BYTES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 4, 8: 2}  # indexed_dataset.DType codes
INDEX_MAGIC = b"MMIDIDX\x00\x00"


def tree(prefix):
    """Where install.sh baked Megatron-LM and CARAML's tokenizer files."""
    root = os.path.join(prefix, "share", "megatron-lm")
    return {"megatron": root, "vocab": os.path.join(root, "caraml-tokenizers", "gpt2-vocab.json"),
            "merges": os.path.join(root, "caraml-tokenizers", "gpt2-merges.txt")}


def with_tree(megatron):
    """PYTHONPATH with the Megatron-LM tree first, what was there kept (packages installed beside)."""
    return os.pathsep.join(filter(None, [megatron, os.environ.get("PYTHONPATH")]))


def baked(prefix):
    t = tree(prefix)
    return os.path.isfile(os.path.join(t["megatron"], "pretrain_gpt.py")) and os.path.isfile(t["vocab"])


def ported(prefix):
    """Whether install.sh ran port_torch.py on the baked tree (torch fallbacks for apex and flash-attn)."""
    return os.path.isfile(os.path.join(tree(prefix)["megatron"], "megatron", "torch_port.py"))


# pretrain_gpt.py at f7727433 imports apex's fused optimizers and kernels, and CARAML passes
# --use-flash-attn; NGC images carry both, PyTorch's own wheels neither: port_torch.py falls back
# to torch's equivalents there (megatron_torch_port.py).
FAST_KERNELS = ("apex", "flash_attn")


def kernels():
    """Which kernels Megatron-LM runs with here: apex's and flash-attn's, or which the port replaces."""
    import importlib.util

    missing = [m for m in FAST_KERNELS if importlib.util.find_spec(m) is None]
    if not missing:
        return "apex+flash-attn"
    return "torch (hpcai port for %s: megatron/torch_port.py)" % ", ".join(m.replace("_", "-") for m in missing)


def unavailable(prefix, gpu):
    """Why Megatron-LM cannot run here (None: it can)."""
    if not baked(prefix):
        return "Megatron-LM f7727433 is baked into CUDA images only (install.sh)"
    if not gpu:
        return "Megatron-LM f7727433's pretrain_gpt.py needs a GPU (CUDA and NCCL)"
    if kernels() != "apex+flash-attn" and not ported(prefix):
        return "Megatron-LM f7727433 needs apex and flash-attn, or the torch port (port_torch.py), which this tree lacks"
    return None


def stand_in_text(megatron, dest):
    """A corpus when none is given: the Markdown of the baked Megatron-LM tree, one line a document."""
    with open(dest, "w", encoding="utf-8") as out:
        for folder, _dirs, files in sorted(os.walk(megatron)):
            for name in sorted(files):
                if name.endswith(".md"):
                    with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as fh:
                        out.writelines(line for line in fh if line.strip())
    return dest


def prepare(text, workdir, prefix, python=sys.executable, workers=1):
    """TEXT (a text file, one document per non-empty line, or JSON lines with "text") -> the
    prefix of the indexed data set preprocess_data.py writes under WORKDIR."""
    t = tree(prefix)
    os.makedirs(workdir, exist_ok=True)
    jsonl = text
    if not text.endswith((".json", ".jsonl")):
        jsonl = os.path.join(workdir, "corpus.jsonl")
        with open(text, encoding="utf-8", errors="replace") as src, open(jsonl, "w", encoding="utf-8") as out:
            for line in src:
                if line.strip():
                    out.write(json.dumps({"text": line}) + "\n")
    out_prefix = os.path.join(workdir, "corpus")
    subprocess.run([python, os.path.join(t["megatron"], "tools", "preprocess_data.py"), "--input", jsonl,
                    "--output-prefix", out_prefix, "--vocab-file", t["vocab"], "--merge-file", t["merges"],
                    "--tokenizer-type", "GPT2BPETokenizer", "--append-eod", "--workers", str(workers)],
                   check=True, cwd=t["megatron"], env=dict(os.environ, PYTHONPATH=with_tree(t["megatron"])))
    return out_prefix + "_text_document"  # preprocess_data.py's name for the "text" key


def caraml_argv(size, data_prefix, out, prefix, exit_duration, log_interval=5, iters=0):
    """pretrain_gpt.py's arguments as CARAML's llm_benchmark_nvidia_amd.yaml gives them on its
    NVIDIA systems (CMD: tp, pp, $gptargs, $outputargs, --save, --data-path, --split,
    --distributed-backend). SIZE: megatron_gpt.resolve's short names; CARAML's modelargs are the
    precision and, where its row sets one (13B) or the user does (`ffn_explicit`), the ffn size.
    CARAML trains on 300,000,000 samples stopped by the wall time; ITERS > 0 makes that ITERS
    global batches (Megatron's schedules here count samples, not iterations), and an
    EXIT_DURATION of 0 drops the wall time."""
    t = tree(prefix)
    modelargs = (["--ffn-hidden-size", str(size["ffn"])] if size.get("ffn_explicit") else []) + \
        ["--" + size["precision"]]
    optimizerargs = ["--optimizer", "adam", "--adam-beta1", "0.9", "--adam-beta2", "0.999", "--adam-eps", "1e-8",
                     "--lr", "1e-4", "--min-lr", "1e-5", "--lr-decay-style", "cosine",
                     "--lr-decay-samples", "128_953_125", "--lr-warmup-samples", "216_320", "--clip-grad", "1.0",
                     "--weight-decay", "1e-1", "--use-distributed-optimizer"]
    additionalargs = ["--loss-scale-window", "500", "--hysteresis", "2", "--min-loss-scale", "1.0",
                      "--initial-loss-scale", "4096", "--position-embedding-type", "rope", "--use-flash-attn"]
    seq = str(size["seq"])
    gptargs = ["--num-layers", str(size["layers"]), "--hidden-size", str(size["hidden"]),
               "--num-attention-heads", str(size["heads"]), "--seq-length", seq,
               "--max-position-embeddings", seq, "--micro-batch-size", str(size["micro"]),
               "--global-batch-size", str(size["gbs"]),
               "--train-samples", str(iters * size["gbs"]) if iters else f"{TRAIN_SAMPLES:_}",  # CARAML's spelling
               "--vocab-file", t["vocab"], "--merge-file", t["merges"], "--tokenizer-type", "GPT2BPETokenizer",
               "--init-method-std", "0.0048", "--seed", "42", "--sequence-parallel", "--recompute-activations",
               "--recompute-granularity", "selective", *modelargs, *optimizerargs, *additionalargs,
               *(["--exit-duration-in-mins", "%g" % exit_duration] if exit_duration else [])]
    outputargs = ["--log-interval", str(log_interval), "--save-interval", "200000", "--eval-interval", "2000",
                  "--eval-iters", "15", "--tensorboard-dir", os.path.join(out, "tensorboard"),
                  "--tensorboard-queue-size", "5", "--log-timers-to-tensorboard", "--log-batch-size-to-tensorboard",
                  "--log-validation-ppl-to-tensorboard"]
    return ["--tensor-model-parallel-size", str(size["tp"]), "--pipeline-model-parallel-size", str(size["pp"]),
            *gptargs, *outputargs, "--save", os.path.join(out, "checkpoints"), "--data-path", data_prefix,
            "--split", "7,3,1", "--distributed-backend", "nccl"]


def train_samples(size, iters):
    """CARAML's sample count, or ITERS global batches."""
    return iters * size["gbs"] if iters else TRAIN_SAMPLES


def corpus_size(data_prefix):
    """(tokens, documents) of an indexed data set, from its .idx header and its .bin's size; None
    for a file that is not Megatron's mmap format."""
    try:
        with open(data_prefix + ".idx", "rb") as fh:
            head = fh.read(26)
        if not head.startswith(INDEX_MAGIC):
            return None
        code, docs = head[17], struct.unpack("<Q", head[18:26])[0]
        return os.path.getsize(data_prefix + ".bin") // ITEM_BYTES[code], docs
    except (OSError, IndexError, KeyError, struct.error):
        return None


def too_small(data_prefix, size, iters):
    """Why Megatron-LM cannot index DATA_PREFIX for this run's samples (None: it can)."""
    found = corpus_size(data_prefix)
    if not found or not found[0]:
        return None
    tokens, docs = found
    samples = train_samples(size, iters)
    epochs = -(-samples * size["seq"] // tokens)
    if epochs * docs <= MAX_INDEX_ENTRIES:
        return None
    return ("the data set %s (%d tokens, %d documents) is too small for %d samples of %d tokens: Megatron-LM "
            "would index it %d times over. Give iters=N (N global batches), or a larger set (text=, "
            "data_prefix=; CARAML trains on its OSCAR subset)" % (data_prefix, tokens, docs, samples, size["seq"],
                                                                   epochs))


def figures(lines):
    """What CARAML's perf_patterns read from the log: every interval's seconds per iteration and
    TFLOP/s, the last iteration and the NaN count."""
    got = {"elapsed": [], "tflops": [], "iterations": 0, "nan_iterations": 0}
    for line in lines:
        if (m := ELAPSED.search(line)):
            got["elapsed"].append(float(m.group(1)))
            if (t := TFLOPS.search(line)):
                got["tflops"].append(float(t.group(1)))
            if (i := ITERATION.search(line)):
                got["iterations"] = int(i.group(1))
            if (n := NAN_ITERATIONS.search(line)):
                got["nan_iterations"] = int(n.group(1))
    return got


def summary(got, size, model_size):
    """CARAML's result row: Tokens/second = (1 / elp_pat_avg) x global batch x sequence length."""
    if not got["elapsed"]:
        return None
    per_iter = sum(got["elapsed"]) / len(got["elapsed"])
    return {"implementation": "megatron-lm", "model_size": model_size,
            "iterations": got["iterations"], "logged_intervals": len(got["elapsed"]),
            "time_per_iteration": per_iter,
            "tokens_per_second": size["gbs"] * size["seq"] / per_iter,
            "tflops_per_gpu": sum(got["tflops"]) / len(got["tflops"]) if got["tflops"] else None,
            "nan_iterations": got["nan_iterations"]}


def share_from_last(payload, rank, world):
    """The last rank's figures on rank 0, over a gloo group of the launcher's ranks (on the next
    port: Megatron's own group ended with its process)."""
    if world == 1:
        return payload
    import datetime

    import torch.distributed as dist

    port = int(os.environ["MASTER_PORT"]) + 1
    # A rank that died before this point leaves the others waiting: five minutes, then an error.
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (os.environ["MASTER_ADDR"], port),
                            rank=rank, world_size=world, timeout=datetime.timedelta(minutes=5))
    box = [payload]
    dist.broadcast_object_list(box, src=world - 1)
    dist.destroy_process_group()
    return box[0]


def run(size, model_size, data_prefix, out, prefix, exit_duration, log_interval, iters, accelerator, rank, world):
    """pretrain_gpt.py on this rank, its output passed through; rank 0 writes megatron-gpt.json.
    Returns the process's exit status."""
    why = too_small(data_prefix, size, iters)
    if why:
        print("megatron-gpt: %s" % why, file=sys.stderr, flush=True)
        return 2
    t = tree(prefix)
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=with_tree(t["megatron"]),
               CUDA_DEVICE_MAX_CONNECTIONS="1", TORCH_NCCL_ASYNC_ERROR_HANDLING="1",
               # CARAML's patch: on its systems a run that reaches the exit duration returns instead
               # of sys.exit() (its jpwr files are written after); ENERGY_PATH names them.
               ACCELERATOR=accelerator, ENERGY_PATH=os.path.join(out, "%s_power.csv" % accelerator))
    argv = [sys.executable, os.path.join(t["megatron"], "pretrain_gpt.py"),
            *caraml_argv(size, data_prefix, out, prefix, exit_duration, log_interval, iters)]
    if rank == 0:
        print("megatron-gpt: implementation=megatron-lm (Megatron-LM f7727433 + CARAML's NVIDIA patch) "
              "kernels=%s data=%s" % (kernels(), data_prefix), flush=True)
    lines = []
    with subprocess.Popen(argv, cwd=t["megatron"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line)
    got = share_from_last(summary(figures(lines), size, model_size), rank, world)
    if got is not None:
        got["kernels"] = kernels()
    if rank == 0:
        if got is None:
            print("megatron-gpt: Megatron-LM logged no iteration (exit %d)" % proc.returncode, flush=True)
            return proc.returncode or 1
        print("megatron-gpt: tokens/s=%.1f time_per_iteration=%.4f s (= %d x %d tokens / mean of %d logged "
              "intervals, as CARAML's JUBE result)" % (got["tokens_per_second"], got["time_per_iteration"],
                                                      size["gbs"], size["seq"],
                                                      got["logged_intervals"]), flush=True)
        with open(os.path.join(out, "megatron-gpt.json"), "w") as fh:
            json.dump(got, fh, indent=1)
    return proc.returncode
