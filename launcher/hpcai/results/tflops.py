"""LLM figures that need run facts the log may not print, recorded with the formula named.

HF causal LM (what HPC centres use for fine-tuning runs):
    TFLOP/s per GPU = samples/s × 6 × N_params × seq_len / GPUs / 1e12
Megatron prints its own per-GPU figure (`throughput per GPU (TFLOP/s/GPU)`), kept as is; its
tokens/s = global batch × seq_len / seconds per iteration, with seq_len from the log or the run's
variables (`seq_len`, as CARAML sets it), global batch from the log or `global_batch_size`.
"""

from __future__ import annotations

import math
from typing import Any

from hpcai.results.metrics import HIGHER, Metric, ParseResult

FORMULA_6ND = "samples_per_second * 6 * n_params * seq_len / gpus / 1e12"
FORMULA_TOKENS = "global_batch * seq_len / time_per_iteration"

# Parameter counts of models our payloads use by default (when the log does not print them).
KNOWN_PARAMS = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "meta-llama/Llama-2-7b-hf": 6_738_415_616,
}


# The run facts these figures compute with, each a quantity that must be positive, and its kind: the
# one rule for them (hpcai.payload_rules.check_number with above=0), for `results parse --var/--gpus`;
# in a record, a fact that is not positive counts as unknown (the figure is not computed, and said so).
POSITIVE: dict[str, type] = {"n_params": float, "seq_len": int, "block_size": int, "seq_length": int,
                             "global_batch_size": int, "micro_batch_size": int, "gpus": int}


def check_fact(what: str, name: str, text: str) -> float:
    """TEXT for the run fact NAME (a key of POSITIVE) as a number of its kind, more than 0, else a
    UsageError naming WHAT (the option)."""
    from hpcai.payload_rules import check_number

    return check_number(what, text, POSITIVE[name], above=0)


def causal_lm_tflops(samples_per_s: float, n_params: float, seq_len: int, gpus: int) -> float:
    """6·N·D per GPU in TFLOP/s (D = tokens per second = samples/s × seq_len)."""
    return samples_per_s * 6.0 * n_params * seq_len / max(gpus, 1) / 1e12


def _num(value: Any) -> float | None:
    """VALUE as a finite number > 0, else None (unknown): a plan's "inf" or "nan" must not reach
    int(), and a count, length or size of 0 or less is no fact (POSITIVE)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def add_to_result(result: ParseResult, plan: dict[str, Any]) -> None:
    """Add `tflops_per_gpu` to an HF result, `tokens_per_second` to a Megatron one, when the facts
    they need are known (plan: `payload_vars`, `nodes`, `gpus_per_node`, `ntasks_per_node`)."""
    if result.parser == "megatron":
        add_megatron_tokens(result, plan.get("payload_vars") or {})
        return
    if result.parser != "hf-trainer" or result.get("tflops_per_gpu"):
        return
    sps = result.get("train_samples_per_second")
    if sps is None:
        return
    pvars = plan.get("payload_vars") or {}
    n_params = _num(pvars.get("n_params")) or _num(result.details.get("n_params"))
    model = pvars.get("model") or result.details.get("model")
    n_params = n_params or KNOWN_PARAMS.get(str(model))
    seq_len = _num(pvars.get("seq_len") or pvars.get("block_size") or result.details.get("seq_len"))
    nodes = int(plan.get("nodes") or 1)
    gpus = nodes * int(plan.get("gpus_per_node") or plan.get("ntasks_per_node") or 0)
    gpus = gpus or int(result.details.get("n_gpu") or 1)
    if not n_params or not seq_len or int(seq_len) < 1:
        result.warnings.append("TFLOP/s not computed: parameter count or sequence length unknown")
        return
    value = causal_lm_tflops(sps.value, n_params, int(seq_len), gpus)
    if not math.isfinite(value):  # facts near the float limit: 6·N·D overflows
        result.warnings.append(f"TFLOP/s not computed: {FORMULA_6ND} is past the largest float "
                               f"(n_params {n_params:g}, seq_len {int(seq_len):g})")
        return
    result.metrics.append(Metric("tflops_per_gpu", value, "TFLOP/s", HIGHER, False, FORMULA_6ND))
    result.details["tflops_inputs"] = {"n_params": n_params, "seq_len": int(seq_len), "gpus": gpus}


def add_megatron_tokens(result: ParseResult, pvars: dict[str, Any], warn: bool = True) -> None:
    """tokens_per_second from the log's facts, else PVARS'; warn: say so when neither has them."""
    per_iter = result.get("time_per_iteration")
    if result.get("tokens_per_second") or per_iter is None or per_iter.value <= 0:
        return
    seq_len = _num(result.details.get("seq_len") or pvars.get("seq_len") or pvars.get("seq_length"))
    gbs = _num(result.details.get("global_batch_size") or pvars.get("global_batch_size"))
    if not seq_len or not gbs:
        if warn:
            result.warnings.append("tokens/s not computed: global batch size or sequence length unknown "
                                   "(give seq_len / global_batch_size)")
        return
    tokens = gbs * seq_len / per_iter.value
    if not math.isfinite(tokens):  # facts near the float limit
        result.warnings.append(f"tokens/s not computed: {FORMULA_TOKENS} is past the largest float")
        return
    result.metrics.append(Metric("tokens_per_second", tokens, "tokens/s", HIGHER, formula=FORMULA_TOKENS))
    result.details["tokens_inputs"] = {"global_batch_size": gbs, "seq_len": int(seq_len)}
