#!/bin/bash
# tf-cnn-benchmarks: CARAML's fork of tf_cnn_benchmarks and jpwr (its power measurement), both from
# their pinned, checksummed commit archives (components.toml), and Keras 2 (tf-keras) where the
# image's TensorFlow ships Keras 3 (>= 2.16): the fork builds its models with tf.layers.
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
: "${TF_CNN_BENCHMARKS_URL:?components manifest must provide tf-cnn-benchmarks}" "${TF_CNN_BENCHMARKS_SHA256:?}"
: "${JPWR_URL:?components manifest must provide jpwr}" "${JPWR_SHA256:?}"
prefix=${HPCAI_PREFIX:-/opt/hpcai}
py=$prefix/venv/bin/python
share=$prefix/share/tf_cnn_benchmarks  # payload.toml's --src
(enter_source "$TF_CNN_BENCHMARKS_URL" "$TF_CNN_BENCHMARKS_SHA256"
 install -d "$prefix/share"
 rm -rf "$share"
 cp -r scripts/tf_cnn_benchmarks "$share"
 cp LICENSE "$share/LICENSE")
jpwr=$(enter_source "$JPWR_URL" "$JPWR_SHA256" && pwd)
extra=""
[ "${HPCAI_FAMILY:-}" = cuda ] && extra="[pynvml]"  # jpwr.gpu.pynvml (NVIDIA); ROCm's reads rocm-smi
# The base's TensorFlow, numpy and Keras stay as they are.
held='tensorflow|tensorflow-cpu|tensorflow-rocm|tensorflow-gpu|numpy|keras|tf-keras|protobuf|h5py'
venv_install "$held" "$jpwr$extra"
tf=$("$py" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -n 1)
case $tf in
  1.* | 2.[0-9].* | 2.1[0-5].*) ;;  # Keras 2 is TensorFlow's own Keras
  2.*)
    if ! "$py" -c 'import tf_keras' 2>/dev/null; then
      # --no-deps: tf-keras requires the distribution `tensorflow`, which a tensorflow-cpu or
      # NGC build does not carry under that name; pip would install a second TensorFlow.
      minor=${tf%.*}
      "$py" -m pip install --no-cache-dir --no-deps "tf-keras~=$minor.0"
    fi ;;
  *) echo "tf-cnn-benchmarks: no TensorFlow in the image's venv" >&2; exit 1 ;;
esac
test -f "$share/tf_cnn_benchmarks.py"
"$py" -c 'import importlib.metadata as m; print("jpwr", m.version("jpwr"))'
