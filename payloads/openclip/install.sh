#!/bin/bash
# openclip: OpenCLIP and its training entry point (open_clip_train) into the image's venv.
# The venv sees the base image's torch; NGC's pip constraint file (PIP_CONSTRAINT) still applies.
set -euo pipefail
prefix=${HPCAI_PREFIX:-/opt/hpcai}
py="$prefix/venv/bin/python"
# Pin what the base image already has (torch, torchvision, numpy): OpenCLIP must not replace it.
pins=$(mktemp)
"$py" -m pip list --format=freeze 2>/dev/null \
  | grep -iE '^(torch|torchvision|torchaudio|numpy|triton)==' > "$pins" || true
"$py" -m pip install --no-cache-dir -c "$pins" -r requirements.txt
"$prefix/venv/bin/python" -c 'import open_clip, open_clip_train.main; print("open_clip", open_clip.__version__)'
