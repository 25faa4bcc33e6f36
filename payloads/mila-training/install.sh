#!/bin/bash
# mila-training: the Mila training suite at the commit its `fast` profile was made at (components.toml:
# mila-training, 224a69c3), from its checksummed commit archive, ported by port.py (each change
# listed there), with Mila's `perf` package and hpcai's benchutils (install/benchutils: the parts perf imports;
# benchutils is on neither PyPI nor the mirror) in the image's venv. Mila's other requirements are
# 2019 pins (apex, gym 0.12, torchvision 0.2.2 …) left out: the image's torch runs what it can,
# and requirements.txt adds what the CPU-runnable ones need (gymnasium for cart, pandas for recom …).
set -euo pipefail
# shellcheck source=../../dockerfiles/install/payload-lib.sh
. "$HPCAI_PAYLOAD_LIB"
: "${MILA_TRAINING_URL:?components manifest must provide mila-training}" "${MILA_TRAINING_SHA256:?}"
prefix=${HPCAI_PREFIX:-/opt/hpcai}
py=$prefix/venv/bin/python
share=$prefix/share/mila-training  # payload.toml's --src
here=$(pwd)
(enter_source "$MILA_TRAINING_URL" "$MILA_TRAINING_SHA256"
 install -d "$prefix/share"
 rm -rf "$share"
 cp -r . "$share")
"$py" "$here/install/port.py" "$share"
venv_install 'torch|numpy' -r "$here/requirements.txt"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$site/perf" "$site/benchutils"
cp -r "$share/common/perf" "$here/install/benchutils" "$site/"
"$py" -c 'import benchutils.chrono, perf; print("mila-training: perf and benchutils import")'
