#!/bin/bash
# openclip: OpenCLIP and its training entry point (open_clip_train) into the image's venv.
# The venv sees the base image's torch; NGC's pip constraint file (PIP_CONSTRAINT) still applies.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
py="${HPCAI_PREFIX:-/opt/hpcai}/venv/bin/python"
# The base image's torch, torchvision and numpy stay: OpenCLIP must not replace them.
pins=$(base_pins "$py" 'torch|torchvision|torchaudio|numpy|triton')
"$py" -m pip install --no-cache-dir -c "$pins" -r requirements.txt
"$py" -c 'import open_clip, open_clip_train.main; print("open_clip", open_clip.__version__)'
