#!/bin/bash
# hf-clm: Transformers + Accelerate into the image's venv; on GPU families also datasets and
# DeepSpeed (ops compiled just in time at run time, so the build needs no CUDA toolchain match).
set -euo pipefail
prefix=${HPCAI_PREFIX:-/opt/hpcai}
py="$prefix/venv/bin/python"
# Pin what the base image already has (its framework, numpy, ...): nothing installed here may
# replace or shadow it, whatever the packages below would like to upgrade.
pins=$(mktemp)
"$py" -m pip list --format=freeze 2>/dev/null \
  | grep -iE '^(torch|torchvision|torchaudio|numpy|tensorflow|tensorflow-cpu|keras|triton)==' > "$pins" || true
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
