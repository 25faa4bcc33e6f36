"""Megatron GPT pre-training as CARAML's LLM benchmark: CARAML's own code, or Megatron Core.

--implementation megatron-lm runs CARAML's own path (megatron_lm.py: Megatron-LM f7727433 with
CARAML's patch, pretrain_gpt.py with CARAML's arguments; CUDA images with a GPU); core, the rest of
this file, is the stand-in every image runs; auto picks megatron-lm where it can run. --text FILE
is tokenized first by Megatron-LM's preprocess_data.py with CARAML's GPT-2 files (CUDA images);
--data-prefix names a tokenized set. The shape line says which implementation and data ran.

CARAML runs Megatron-LM's pretrain_gpt.py (GPT-2 BPE vocabulary, sequence 2048, Adam, RoPE) at
three sizes and reports tokens/s = global batch x sequence length / seconds per iteration and
its patch's TFLOP/s per GPU. The stand-in builds the same GPT with Megatron Core's GPTModel,
splits it with Megatron's tensor, pipeline and data parallel groups and runs Megatron's own
forward/backward schedules, so one code path serves a laptop CPU (gloo, tiny size) and a GPU
cluster (NCCL, CARAML's sizes; gpt_layout.py reads them from payload.toml). Without a data set
it trains on random tokens of the vocabulary's size and says SYNTHETIC (CARAML trains on a
790-sample OSCAR subset; throughput does not depend on the token values). Log lines follow Megatron's and CARAML's
patch (aux/nvidia_energy_llm_fix.patch):

    iteration       10/      50 | consumed samples: 5120 | elapsed time per iteration (s): 1.2345 | TFLOPs: 123.45 | …

Training stops after --iters iterations or, as Megatron's --exit-duration-in-mins, once
--exit-duration minutes have passed since the start (checked after every iteration, every rank
agreeing), whichever comes first; --iters 0 leaves only the wall time (and CARAML's
--train-samples 300,000,000). Inside a Slurm job whose end time is known, it also stops 120 s
before it, where CARAML's job script catches its `--signal=B:12@120` and stops.

    python megatron_gpt.py --model-size 800M --iters 50      (under srun/torchrun: WORLD_SIZE ranks)
"""

import argparse
import contextlib
import functools
import json
import math
import os
import socket
import sys
import time

START = time.time()  # Megatron's _TRAIN_START_TIME: the wall time counts from the process start

import torch
import torch.distributed as dist

import gpt_layout
import megatron_lm

GPT2_VOCAB = gpt_layout.GPT2_VOCAB
SIGNAL_LEAD = 120  # CARAML's `#SBATCH --signal=B:12@120`: its job stops this many seconds before the limit


def caraml_flops_per_iteration(gbs, seq, layers, hidden, vocab, recompute):
    """CARAML's patch (nvidia_energy_llm_fix.patch): 24·caf·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)), caf 4
    with activation recomputation, else 3. Kept as theirs so the TFLOP/s compare with CARAML's."""
    caf = 4 if recompute else 3
    return 24 * caf * gbs * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def resolve(args, world):
    """The run's sizes (gpt_layout: CARAML's row for the model size, each overridable), under the
    short names this script uses; a layout that does not divide ends the run with its reason."""
    given = {key: getattr(args, key) for key in gpt_layout.KEYS}
    try:
        lay = gpt_layout.layout(args.model_size, given, world)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    return gpt_layout.short_names(lay, args.seq_len)


def deadline(exit_minutes, env=os.environ):
    """When training must stop (a time.time() value; None: never): START + --exit-duration, and
    SIGNAL_LEAD seconds before the Slurm job's end (SLURM_JOB_END_TIME, where Slurm gives it)."""
    ends = [START + 60 * exit_minutes] if exit_minutes > 0 else []
    job_end = env.get("SLURM_JOB_END_TIME", "")
    if job_end.isdigit() and int(job_end) > 0:
        ends.append(int(job_end) - SIGNAL_LEAD)
    return min(ends) if ends else None


def out_of_time(stop, device):
    """Megatron's exit-duration check after each iteration: every rank says whether its clock is
    past the deadline, and all stop when any is (all-reduce MAX), so no rank waits on another."""
    if stop is None:
        return False
    done = torch.tensor([int(time.time() > stop)], dtype=torch.int32, device=device)
    dist.all_reduce(done, op=dist.ReduceOp.MAX)
    return bool(done.item())


def cpu_shims():
    """Megatron Core assumes CUDA in two places that the CPU path reaches: its attention scratch
    buffer is allocated on torch.cuda.current_device(), and dropout runs under the CUDA RNG
    tracker. On a CPU-only torch both are pointed at the CPU so CI runs the same model code."""
    from megatron.core import tensor_parallel
    torch.cuda.current_device = lambda: "cpu"
    tensor_parallel.random.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()


def build(size, gpu, attention):
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import (get_gpt_layer_local_spec,
                                                          get_gpt_layer_with_transformer_engine_spec)
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[size["precision"]]
    config = TransformerConfig(
        num_layers=size["layers"], hidden_size=size["hidden"], num_attention_heads=size["heads"],
        ffn_hidden_size=size["ffn"], tensor_model_parallel_size=size["tp"],
        pipeline_model_parallel_size=size["pp"],
        # CARAML passes --sequence-parallel; Megatron Core's local layers (torch LayerNorm) cannot.
        sequence_parallel=size["tp"] > 1 and attention == "te",
        pipeline_dtype=dtype if gpu else torch.float32, params_dtype=torch.float32,
        # Parameters stay fp32 and the step runs under autocast (with a loss scaler for fp16):
        # Megatron-LM keeps fp32 master weights too, through its own Float16Module.
        enable_autocast=dtype != torch.float32 and gpu, autocast_dtype=dtype,
        init_method_std=0.0048, use_cpu_initialization=not gpu, perform_initialization=True,
        recompute_granularity="selective" if gpu else None,
        bias_dropout_fusion=False, apply_rope_fusion=False, masked_softmax_fusion=False,
        gradient_accumulation_fusion=False,
    )
    spec = get_gpt_layer_with_transformer_engine_spec() if attention == "te" else get_gpt_layer_local_spec()
    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=size["vocab"],
                     max_sequence_length=size["seq"], position_embedding_type="rope",
                     pre_process=parallel_state.is_pipeline_first_stage(),
                     post_process=parallel_state.is_pipeline_last_stage())
    return model.cuda() if gpu else model, config


def token_stream(data_prefix, start):
    """The tokens of Megatron's indexed data set at DATA_PREFIX (.bin/.idx, as preprocess_data.py
    writes them), document after document from document START, round and round."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    docs = IndexedDataset(data_prefix)
    if not len(docs):
        raise SystemExit("megatron-gpt: the data set %s holds no document" % data_prefix)
    i = start % len(docs)
    while True:
        yield from docs[i].tolist()
        i = (i + 1) % len(docs)


def batches(size, device, seed, data_prefix=None):
    """Micro-batches of seq + 1 tokens (the same on each tensor-parallel rank of a data-parallel
    rank): consecutive windows of the data set, each data-parallel rank from its own document;
    random tokens without one."""
    gen = torch.Generator().manual_seed(seed)
    seq, micro = size["seq"], size["micro"]
    position = torch.arange(seq).unsqueeze(0).expand(micro, -1).to(device)
    mask = (torch.tril(torch.ones(1, 1, seq, seq)) < 0.5).to(device)
    stream = token_stream(data_prefix, seed) if data_prefix else None
    while True:
        if stream is None:
            tokens = torch.randint(0, GPT2_VOCAB, (micro, seq + 1), generator=gen)
        else:
            tokens = torch.tensor([next(stream) for _ in range(micro * (seq + 1))]).view(micro, seq + 1)
        tokens = tokens.to(device)
        yield tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous(), position, mask


def allreduce_grads(model, group):
    """Data-parallel gradient averaging, one flat buffer per dtype (Megatron buckets likewise)."""
    if dist.get_world_size(group) == 1:
        return
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    for dtype in {g.dtype for g in grads}:
        same = [g for g in grads if g.dtype == dtype]
        flat = torch._utils._flatten_dense_tensors(same)
        dist.all_reduce(flat, group=group)
        flat /= dist.get_world_size(group)
        for g, synced in zip(same, torch._utils._unflatten_dense_tensors(flat, same)):
            g.copy_(synced)


def accumulate(forward_step_func, data_iterator, model, num_microbatches, config, device_type, **_):
    """Megatron's no-pipelining schedule, written out: forward and backward of each micro-batch,
    the loss divided by their number. Megatron's own (forward_backward_no_pipelining) keeps its
    token counter on CUDA, so CPUs could not run it; with pp=1 both do the same arithmetic."""
    out = []
    for _ in range(num_microbatches):
        with torch.autocast(device_type, dtype=config.autocast_dtype, enabled=bool(config.enable_autocast)):
            output, loss_func = forward_step_func(data_iterator, model)
            loss, reported = loss_func(output)
        loss = loss / num_microbatches
        (config.grad_scale_func(loss) if config.grad_scale_func else loss).backward()
        out.append(reported)
    return out


def prepare_data(args, implementation, prefix, rank):
    """(data prefix or None, how the shape line names the data): --data-prefix as it is; --text
    tokenized now by Megatron-LM's preprocess_data.py (each rank into its own folder); without
    either, random tokens for Megatron Core and, for Megatron-LM (which reads a data set), a
    stand-in corpus: the Markdown of its own tree."""
    if args.data_prefix:
        missing = [args.data_prefix + ext for ext in (".bin", ".idx") if not os.path.isfile(args.data_prefix + ext)]
        if missing:
            print("megatron-gpt: data_prefix=%s: no %s (a tokenized set is PREFIX.bin and PREFIX.idx)"
                  % (args.data_prefix, " and no ".join(missing)), file=sys.stderr)
            raise SystemExit(2)
        return args.data_prefix, args.data_prefix
    text, label = args.text, args.text
    if not text and implementation == "megatron-lm":
        work = os.path.join(args.output_dir, "data-rank%d" % rank)
        os.makedirs(work, exist_ok=True)
        text = megatron_lm.stand_in_text(megatron_lm.tree(prefix)["megatron"], os.path.join(work, "stand-in.txt"))
        label = "STAND-IN (Megatron-LM's own Markdown; CARAML uses an OSCAR subset)"
    if not text:
        return None, "SYNTHETIC (random tokens; CARAML uses an OSCAR subset)"
    if not megatron_lm.baked(prefix):
        print("megatron-gpt: text=%s needs Megatron-LM's tools/preprocess_data.py, baked into CUDA images only; "
              "give data_prefix= a tokenized data set instead" % args.text, file=sys.stderr)
        raise SystemExit(2)
    if not os.path.isfile(text):
        print("megatron-gpt: text=%s is not a file" % text, file=sys.stderr)
        raise SystemExit(2)
    made = megatron_lm.prepare(text, os.path.join(args.output_dir, "data-rank%d" % rank), prefix)
    return made, "%s (tokenized by Megatron-LM's preprocess_data.py, CARAML's GPT-2 files: %s)" % (label, made)


def shape_line(args, size, device, implementation, data):
    """The run's resolved shape, once, on rank 0 (the host parser reads it)."""
    return ("megatron-gpt: model=%s layers=%d hidden=%d heads=%d ffn=%d seq-length=%d vocab=%d "
            "tp=%d pp=%d dp=%d micro-batch=%d global-batch-size=%d microbatches=%d precision=%s "
            "attention=%s device=%s iters=%d exit-duration=%g min implementation=%s data=%s"
            % (args.model_size, size["layers"], size["hidden"], size["heads"], size["ffn"], size["seq"],
               size["vocab"], size["tp"], size["pp"], size["dp"], size["micro"], size["gbs"],
               size["microbatches"], size["precision"], args.attention, device, args.iters,
               args.exit_duration, implementation, data))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-size", default="800M", choices=["800M", "13B", "175B", "tiny"])
    ap.add_argument("--num-layers", type=int, default=0, help="0: the model size's")
    ap.add_argument("--hidden-size", type=int, default=0)
    ap.add_argument("--num-attention-heads", type=int, default=0)
    ap.add_argument("--ffn-hidden-size", type=int, default=0, help="0: the size's, else 4 x hidden")
    ap.add_argument("--tp", type=int, default=0, help="tensor parallel size (0: CARAML's)")
    ap.add_argument("--pp", type=int, default=0, help="pipeline parallel size (0: CARAML's)")
    ap.add_argument("--micro-batch-size", type=int, default=0, help="micro batch size (0: CARAML's)")
    ap.add_argument("--global-batch-size", type=int, default=0, help="0: the size's, else dp x micro x grad accum")
    ap.add_argument("--grad-accum", type=int, default=0, help="0: the size's (CARAML's gas)")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--iters", type=int, default=50, help="0: no count, only --exit-duration")
    ap.add_argument("--exit-duration", type=float, default=0.0, help="minutes (Megatron's --exit-duration-in-mins)")
    ap.add_argument("--log-interval", type=int, default=5)
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "fp16", "bf16"])
    ap.add_argument("--attention", default="local", choices=["local", "te"],
                    help="te: Transformer Engine layers (NGC images); local: Megatron Core's own")
    ap.add_argument("--output-dir", default=os.environ.get("HPCAI_PAYLOAD_OUT", "."))
    ap.add_argument("--implementation", default="auto", choices=["auto", "megatron-lm", "core"],
                    help="megatron-lm: CARAML's own (Megatron-LM f7727433, GPUs); core: Megatron Core; auto: "
                         "megatron-lm where it can run")
    ap.add_argument("--text", default="", help="a text file (one document per line, or JSON lines) "
                    "tokenized at run time by Megatron's preprocess_data.py with CARAML's GPT-2 files")
    ap.add_argument("--data-prefix", default="", help="a tokenized data set's prefix (.bin/.idx), e.g. CARAML's OSCAR")
    ap.add_argument("--accelerator", default="",
                    help="CARAML's ACCELERATOR (H100, GH200 …): its patch's power file names")
    args = ap.parse_args(argv)
    if args.iters < 0 or args.exit_duration < 0 or not (args.iters or args.exit_duration):
        raise SystemExit("megatron-gpt: give --iters N, --exit-duration MINUTES or both (the first reached "
                         "stops), not %d and %g" % (args.iters, args.exit_duration))

    gpu = torch.cuda.is_available()
    prefix = os.environ.get("HPCAI_PREFIX", "/opt/hpcai")
    why_not = megatron_lm.unavailable(prefix, gpu)
    if args.implementation == "megatron-lm" and why_not:
        print("megatron-gpt: implementation=megatron-lm is not possible: %s; valid here: core, auto" % why_not,
              file=sys.stderr)
        return 2
    implementation = "core" if why_not or args.implementation == "core" else "megatron-lm"
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    data_prefix, data = prepare_data(args, implementation, prefix, rank)
    if implementation == "megatron-lm":
        size = resolve(args, world)
        size["ffn_explicit"] = bool(args.ffn_hidden_size or gpt_layout.size_row(args.model_size)["ffn_hidden_size"])
        if rank == 0:
            print(shape_line(args, size, "cuda", "megatron-lm", data), flush=True)
        return megatron_lm.run(size, args.model_size, data_prefix, args.output_dir, prefix, args.exit_duration,
                               args.log_interval, args.iters, args.accelerator or os.environ.get("ACCELERATOR", "GPU"),
                               rank, world)
    if rank == 0 and args.implementation == "auto":
        print("megatron-gpt: implementation=core (%s)" % why_not, flush=True)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if gpu:
        torch.cuda.set_device(local_rank)
    if "RANK" not in os.environ:  # started on its own (docker run, apptainer run): one rank
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("nccl" if gpu else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    global START  # as Megatron: the earliest rank's start
    first = torch.tensor([START], dtype=torch.float64, device="cuda" if gpu else "cpu")
    dist.all_reduce(first, op=dist.ReduceOp.MIN)
    START = first.item()
    size = resolve(args, world)
    stop = deadline(args.exit_duration)
    if not gpu:
        if size["pp"] > 1:
            raise SystemExit("megatron-gpt: pipeline parallelism (pp=%d) needs GPUs: Megatron's "
                             "pipeline schedules allocate on CUDA" % size["pp"])
        size["precision"] = "fp32"  # no fp16/bf16 autocast path worth timing on a CPU
        cpu_shims()
    from megatron.core import parallel_state, tensor_parallel
    from megatron.core.pipeline_parallel import get_forward_backward_func

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=size["tp"],
                                             pipeline_model_parallel_size=size["pp"])
    torch.manual_seed(42)
    if gpu:
        tensor_parallel.model_parallel_cuda_manual_seed(42)
    model, config = build(size, gpu, args.attention)
    scaler = torch.amp.GradScaler("cuda") if gpu and size["precision"] == "fp16" else None
    if scaler:
        config.grad_scale_func = scaler.scale
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
    batch_iter = batches(size, device, seed=1000 + parallel_state.get_data_parallel_rank(), data_prefix=data_prefix)
    params = sum(p.numel() for p in model.parameters())
    recompute = config.recompute_granularity is not None
    flops = caraml_flops_per_iteration(size["gbs"], size["seq"], size["layers"], size["hidden"],
                                       size["vocab"], recompute)
    if rank == 0:
        print(shape_line(args, size, "cuda" if gpu else "cpu", "core", data), flush=True)
        print("megatron-gpt: parameters on rank 0: %d" % params, flush=True)

    def forward_step(data_iterator, model):
        tokens, labels, position, mask = next(data_iterator)
        output = model(tokens, position, mask, labels=labels)

        def loss_func(output_tensor):
            loss = output_tensor.float().mean()
            return loss, {"lm loss": loss.detach()}
        return output, loss_func

    if size["pp"] > 1:
        forward_backward = get_forward_backward_func()
    else:
        forward_backward = functools.partial(accumulate, config=config, device_type=device.type)
    nan_iterations, interval_start, losses, intervals = 0, time.time(), [], []
    last_stage = parallel_state.is_pipeline_last_stage()
    total = args.iters or megatron_lm.TRAIN_SAMPLES // size["gbs"]  # the count shown when --iters is 0
    iteration = 0
    while iteration < total:
        iteration += 1
        opt.zero_grad(set_to_none=True)
        out = forward_backward(forward_step_func=forward_step, data_iterator=batch_iter, model=model,
                               num_microbatches=size["microbatches"], seq_length=size["seq"],
                               micro_batch_size=size["micro"], forward_only=False)
        allreduce_grads(model, parallel_state.get_data_parallel_group())
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        if last_stage and out:
            loss = sum(float(o["lm loss"]) for o in out) / len(out)
            nan_iterations += int(not math.isfinite(loss))
            losses.append(loss)
        timed_out = out_of_time(stop, device)
        # Megatron logs every log_interval iterations and drops the part after the last when the
        # time is up; a run stopped before its first full interval logs that part, to have one.
        if iteration % args.log_interval == 0 or iteration == total or (timed_out and not intervals):
            if gpu:
                torch.cuda.synchronize()
            done = iteration % args.log_interval or args.log_interval
            per_iter = (time.time() - interval_start) / done
            # The loss lives on the last pipeline stage: it reports, as Megatron's log does.
            # On the ranks' device: NCCL (GPUs) broadcasts no CPU tensor, gloo (CPUs) takes either.
            report = torch.tensor([sum(losses[-done:]) / max(1, len(losses[-done:])), nan_iterations],
                                  dtype=torch.float64, device=device)
            dist.broadcast(report, src=world - 1)
            intervals.append(per_iter)
            if rank == 0:
                print(" iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (s): %.6f"
                      " | TFLOPs: %.4f | global batch size: %5d | lm loss: %.6E | number of nan iterations: %3d |"
                      % (iteration, total, iteration * size["gbs"], per_iter,
                         flops / (per_iter * world * 1e12), size["gbs"], report[0].item(), int(report[1].item())),
                      flush=True)
            interval_start = time.time()
        if timed_out:
            if rank == 0:
                print("megatron-gpt: exiting program after %.2f minutes (exit duration %g min%s) at iteration %d"
                      % ((time.time() - START) / 60, args.exit_duration,
                         ", or %d s before the job's end" % SIGNAL_LEAD if os.environ.get("SLURM_JOB_END_TIME") else "",
                         iteration), flush=True)
            break
    if rank == 0:
        # The first logged interval holds the warm-up (allocation, first kernels): left out, as
        # the host's Megatron parser does. CARAML averages every interval; see docs/workflows.md.
        steady = intervals[1:] or intervals
        per_iter = sum(steady) / len(steady)
        summary = {"model_size": args.model_size, "implementation": "core", "synthetic": data_prefix is None,
                   **size, "iterations": iteration,
                   "exit_duration": args.exit_duration,
                   "parameters_rank0": params, "flops_per_iteration": flops, "time_per_iteration": per_iter,
                   "tokens_per_second": size["gbs"] * size["seq"] / per_iter,
                   "tflops_per_gpu": flops / (per_iter * world * 1e12), "nan_iterations": int(report[1].item())}
        print("megatron-gpt: tokens/s=%.1f tflops_per_gpu=%.4f time_per_iteration=%.4f s "
              "(= %d x %d tokens / s per iteration, %d logged intervals after the first)"
              % (summary["tokens_per_second"], summary["tflops_per_gpu"], per_iter, size["gbs"], size["seq"],
                 len(steady)), flush=True)
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "megatron-gpt.json"), "w") as fh:
            json.dump(summary, fh, indent=1)
    dist.barrier()
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
    # Skip the interpreter's teardown, where gloo's C++ threads can abort a rank after every
    # result was written (seen in CI for ddp-bench and hf-clm).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
