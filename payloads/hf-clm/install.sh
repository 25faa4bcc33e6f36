#!/bin/bash
# hf-clm: Transformers + Accelerate into the image's venv; on GPU families also datasets and
# DeepSpeed (ops compiled just in time at run time, so the build needs no CUDA toolchain match).
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
py="${HPCAI_PREFIX:-/opt/hpcai}/venv/bin/python"
# The base image's framework and numpy stay as they are, whatever the packages below would like.
pins=$(base_pins "$py" 'torch|torchvision|torchaudio|numpy|tensorflow|tensorflow-cpu|keras|triton')
pip=("$py" -m pip install --no-cache-dir -c "$pins")
"${pip[@]}" -r requirements.txt
case ${HPCAI_FAMILY:-cpu} in
  cuda|rocm)
    "${pip[@]}" -r requirements-gpu.txt
    # DeepSpeed's setup.py imports torch: build without isolation so it sees the base's torch.
    DS_BUILD_OPS=0 "${pip[@]}" --no-build-isolation "deepspeed==${DEEPSPEED_VERSION:-0.19.8}"
    ;;
esac
"$py" -c 'import transformers, accelerate; print("transformers", transformers.__version__, "accelerate", accelerate.__version__)'
