#!/bin/bash
# megatron-gpt: Megatron Core into the image's venv, the base's torch and numpy kept as they are.
# On CUDA images also CARAML's own code path: Megatron-LM at f7727433 with CARAML's NVIDIA patch
# applied as its setup_nvidia_llm.sh does, and CARAML's GPT-2 tokenizer files, from their
# checksummed archives (components.toml: megatron-lm, caraml), plus what Megatron's
# preprocess_data.py imports (requirements-megatron-lm.txt), jpwr (CARAML's patched pretrain_gpt.py
# measures power with it), and port_torch.py's fallbacks for images without apex, flash-attn or
# nvfuser (a tree with them runs as before). CARAML's ROCm run uses another
# repository (bigcode-project/Megatron-LM @21045b5), which the source mirror does not hold: ROCm
# images run Megatron Core only.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
venv_install 'torch|numpy|packaging' -r requirements.txt
prefix=${HPCAI_PREFIX:-/opt/hpcai}
if [ "${HPCAI_FAMILY:-}" = cuda ]; then
  : "${MEGATRON_LM_URL:?components manifest must provide megatron-lm}" "${MEGATRON_LM_SHA256:?}"
  : "${CARAML_URL:?components manifest must provide caraml}" "${CARAML_SHA256:?}"
  : "${JPWR_URL:?components manifest must provide jpwr}" "${JPWR_SHA256:?}"
  command -v patch >/dev/null || { echo "megatron-gpt: patch (build-essential's) is needed to apply CARAML's patch" >&2; exit 1; }
  venv_install 'torch|numpy|packaging' -r requirements-megatron-lm.txt
  jpwr=$(enter_source "$JPWR_URL" "$JPWR_SHA256" && pwd)
  venv_install 'torch|numpy|packaging' "${jpwr}[pynvml]"
  share=$prefix/share/megatron-lm  # megatron_lm.py's tree()
  here=$PWD  # this payload's folder (a build hook sees its requirements files and install/)
  caraml=$(enter_source "$CARAML_URL" "$CARAML_SHA256" && pwd)
  (enter_source "$MEGATRON_LM_URL" "$MEGATRON_LM_SHA256"
   patch -p1 --forward < "$caraml/llm_training/aux/nvidia_energy_llm_fix.patch"
   "$prefix/venv/bin/python" "$here/install/port_torch.py" .
   install -d "$prefix/share"
   rm -rf "$share"
   cp -r . "$share")
  # the data helper, built now: a read-only image cannot build it at run time (build_helpers.py)
  "$prefix/venv/bin/python" "$here/install/build_helpers.py" "$share"
  cp -r "$caraml/llm_training/aux/tokenizers" "$share/caraml-tokenizers"
  grep -q 'TFLOPs(megatron)' "$share/megatron/training.py"  # CARAML's patch is in
fi
# The version from the installed metadata: importing megatron.core (and torch) here costs ~7 s of
# every cold build and proves little (the builder is not the final stage); the payload's run does.
"$prefix/venv/bin/python" -c 'import importlib.metadata as m; print("megatron-core", m.version("megatron-core"))'
