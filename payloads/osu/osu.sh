#!/bin/bash
# osu.sh TEST DEVICE MIN MAX ITERS: run one OSU benchmark by its short name.
# DEVICE host|gpu: gpu passes device buffers (-d cuda|rocm, and D D for point-to-point tests).
set -euo pipefail
test=${1:?test} device=${2:-host} min=${3:-1} max=${4:-4194304} iters=${5:-1000}
root=${HPCAI_PREFIX:-/opt/hpcai}/osu/libexec/osu-micro-benchmarks/mpi
case $test in
  latency|bw|bibw|mbw_mr|multi_lat) kind=pt2pt ;;
  *) kind=collective ;;
esac
bin="$root/$kind/osu_$test"
[ -x "$bin" ] || { echo "osu: no benchmark osu_$test in $root/$kind" >&2; exit 2; }
args=(-m "$min:$max" -i "$iters")
if [ "$device" = gpu ]; then
  if command -v nvidia-smi >/dev/null; then accel=cuda; else accel=rocm; fi
  args+=(-d "$accel")
  [ "$kind" = pt2pt ] && args+=(D D)
fi
exec "$bin" "${args[@]}"
