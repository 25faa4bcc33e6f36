#!/usr/bin/env bash
# The demo: build the small CPU image (pytorch-cpu) and run a payload locally — two ranks of the
# DDP benchmark in Docker containers on this machine — then print the results table.
# Air-gapped helpers are taken from this machine's pip configuration when present: its local
# wheel folder (find-links) becomes the build's wheelhouse, its CA bundle the build's CA bundle.
set -euo pipefail
cd "$(dirname "$0")/../.."
hpcai=${HPCAI:-.venv/bin/hpcai}
pip=${PIP:-.venv/bin/pip}

pip_setting() { "$pip" config list 2>/dev/null | sed -n "s/^[a-z:.]*${1}='\(.*\)'$/\1/p" | head -n1; }

build_args=(pytorch-cpu)
wheels=${WHEELHOUSE:-$(pip_setting find-links)}
[ -n "$wheels" ] && [ -d "$wheels" ] && build_args+=(--wheelhouse "$wheels")
ca=${CA_BUNDLE:-${PIP_CERT:-$(pip_setting cert)}}
[ -n "$ca" ] && [ -f "$ca" ] && build_args+=(--ca-bundle "$ca")

echo "demo: hpcai build ${build_args[*]}" >&2
tag=$("$hpcai" build "${build_args[@]}" | tail -n1)
echo "demo: image $tag" >&2

out=${DEMO_RUNS:-runs/demo}
mkdir -p "$out"
run_dir="$out/$(date +%Y%m%d-%H%M%S)-ddp-bench"
"$hpcai" launch --site local --runtime docker --image "$tag" --ntasks-per-node 2 \
  --output-dir "$run_dir" ddp-bench
"$hpcai" results show "$run_dir"
