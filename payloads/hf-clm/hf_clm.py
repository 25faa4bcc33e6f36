"""Hugging Face Transformers causal-LM training in the shape of the WikiText-2 GPT-2 benchmark.

The benchmark (run_clm.py) fine-tunes pretrained GPT-2 on wikitext-2-raw-v1 for 3 epochs at
batch 8 and evaluates (perplexity), once in FP32 and once in FP16: `--profile wikitext2`.
Real data and weights are read, in order, from `--data DIR` (HPCAI_DATA, what `hpcai launch
--data` mounts), the Hugging Face cache (HF_HOME) and the hub. When none has them, the run says
`FALLING BACK TO SYNTHETIC` and why, and trains on random tokens of the benchmark's shape; every
line it prints then says SYNTHETIC, and so do its results. Offline by default (`dataset
synthetic`): the model is built from its configuration (random weights).
The Llama-2-7B variant uses a DeepSpeed ZeRO config; a hub token is read from the environment at
run time (HF_TOKEN), never baked. The HF Trainer prints its usual `***** train metrics *****`
block and writes output_dir/train_results.json; this script adds
TFLOP/s per device = samples/s x 6 x parameters x sequence length / devices.

--data DIR layout (any part may be missing):
    DIR/wikitext-2-raw-v1/        datasets' save_to_disk folder, or the original archive's
                                  wiki.train.raw and wiki.valid.raw
    DIR/<hub id>/                 a save_pretrained model or tokenizer (DIR/gpt2, DIR/meta-llama/…)
"""

import argparse
import json
import math
import os
import sys

import torch

CONFIGS = {
    # name: (config class, hub id, kwargs). gpt2 matches the 124M hub model's config.
    "gpt2": ("GPT2Config", "gpt2", {}),
    "gpt2-tiny": ("GPT2Config", None, dict(n_layer=2, n_head=2, n_embd=64, vocab_size=1024,
                                           n_positions=256, bos_token_id=0, eos_token_id=0)),
    "llama-2-7b": ("LlamaConfig", "meta-llama/Llama-2-7b-hf",
                   dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                        max_position_embeddings=4096)),
}


def local_dir(data, hub_id):
    """DIR/<hub id> when --data holds a save_pretrained copy, else the hub id (cache, then hub)."""
    folder = os.path.join(data, hub_id) if data and hub_id else ""
    if folder and any(os.path.isfile(os.path.join(folder, f)) for f in ("config.json", "tokenizer_config.json")):
        return folder
    return hub_id


def build_model(name, pretrained, data):
    import transformers
    cls_name, hub_id, kwargs = CONFIGS[name]
    if pretrained:
        if not hub_id:
            raise SystemExit("hf-clm: model %s has no pretrained weights" % name)
        return transformers.AutoModelForCausalLM.from_pretrained(local_dir(data, hub_id),
                                                                 token=os.environ.get("HF_TOKEN"))
    config = getattr(transformers, cls_name)(**kwargs)
    return transformers.AutoModelForCausalLM.from_config(config)


class SyntheticTokens(torch.utils.data.Dataset):
    """Random token blocks, the shape run_clm's group_texts produces (labels = input_ids)."""

    def __init__(self, samples, seq_len, vocab, seed=0):
        gen = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, vocab, (samples, seq_len), generator=gen)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        ids = self.data[i]
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}


def step_logger(transformers):
    """A callback printing `hf-clm: step N loss X` lines on the main process."""
    class StepLog(transformers.TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs and "loss" in logs:
                print("hf-clm: step %d loss %.4f" % (state.global_step, float(logs["loss"])), flush=True)
    return StepLog()


def wikitext_texts(name, data):
    """{split: text} of the real WikiText-2, from --data or through datasets (cache, then hub)."""
    folder = os.path.join(data, name) if data else ""
    ext = "raw" if "raw" in name else "tokens"  # the original archives' file names
    raw_files = {"train": "wiki.train." + ext, "validation": "wiki.valid." + ext}
    if folder and all(os.path.isfile(os.path.join(folder, f)) for f in raw_files.values()):
        out = {}
        for split, fname in raw_files.items():
            with open(os.path.join(folder, fname), encoding="utf-8") as fh:
                out[split] = fh.read()
        return out, folder
    import datasets  # not in CPU images: there only --data's raw files can give the real data

    if folder and os.path.isdir(folder):
        ds = datasets.load_from_disk(folder)
        where = folder
    else:
        ds = datasets.load_dataset("wikitext", name)
        where = "the Hugging Face cache or hub (wikitext/%s)" % name
    return {split: "\n\n".join(ds[split]["text"]) for split in ("train", "validation")}, where


def wikitext(name, seq_len, hub_id, data, tokenizer_name):
    """Train and validation blocks of the real WikiText-2, tokenized and grouped like run_clm.py."""
    import transformers
    texts, where = wikitext_texts(name, data)
    tok = transformers.AutoTokenizer.from_pretrained(local_dir(data, tokenizer_name or hub_id),
                                                     token=os.environ.get("HF_TOKEN"))
    out = {}
    for split, text in texts.items():
        ids = tok(text)["input_ids"]
        blocks = [ids[i:i + seq_len] for i in range(0, len(ids) - seq_len + 1, seq_len)]
        ds = SyntheticTokens(1, 1, 1)
        ds.data = torch.tensor(blocks)
        out[split] = ds
    return out, where


def real_data(args):
    """({train, validation} datasets, where they came from), or (None, why not)."""
    try:
        return wikitext(args.dataset, args.seq_len, CONFIGS[args.model][1], args.data, args.tokenizer)
    except Exception as exc:  # offline, not cached, not in --data: the caller falls back, loudly
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None, "%s: %s" % (type(exc).__name__, first[:300])


def stack_version(name):
    """An installed package's version, or "absent" (the image's variant decides: payload.toml)."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2", choices=sorted(CONFIGS))
    ap.add_argument("--dataset", default="synthetic", choices=["synthetic", "wikitext-2-raw-v1", "wikitext-2-v1"])
    ap.add_argument("--pretrained", default="false", choices=["true", "false"],
                    help="load hub weights (from --data, the HF cache or the hub; HF_TOKEN for gated models)")
    ap.add_argument("--data", default=os.environ.get("HPCAI_DATA", ""),
                    help="folder with the dataset and models (default: HPCAI_DATA)")
    ap.add_argument("--tokenizer", default="", help="tokenizer (hub id or DIR/<name>; default: the model's)")
    ap.add_argument("--batch-size", type=int, default=8, help="per device")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=50, help="optimizer steps (when --epochs is 0)")
    ap.add_argument("--epochs", type=float, default=0, help="epochs over the data (0: --steps)")
    ap.add_argument("--eval", default="false", choices=["true", "false"], help="evaluate: eval_loss, perplexity")
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--grad-checkpointing", default="false", choices=["true", "false"])
    ap.add_argument("--samples", type=int, default=0, help="synthetic samples (0: batch x ranks x steps)")
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    ap.add_argument("--zero", default="none", choices=["none", "2", "3"],
                    help="DeepSpeed ZeRO stage (configs ds_zero<N>.json next to this script)")
    ap.add_argument("--output-dir", default=os.environ.get("HPCAI_PAYLOAD_OUT", "/tmp/hf-clm"))
    args = ap.parse_args()
    args.pretrained = args.pretrained == "true"
    here = os.path.dirname(os.path.abspath(__file__))
    args.deepspeed = os.path.join(here, "ds_zero%s.json" % args.zero) if args.zero != "none" else ""
    os.makedirs(args.output_dir, exist_ok=True)

    import transformers
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    gpu = torch.cuda.is_available()
    precision = args.precision
    if precision == "auto":
        precision = "bf16" if gpu and torch.cuda.is_bf16_supported() else "fp32"
    if world > 1 and not args.deepspeed and not torch.distributed.is_initialized():
        # Initialise from the entrypoint's RANK/WORLD_SIZE/MASTER_ADDR ourselves: accelerate only
        # does it on CPUs for launchers it recognises.
        torch.distributed.init_process_group("nccl" if gpu else "gloo", init_method="env://")
        if gpu:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    splits, fallback = None, ""
    if args.dataset != "synthetic":
        splits, where = real_data(args)
        if splits is None:
            fallback = where
    try:
        model = build_model(args.model, args.pretrained, args.data)
    except Exception as exc:
        if not args.pretrained:
            raise
        fallback = fallback or "pretrained %s weights: %s: %s" % (args.model, type(exc).__name__, str(exc)[:300])
        splits = None
        model = build_model(args.model, False, args.data)
    synthetic = splits is None
    if fallback and rank == 0:
        # The user asked for the real benchmark: say plainly, once, what is missing and where we looked.
        print("hf-clm: FALLING BACK TO SYNTHETIC data and random weights: %s not found in --data (%s), "
              "the Hugging Face cache (HF_HOME=%s) or the hub (%s)"
              % (args.dataset, args.data or "none given", os.environ.get("HF_HOME", "~/.cache/huggingface"),
                 fallback), flush=True)
    if args.grad_checkpointing == "true":
        model.gradient_checkpointing_enable()
    params = sum(p.numel() for p in model.parameters())
    if synthetic:
        vocab = model.config.vocab_size
        samples = args.samples or args.batch_size * world * args.steps
        train, evaluation = SyntheticTokens(samples, args.seq_len, vocab), None
        if args.eval == "true":
            evaluation = SyntheticTokens(max(args.batch_size * world, samples // 10), args.seq_len, vocab, seed=1)
    else:
        train, evaluation = splits["train"], splits["validation"] if args.eval == "true" else None
    if rank == 0:
        print("hf-clm: model=%s params=%d seq_len=%d batch_size=%d ranks=%d precision=%s data=%s%s"
              % (args.model, params, args.seq_len, args.batch_size, world, precision,
                 "synthetic" if synthetic else args.dataset,
                 " SYNTHETIC (random weights, random tokens; not comparable to a real fine-tune loss)"
                 if synthetic else " from %s" % where), flush=True)
        print("hf-clm: " + ", ".join("%s %s" % (name, stack_version(name))
                                     for name in ("transformers", "accelerate", "datasets", "evaluate")), flush=True)
    targs = transformers.TrainingArguments(
        output_dir=args.output_dir, per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size, learning_rate=args.lr,
        num_train_epochs=args.epochs or 3.0, max_steps=-1 if args.epochs else args.steps,
        logging_steps=max(1, args.steps // 5) if not args.epochs else 500, save_strategy="no",
        report_to=[], bf16=precision == "bf16", fp16=precision == "fp16", use_cpu=not gpu,
        deepspeed=args.deepspeed or None, dataloader_drop_last=True, disable_tqdm=True,
        seed=args.seed, ddp_backend=("nccl" if gpu else "gloo") if world > 1 else None,
    )
    trainer = transformers.Trainer(model=model, args=targs, train_dataset=train, eval_dataset=evaluation)
    # Transformers 5 prints its log dicts with values formatted as strings, which log parsers
    # cannot read as numbers: print step losses and the final dict ourselves, as numbers.
    trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
    trainer.remove_callback(transformers.trainer_callback.ProgressCallback)
    trainer.add_callback(step_logger(transformers))
    result = trainer.train()
    metrics = dict(result.metrics)
    metrics["train_samples"] = len(train)
    metrics["train_steps"] = result.global_step  # what ran (epochs decide it, not --steps): the export's Iterations
    if trainer.is_world_process_zero():
        print({k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}, flush=True)
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    eval_metrics = {}
    if evaluation is not None:
        eval_metrics = trainer.evaluate()
        eval_metrics["eval_samples"] = len(evaluation)
        if "eval_loss" not in eval_metrics:  # fewer eval blocks than ranks x batch: nothing evaluated
            raise SystemExit("hf-clm: the evaluation split (%d blocks of %d tokens) is smaller than one batch "
                             "on every rank (%d x %d)" % (len(evaluation), args.seq_len, world, args.batch_size))
        try:  # run_clm.py's perplexity
            eval_metrics["perplexity"] = math.exp(eval_metrics["eval_loss"])
        except OverflowError:
            eval_metrics["perplexity"] = float("inf")
        trainer.log_metrics("eval", eval_metrics)
        trainer.save_metrics("eval", eval_metrics)
    if trainer.is_world_process_zero():
        sps = metrics["train_samples_per_second"]
        tflops = sps * 6 * params * args.seq_len / world / 1e12
        summary = {"model": args.model, "params": params, "seq_len": args.seq_len, "ranks": world,
                   "precision": precision, "synthetic": synthetic, "dataset": args.dataset,
                   "fallback": fallback or None,
                   "train_samples_per_second": sps, "tflops_per_gpu": tflops,
                   "train_runtime": metrics["train_runtime"], "train_loss": metrics.get("train_loss"),
                   "eval_loss": eval_metrics.get("eval_loss"), "perplexity": eval_metrics.get("perplexity")}
        with open(os.path.join(args.output_dir, "hpcai_summary.json"), "w") as fh:
            json.dump(summary, fh, indent=1)
        print("hf-clm: %ssamples/s=%.3f tflops_per_gpu=%.4f (= samples/s x 6 x %d params x %d tokens / %d)"
              % ("SYNTHETIC " if synthetic else "", sps, tflops, params, args.seq_len, world), flush=True)
    if torch.distributed.is_initialized():
        # Leave together: a rank whose interpreter exits while the process group's threads still
        # talk to the others dies in C++ ("terminate called without an active exception").
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        # Still seen once in a CI run of 4 ranks over 2 nodes: one rank's interpreter teardown
        # aborting in gloo's C++ destructors after every result was written. Skip the teardown:
        # everything is written and closed, so leave with the run's own status.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
