#!/usr/bin/env bash
# Give back the disk that earlier test runs took on a long-lived machine (make test, CI): every
# build tags its image with the git revision, so older revisions' images, and the SquashFS and
# enroot files converted from them, pile up; the disk once filled in the middle of a CI run
# ("no space left on device").
#
# - hpcai/* images: per repository, the HPCAI_KEEP_TAGS (default 2) most recently created tags
#   stay: the newest holds the build cache the next build starts from. Older tags are removed
#   (with the layers no other image uses); one a container still uses stays.
# - $HPCAI_CH_CACHE/*.sqfs and $HPCAI_SQSH_CACHE/*.sqsh (named NAME-<image id, 12>.EXT by
#   tests/infra/ch-image.sh and the pyxis tests): removed when no local image has that id.
set -euo pipefail

keep=${HPCAI_KEEP_TAGS:-2}
log() { printf 'reclaim: %s\n' "$*" >&2; }

docker info >/dev/null 2>&1 || exit 0  # no engine yet: nothing of ours to reclaim

# `docker images` lists the newest first: each repository's tags after its first $keep go.
mapfile -t old < <(docker images --filter 'reference=hpcai/*' --format '{{.Repository}} {{.Tag}}' \
  | awk -v keep="$keep" '$2 != "<none>" && ++seen[$1] > keep { print $1 ":" $2 }')
for tag in "${old[@]}"; do
  if docker rmi "$tag" >/dev/null 2>&1; then log "removed image $tag"; else log "kept $tag (in use)"; fi
done

ids=" $(docker images -q --no-trunc | sed 's/^sha256://' | cut -c1-12 | tr '\n' ' ')"
for file in "${HPCAI_CH_CACHE:-/var/tmp/hpcai-ch}"/*.sqfs "${HPCAI_SQSH_CACHE:-/var/tmp/hpcai-sqsh}"/*.sqsh; do
  [ -f "$file" ] || continue
  id=${file##*-}
  id=${id%.*}
  case $ids in
    *" $id "*) ;;
    *) rm -f -- "$file" && log "removed $file (its image is gone)" ;;
  esac
done

# $HPCAI_APPTAINER_CACHE/NAME-<key>.sif (tests/sifcache.py: the key hashes the image id and the
# definition, so each revision makes a new one): per NAME the $keep newest stay, older ones go
# with their lock files. A SIF being made is written aside and renamed, so none is half-read here.
sifs=${HPCAI_APPTAINER_CACHE:-/var/tmp/hpcai-sif}
if [ -d "$sifs" ]; then
  mapfile -t stale < <(find "$sifs" -maxdepth 1 -name '*-*.sif' -type f -printf '%T@ %f\n' | sort -rn \
    | awk -v keep="$keep" '{ name = $2; sub(/-[0-9a-f]+\.sif$/, "", name); if (++seen[name] > keep) print $2 }')
  for file in "${stale[@]}"; do
    rm -f -- "$sifs/$file" "$sifs/.$file.lock" && log "removed $sifs/$file (older than the $keep newest of its kind)"
  done
fi
