#!/bin/bash
# megatron-gpt: Megatron Core into the image's venv, the base's torch and numpy kept as they are.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
venv_install 'torch|numpy|packaging' -r requirements.txt
# The version from the installed metadata: importing megatron.core (and torch) here costs ~7 s of
# every cold build and proves little (the builder is not the final stage); the payload's run does.
"${HPCAI_PREFIX:-/opt/hpcai}/venv/bin/python" -c 'import importlib.metadata as m; print("megatron-core", m.version("megatron-core"))'
