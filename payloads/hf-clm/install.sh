#!/bin/bash
# hf-clm: Transformers + Accelerate into the image's venv; on GPU families also datasets and
# DeepSpeed (ops compiled just in time at run time, so the build needs no CUDA toolchain match).
set -euo pipefail
prefix=${HPCAI_PREFIX:-/opt/hpcai}
pip=("$prefix/venv/bin/python" -m pip install --no-cache-dir)
"${pip[@]}" -r requirements.txt
case ${HPCAI_FAMILY:-cpu} in
  cuda|rocm)
    "${pip[@]}" -r requirements-gpu.txt
    # DeepSpeed's setup.py imports torch: build without isolation so it sees the base's torch.
    DS_BUILD_OPS=0 "${pip[@]}" --no-build-isolation "deepspeed==${DEEPSPEED_VERSION:-0.19.8}"
    ;;
esac
"$prefix/venv/bin/python" -c 'import transformers, accelerate; print("transformers", transformers.__version__, "accelerate", accelerate.__version__)'
