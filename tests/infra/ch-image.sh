#!/usr/bin/env bash
# Usage: ch-image.sh IMAGE OUTDIR
# Turn a Docker image into a Charliecloud SquashFS file for `ch-run` and print its path.
# The file is named after the image and its id (OUTDIR/<name>-<id12>.sqfs), so it is reused
# while the image id is unchanged and rebuilt when the image changes; older files of the same
# image are removed. Concurrent callers are serialised by a lock file.
#
# Why not `ch-convert -i docker -o squash` directly: Charliecloud 0.31 exports the image,
# gzips it single-threaded, unpacks it again and then packs the SquashFS. We export an
# uncompressed tar (with the image's ENV as ch/environment, exactly as ch-convert does) and
# let `ch-convert -i tar -o squash` unpack and pack it, which skips the gzip round trip.
#
# ch-run cannot create a bind destination inside a read-only SquashFS ("can't mkdir ...:
# Read-only file system"), so the usual hpcai bind destinations are added as empty directories
# when the image lacks them (override the list with HPCAI_CH_MOUNT_POINTS).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 IMAGE OUTDIR" >&2; exit 2; }
image=$1
outdir=$2
mount_points=${HPCAI_CH_MOUNT_POINTS:-/host/usr /host/lib /var/spool/slurmd /run/munge /run/cxi /etc/libibverbs.d}
export USER=${USER:-$(id -un)}  # ch-convert / ch-run refuse to run without it

log() { printf 'ch-image: %s\n' "$*" >&2; }

id=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null) || {
  log "no such docker image: $image"; exit 1;
}
id=${id#sha256:}
name=$(printf '%s' "$image" | tr -c 'A-Za-z0-9._-' '_')
mkdir -p "$outdir"
out="$outdir/$name-${id:0:12}.sqfs"

exec 9>"$outdir/.$name.lock"
flock 9
if [ -s "$out" ]; then
  printf '%s\n' "$out"
  exit 0
fi

# Leftovers of a conversion that was killed (SIGKILL skips the trap); we hold the lock.
rm -rf --one-file-system "$outdir/.tmp-$name".*
docker ps -aq --filter "label=hpcai.ch-image=$name" | xargs -r docker rm -f >/dev/null
tmp=$(mktemp -d "$outdir/.tmp-$name.XXXXXX")
cid=""
cleanup() {
  [ -n "$cid" ] && docker rm -f "$cid" >/dev/null 2>&1
  rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT

log "exporting $image (${id:0:12})"
cid=$(docker create --read-only --label "hpcai.ch-image=$name" "$image" /bin/true)
docker export "$cid" >"$tmp/image.tar"
docker rm "$cid" >/dev/null
cid=""
# The image's ENV travels as ch/environment; `ch-run --set-env` (no argument) applies it.
mkdir -p "$tmp/ch"
docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$image" |
  sed '/^$/d' >"$tmp/ch/environment"
tar -rf "$tmp/image.tar" -C "$tmp" ch/environment
present=$(tar -tf "$tmp/image.tar" | sed -e 's|^\./||' -e 's|/$||')
missing=()
for d in $mount_points; do
  d=${d#/}
  grep -qxF "$d" <<<"$present" || missing+=("$d")
done
if ((${#missing[@]})); then
  (cd "$tmp" && mkdir -p "${missing[@]/#/mnt/}")
  tar -rf "$tmp/image.tar" -C "$tmp/mnt" "${missing[@]}"
fi

log "packing SquashFS"
# ch-convert is chatty (mksquashfs progress): keep its output, show it only on failure.
if ! ch-convert -i tar -o squash "$tmp/image.tar" "$tmp/image.sqfs" >"$tmp/ch-convert.log" 2>&1; then
  cat "$tmp/ch-convert.log" >&2
  log "ch-convert failed for $image"
  exit 1
fi
mv "$tmp/image.sqfs" "$out"

# Keep one SquashFS per image name: drop those of earlier image ids.
for old in "$outdir/$name"-*.sqfs; do
  [ "$old" = "$out" ] || rm -f "$old"
done
printf '%s\n' "$out"
