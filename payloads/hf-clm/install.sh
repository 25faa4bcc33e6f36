#!/bin/bash
# hf-clm: Transformers + Accelerate into the image's venv; on GPU families also datasets and
# DeepSpeed (ops compiled just in time at run time, so the build needs no CUDA toolchain match).
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
# The base image's framework and numpy stay as they are, whatever the packages below would like.
base='torch|torchvision|torchaudio|numpy|tensorflow|tensorflow-cpu|keras|triton'
if [ "${HF_CLM_VARIANT:-}" = seed ]; then
  # The WikiText-2 seed's versions instead of ours (payload.toml [variants.seed]).
  venv_install "$base" -r requirements-seed.txt
else
  venv_install "$base" -r requirements.txt
fi
case ${HPCAI_FAMILY:-cpu} in
  cuda|rocm)
    [ "${HF_CLM_VARIANT:-}" = seed ] || venv_install "$base" -r requirements-gpu.txt
    # DeepSpeed's setup.py imports torch: build without isolation so it sees the base's torch.
    DS_BUILD_OPS=0 venv_install "$base" --no-build-isolation "deepspeed==${DEEPSPEED_VERSION:-0.19.8}"
    ;;
esac
# Versions from the installed metadata: importing them (and torch) here costs ~5 s of every cold
# build and proves little (the builder is not the final stage); the payload's run checks them.
"${HPCAI_PREFIX:-/opt/hpcai}/venv/bin/python" -c 'import importlib.metadata as m; print("transformers", m.version("transformers"), "accelerate", m.version("accelerate"))'
