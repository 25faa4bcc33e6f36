#!/bin/bash
# python-venv.sh: the image's venv, /opt/hpcai/venv, on top of the base's python3.
# --system-site-packages keeps the base's own (e.g. NGC's pinned) packages visible and untouched.
# CPU flavors install their framework here; pip reads PIP_FIND_LINKS (--wheelhouse) first.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
python3 -m venv --system-site-packages "$HPCAI_PREFIX/venv"
py=$(venv_python)
"$py" -m pip install --no-cache-dir -q --upgrade pip wheel
if [ -n "${HPCAI_FRAMEWORK_REQUIREMENT:-}" ]; then
  log "installing $HPCAI_FRAMEWORK_REQUIREMENT"
  # shellcheck disable=SC2086  # several requirements, separated by spaces
  "$py" -m pip install --no-cache-dir $HPCAI_FRAMEWORK_REQUIREMENT
fi
case ${HPCAI_FRAMEWORK:-} in
  pytorch) "$py" -c 'import torch; print("torch", torch.__version__)' ;;
  tensorflow) "$py" -c 'import tensorflow as tf; print("tensorflow", tf.__version__)' ;;
esac
