#!/usr/bin/env bash
# Usage: install-packages.sh [--list] GROUP…|all
# Installs the missing Debian packages of the named groups of tests/infra/packages.txt, the one
# list of what the tests, the demo and the benchmarks need (one apt-get call; nothing when all are
# there). --list prints the packages of the groups instead, one a line. Without root or apt-get it
# says in one line which packages are missing and how to install them, and exits 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list=0
[ "${1:-}" = --list ] && { list=1; shift; }
[ $# -ge 1 ] || { echo "usage: $0 [--list] GROUP…|all" >&2; exit 2; }

groups=" $* "
known=" all $(awk '!/^#/ && NF {print $1}' "$here/packages.txt" | sort -u | tr '\n' ' ')"
for g in "$@"; do
  [[ $known == *" $g "* ]] || { echo "install-packages: unknown group '$g' (groups:$known)" >&2; exit 2; }
done
# "package satisfied-by" pairs of the groups
mapfile -t rows < <(awk -v groups="$groups" \
  '!/^#/ && NF && (groups ~ / all / || index(groups, " " $1 " ")) {print $2, $3}' "$here/packages.txt")
if ((list)); then printf '%s\n' "${rows[@]%% *}"; exit 0; fi

missing=()
for row in "${rows[@]}"; do
  read -r p satisfied <<<"$row"
  [ "$satisfied" != - ] && command -v "$satisfied" >/dev/null && continue
  [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)" = "ii " ] || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "install-packages: missing Debian packages ${missing[*]}; as root: apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "install-packages: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -qq "${missing[@]}" >/dev/null
