#!/bin/bash
# openclip: OpenCLIP and its training entry point (open_clip_train) into the image's venv.
# The venv sees the base image's torch; NGC's pip constraint file (PIP_CONSTRAINT) still applies.
set -euo pipefail
prefix=${HPCAI_PREFIX:-/opt/hpcai}
"$prefix/venv/bin/python" -m pip install --no-cache-dir -r requirements.txt
"$prefix/venv/bin/python" -c 'import open_clip, open_clip_train.main; print("open_clip", open_clip.__version__)'
