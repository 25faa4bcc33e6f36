"""Hugging Face Transformers causal-LM training in the shape of the WikiText-2 GPT-2 benchmark.

Offline by default: the model is built from its configuration (random weights) and trained on
synthetic token data of the benchmark's shape, and everything it prints says so (`SYNTHETIC`).
`--dataset wikitext-2-raw-v1 --pretrained` runs the real benchmark where the hub is reachable.
The Llama-2-7B variant uses a DeepSpeed ZeRO config; a hub token is read from the environment at
run time (HF_TOKEN), never baked. The HF Trainer prints its usual `***** train metrics *****`
block and writes output_dir/train_results.json; this script adds
TFLOP/s per device = samples/s x 6 x parameters x sequence length / devices.
"""

import argparse
import json
import os

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


def build_model(name, pretrained):
    import transformers
    cls_name, hub_id, kwargs = CONFIGS[name]
    if pretrained:
        if not hub_id:
            raise SystemExit("hf-clm: model %s has no pretrained weights" % name)
        return transformers.AutoModelForCausalLM.from_pretrained(hub_id, token=os.environ.get("HF_TOKEN"))
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


def wikitext(name, seq_len, hub_id):
    """The real WikiText-2 train split, tokenized and grouped into blocks like run_clm.py."""
    import datasets
    import transformers
    tok = transformers.AutoTokenizer.from_pretrained(hub_id, token=os.environ.get("HF_TOKEN"))
    raw = datasets.load_dataset("wikitext", name, split="train")
    ids = tok("\n\n".join(raw["text"]))["input_ids"]
    blocks = [ids[i:i + seq_len] for i in range(0, len(ids) - seq_len + 1, seq_len)]
    data = torch.tensor(blocks)
    ds = SyntheticTokens(1, 1, 1)
    ds.data = data
    return ds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2", choices=sorted(CONFIGS))
    ap.add_argument("--dataset", default="synthetic", choices=["synthetic", "wikitext-2-raw-v1"])
    ap.add_argument("--pretrained", default="false", choices=["true", "false"],
                    help="load hub weights (needs network, HF_TOKEN for gated models)")
    ap.add_argument("--batch-size", type=int, default=8, help="per device")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=50)
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
    synthetic = args.dataset == "synthetic"
    if world > 1 and not args.deepspeed and not torch.distributed.is_initialized():
        # Initialise from the entrypoint's RANK/WORLD_SIZE/MASTER_ADDR ourselves: accelerate only
        # does it on CPUs for launchers it recognises.
        torch.distributed.init_process_group("nccl" if gpu else "gloo", init_method="env://")
        if gpu:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    model = build_model(args.model, args.pretrained)
    params = sum(p.numel() for p in model.parameters())
    if synthetic:
        vocab = model.config.vocab_size
        samples = args.samples or args.batch_size * world * args.steps
        train = SyntheticTokens(samples, args.seq_len, vocab)
    else:
        train = wikitext(args.dataset, args.seq_len, CONFIGS[args.model][1])
    if rank == 0:
        print("hf-clm: model=%s params=%d seq_len=%d batch_size=%d ranks=%d precision=%s data=%s%s"
              % (args.model, params, args.seq_len, args.batch_size, world, precision, args.dataset,
                 " SYNTHETIC (random weights, random tokens; not comparable to a real fine-tune loss)"
                 if synthetic else ""), flush=True)
    targs = transformers.TrainingArguments(
        output_dir=args.output_dir, per_device_train_batch_size=args.batch_size,
        max_steps=args.steps, logging_steps=max(1, args.steps // 5), save_strategy="no",
        report_to=[], bf16=precision == "bf16", fp16=precision == "fp16", use_cpu=not gpu,
        deepspeed=args.deepspeed or None, dataloader_drop_last=True, disable_tqdm=True,
        seed=0, ddp_backend=("nccl" if gpu else "gloo") if world > 1 else None,
    )
    trainer = transformers.Trainer(model=model, args=targs, train_dataset=train)
    # Transformers 5 prints its log dicts with values formatted as strings, which log parsers
    # cannot read as numbers: print step losses and the final dict ourselves, as numbers.
    trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
    trainer.remove_callback(transformers.trainer_callback.ProgressCallback)
    trainer.add_callback(step_logger(transformers))
    result = trainer.train()
    metrics = dict(result.metrics)
    metrics["train_samples"] = len(train)
    if trainer.is_world_process_zero():
        print({k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}, flush=True)
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    if trainer.is_world_process_zero():
        sps = metrics["train_samples_per_second"]
        tflops = sps * 6 * params * args.seq_len / world / 1e12
        summary = {"model": args.model, "params": params, "seq_len": args.seq_len, "ranks": world,
                   "precision": precision, "synthetic": synthetic, "dataset": args.dataset,
                   "train_samples_per_second": sps, "tflops_per_gpu": tflops,
                   "train_runtime": metrics["train_runtime"], "train_loss": metrics.get("train_loss")}
        with open(os.path.join(args.output_dir, "hpcai_summary.json"), "w") as fh:
            json.dump(summary, fh, indent=1)
        print("hf-clm: %ssamples/s=%.3f tflops_per_gpu=%.4f (= samples/s x 6 x %d params x %d tokens / %d)"
              % ("SYNTHETIC " if synthetic else "", sps, tflops, params, args.seq_len, world), flush=True)
    if torch.distributed.is_initialized():
        # Leave together: a rank whose interpreter exits while the process group's threads still
        # talk to the others dies in C++ ("terminate called without an active exception").
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
