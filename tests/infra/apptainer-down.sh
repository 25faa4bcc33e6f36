#!/usr/bin/env bash
# Undo what apptainer-up.sh changed outside its prefix: root's /etc/subuid and /etc/subgid entry
# (only where apptainer-up.sh added it, marked by FILE.hpcai-added) and the /usr/local/bin links.
# The prefix itself stays (HPCAI_APPTAINER_PREFIX; remove it by hand). Safe to call twice.
set -euo pipefail
prefix=${HPCAI_APPTAINER_PREFIX:-/opt/hpcai-apptainer}
for f in /etc/subuid /etc/subgid; do
  [ -e "$f.hpcai-added" ] || continue
  sed -i '/^root:1000000:65536$/d' "$f"
  rm -f "$f.hpcai-added"
done
for link in /usr/local/bin/apptainer /usr/local/bin/run-singularity; do
  case $(readlink "$link" 2>/dev/null) in "$prefix"/*) rm -f "$link" ;; esac
done
printf 'apptainer-down: subuid/subgid and links restored\n' >&2
