"""The model and parallel layout of a megatron-gpt run, from its variables and the world size.

CARAML's tables (llm_benchmark_nvidia_amd.yaml at the pinned commit: layers, hidden size, heads,
tp, pp, micro batch, gradient accumulation, global batch, precision per model size) are written
once, as the rows of `--profile caraml` in this folder's payload.toml. With the profile, the
runner puts them on the command line; without it, a variable left at 0 (or precision auto) takes
the size's row from the same file here. "tiny" is ours, for CPUs and CI.

Standard library only and no torch: megatron_gpt.py imports it in the image, and the host's tests
load it by path to check a planned launch against CARAML's own files.
"""

import math
import os

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "payload.toml")
TINY = dict(num_layers=2, hidden_size=64, num_attention_heads=4, ffn_hidden_size=0, tp=1, pp=1,
            micro_batch_size=2, grad_accum=1, global_batch_size=0, precision="fp32")
KEYS = tuple(TINY)  # the row values a layout takes; 0 (auto for precision) means the size's


def load_toml(path):
    try:
        import tomllib  # Python >= 3.11
    except ImportError:
        try:
            import tomli as tomllib
        except ImportError:  # every pip since 21.2 vendors tomli (NGC's Python 3.10)
            from pip._vendor import tomli as tomllib
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def size_row(model_size, manifest=MANIFEST):
    """The size's values: CARAML's row from the manifest's caraml profile, or ours for tiny."""
    if model_size == "tiny":
        return dict(TINY)
    row = load_toml(manifest)["profiles"]["caraml"].get("model_size=" + model_size)
    if row is None:
        raise ValueError("megatron-gpt: no CARAML row for model size %r in %s" % (model_size, manifest))
    size = dict(TINY, ffn_hidden_size=0, global_batch_size=0)  # 0: 4 x hidden; dp x micro x grad_accum
    size.update(row)
    return size


def layout(model_size, given, world, manifest=MANIFEST):
    """The run's sizes. GIVEN: {key: value} as the command line has them (0 or "auto": the size's);
    WORLD: the number of ranks. The global batch is the given one, else dp x micro x grad_accum
    (CARAML's rule for 13B and 175B); dp = world / (tp x pp). A layout that does not divide is a
    ValueError naming the numbers."""
    size = size_row(model_size, manifest)
    for key in KEYS:
        if given.get(key) not in (None, 0, "auto"):
            size[key] = given[key]
    size["ffn_hidden_size"] = size["ffn_hidden_size"] or 4 * size["hidden_size"]
    tp, pp = size["tp"], size["pp"]
    if world % (tp * pp):
        raise ValueError("megatron-gpt: %d ranks do not divide into tp=%d x pp=%d" % (world, tp, pp))
    dp = world // (tp * pp)
    gbs = size["global_batch_size"] or dp * size["micro_batch_size"] * size["grad_accum"]
    if gbs % (dp * size["micro_batch_size"]):
        raise ValueError("megatron-gpt: global batch %d is not a multiple of dp=%d x micro batch %d"
                         % (gbs, dp, size["micro_batch_size"]))
    if size["hidden_size"] % size["num_attention_heads"] or size["num_attention_heads"] % tp:
        raise ValueError("megatron-gpt: hidden %d / heads %d / tp %d do not divide"
                         % (size["hidden_size"], size["num_attention_heads"], tp))
    if size["num_layers"] % pp:
        raise ValueError("megatron-gpt: %d layers do not split into %d pipeline stages" % (size["num_layers"], pp))
    size.update(dp=dp, global_batch_size=gbs, microbatches=gbs // (dp * size["micro_batch_size"]))
    return size


def padded_vocab(vocab, tp, divisible_by=128):
    """Megatron pads the vocabulary to a multiple of 128 x tensor parallel size."""
    multiple = divisible_by * tp
    return int(math.ceil(vocab / multiple) * multiple)


GPT2_VOCAB = 50257  # GPT2BPETokenizer; Megatron pads to a multiple of 128 x tensor parallel size


def short_names(lay, seq):
    """A layout under the short names megatron_gpt.py and megatron_lm.py use."""
    return dict(layers=lay["num_layers"], hidden=lay["hidden_size"], heads=lay["num_attention_heads"],
                ffn=lay["ffn_hidden_size"], micro=lay["micro_batch_size"], tp=lay["tp"], pp=lay["pp"],
                gas=lay["grad_accum"], gbs=lay["global_batch_size"], precision=lay["precision"], dp=lay["dp"],
                microbatches=lay["microbatches"], seq=seq, vocab=padded_vocab(GPT2_VOCAB, lay["tp"]))
