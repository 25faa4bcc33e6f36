"""Megatron GPT pre-training in the shape of CARAML's LLM benchmark, on Megatron Core.

CARAML runs Megatron-LM's pretrain_gpt.py (GPT-2 BPE vocabulary, sequence 2048, Adam, RoPE) at
three sizes and reports tokens/s = global batch x sequence length / seconds per iteration and
its patch's TFLOP/s per GPU. This script builds the same GPT with Megatron Core's GPTModel,
splits it with Megatron's tensor, pipeline and data parallel groups and runs Megatron's own
forward/backward schedules, so one code path serves a laptop CPU (gloo, tiny size) and a GPU
cluster (NCCL, CARAML's sizes). Data are random tokens of the vocabulary's size: every line
says SYNTHETIC (CARAML trains on a 790-sample OSCAR subset; throughput does not depend on the
token values). Log lines follow Megatron's and CARAML's patch:

    iteration       10/      50 | consumed samples: 5120 | elapsed time per iteration (s): 1.2345 | TFLOPs: 123.45 | …

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

import torch
import torch.distributed as dist

# CARAML's llm_benchmark_nvidia_amd.yaml (2025.01): layers, hidden, heads, ffn (None: 4 x hidden),
# micro batch, tensor and pipeline parallel sizes, gradient accumulation steps for the global
# batch (800M: a fixed global batch of 512 instead), precision. "tiny" is ours, for CPUs and CI.
SIZES = {
    "800M": dict(layers=16, hidden=2048, heads=8, ffn=None, micro=4, tp=1, pp=1, gas=None, gbs=512, precision="fp16"),
    "13B": dict(layers=40, hidden=5120, heads=32, ffn=20480, micro=2, tp=2, pp=2, gas=64, gbs=None, precision="fp16"),
    "175B": dict(layers=96, hidden=12288, heads=96, ffn=None, micro=2, tp=8, pp=8, gas=64, gbs=None, precision="bf16"),
    "tiny": dict(layers=2, hidden=64, heads=4, ffn=None, micro=2, tp=1, pp=1, gas=1, gbs=None, precision="fp32"),
}
GPT2_VOCAB = 50257  # GPT2BPETokenizer; Megatron pads to a multiple of 128 x tensor parallel size


def padded_vocab(vocab, tp, divisible_by=128):
    multiple = divisible_by * tp
    return int(math.ceil(vocab / multiple) * multiple)


def caraml_flops_per_iteration(gbs, seq, layers, hidden, vocab, recompute):
    """CARAML's patch (add_tflops_logging): 24·caf·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)), caf 4
    with activation recomputation, else 3. Kept as theirs so the TFLOP/s compare with CARAML's."""
    caf = 4 if recompute else 3
    return 24 * caf * gbs * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def resolve(args, world):
    """The run's sizes: CARAML's for the model size, each overridable; checks that they divide."""
    size = dict(SIZES[args.model_size])
    for key in ("layers", "hidden", "heads", "tp", "pp", "micro", "gbs"):
        given = getattr(args, key)
        if given:
            size[key] = given
    size["ffn"] = size["ffn"] or 4 * size["hidden"]
    if args.precision != "auto":
        size["precision"] = args.precision
    tp, pp = size["tp"], size["pp"]
    if world % (tp * pp):
        raise SystemExit("megatron-gpt: %d ranks do not divide into tp=%d x pp=%d" % (world, tp, pp))
    dp = world // (tp * pp)
    if not size["gbs"]:
        size["gbs"] = dp * size["micro"] * (size["gas"] or 1)
    if size["gbs"] % (dp * size["micro"]):
        raise SystemExit("megatron-gpt: global batch %d is not a multiple of dp=%d x micro batch %d"
                         % (size["gbs"], dp, size["micro"]))
    if size["hidden"] % size["heads"] or size["heads"] % tp:
        raise SystemExit("megatron-gpt: hidden %d / heads %d / tp %d do not divide"
                         % (size["hidden"], size["heads"], tp))
    if size["layers"] % pp:
        raise SystemExit("megatron-gpt: %d layers do not split into %d pipeline stages" % (size["layers"], pp))
    size.update(dp=dp, microbatches=size["gbs"] // (dp * size["micro"]), seq=args.seq_len,
                vocab=padded_vocab(GPT2_VOCAB, tp))
    return size


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


def batches(size, device, seed):
    """Random token micro-batches (the same on each tensor-parallel rank of a data-parallel rank)."""
    gen = torch.Generator().manual_seed(seed)
    seq, micro = size["seq"], size["micro"]
    position = torch.arange(seq).unsqueeze(0).expand(micro, -1).to(device)
    mask = (torch.tril(torch.ones(1, 1, seq, seq)) < 0.5).to(device)
    while True:
        tokens = torch.randint(0, GPT2_VOCAB, (micro, seq + 1), generator=gen).to(device)
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-size", default="800M", choices=sorted(SIZES))
    ap.add_argument("--layers", type=int, default=0, help="0: the model size's")
    ap.add_argument("--hidden", type=int, default=0)
    ap.add_argument("--heads", type=int, default=0)
    ap.add_argument("--tp", type=int, default=0, help="tensor parallel size (0: CARAML's)")
    ap.add_argument("--pp", type=int, default=0, help="pipeline parallel size (0: CARAML's)")
    ap.add_argument("--micro", type=int, default=0, help="micro batch size (0: CARAML's)")
    ap.add_argument("--gbs", type=int, default=0, help="global batch size (0: CARAML's)")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--log-interval", type=int, default=5)
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "fp16", "bf16"])
    ap.add_argument("--attention", default="local", choices=["local", "te"],
                    help="te: Transformer Engine layers (NGC images); local: Megatron Core's own")
    ap.add_argument("--output-dir", default=os.environ.get("HPCAI_PAYLOAD_OUT", "."))
    args = ap.parse_args(argv)

    gpu = torch.cuda.is_available()
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
    size = resolve(args, world)
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
    data = batches(size, device, seed=1000 + parallel_state.get_data_parallel_rank())
    params = sum(p.numel() for p in model.parameters())
    recompute = config.recompute_granularity is not None
    flops = caraml_flops_per_iteration(size["gbs"], size["seq"], size["layers"], size["hidden"],
                                       size["vocab"], recompute)
    if rank == 0:
        print("megatron-gpt: model=%s layers=%d hidden=%d heads=%d ffn=%d seq-length=%d vocab=%d "
              "tp=%d pp=%d dp=%d micro-batch=%d global-batch-size=%d microbatches=%d precision=%s "
              "attention=%s device=%s data=SYNTHETIC (random tokens; CARAML uses an OSCAR subset)"
              % (args.model_size, size["layers"], size["hidden"], size["heads"], size["ffn"], size["seq"],
                 size["vocab"], size["tp"], size["pp"], size["dp"], size["micro"], size["gbs"],
                 size["microbatches"], size["precision"], args.attention, "cuda" if gpu else "cpu"),
              flush=True)
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
    for iteration in range(1, args.iters + 1):
        opt.zero_grad(set_to_none=True)
        out = forward_backward(forward_step_func=forward_step, data_iterator=data, model=model,
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
        if iteration % args.log_interval == 0 or iteration == args.iters:
            if gpu:
                torch.cuda.synchronize()
            done = iteration % args.log_interval or args.log_interval
            per_iter = (time.time() - interval_start) / done
            # The loss lives on the last pipeline stage: it reports, as Megatron's log does.
            report = torch.tensor([sum(losses[-done:]) / max(1, len(losses[-done:])), nan_iterations],
                                  dtype=torch.float64)
            dist.broadcast(report, src=world - 1)
            intervals.append(per_iter)
            if rank == 0:
                print(" iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (s): %.6f"
                      " | TFLOPs: %.4f | global batch size: %5d | lm loss: %.6E | number of nan iterations: %3d |"
                      % (iteration, args.iters, iteration * size["gbs"], per_iter,
                         flops / (per_iter * world * 1e12), size["gbs"], report[0].item(), int(report[1].item())),
                      flush=True)
            interval_start = time.time()
    if rank == 0:
        # The first logged interval holds the warm-up (allocation, first kernels): left out, as
        # the host's Megatron parser does. CARAML averages every interval; see docs/workflows.md.
        steady = intervals[1:] or intervals
        per_iter = sum(steady) / len(steady)
        summary = {"model_size": args.model_size, "synthetic": True, **size, "iterations": args.iters,
                   "parameters_rank0": params, "flops_per_iteration": flops, "time_per_iteration": per_iter,
                   "tokens_per_second": size["gbs"] * size["seq"] / per_iter,
                   "tflops_per_gpu": flops / (per_iter * world * 1e12), "nan_iterations": int(report[1].item())}
        print("megatron-gpt: SYNTHETIC tokens/s=%.1f tflops_per_gpu=%.4f time_per_iteration=%.4f s "
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
