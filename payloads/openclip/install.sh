#!/bin/bash
# openclip: OpenCLIP at the commit MMoCLIP pins (components.toml: open-clip, ee286275, open_clip
# 2.14.0 with its trainer `training.main`), from its checksummed commit archive, into the image's
# venv. The base image's torch, torchvision, numpy and protobuf stay: OpenCLIP must not replace them.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
: "${OPEN_CLIP_URL:?components manifest must provide open-clip}" "${OPEN_CLIP_SHA256:?}"
src=$(enter_source "$OPEN_CLIP_URL" "$OPEN_CLIP_SHA256" && pwd)
held='torch|torchvision|torchaudio|numpy|triton|protobuf'
# Its own requirement lists (install and training), less one line: requirements.txt pins
# protobuf==3.20.*, which would replace the base's protobuf (NGC's, TensorFlow's); nothing of
# OpenCLIP's training path imports protobuf itself.
reqs=$(mktemp)
grep -hvE '^[[:space:]]*(protobuf|#|$)' "$src/requirements.txt" "$src/requirements-training.txt" | sort -u >"$reqs"
venv_install "$held" -r "$reqs"
venv_install "$held" --no-deps "$src"
"${HPCAI_PREFIX:-/opt/hpcai}/venv/bin/python" -c 'import importlib.metadata as m; print("open_clip", m.version("open_clip_torch"))'
