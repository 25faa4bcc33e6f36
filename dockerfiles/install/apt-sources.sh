#!/bin/bash
# apt-sources.sh FILE: replace the base image's apt sources by the site's (mirrors, air-gapped).
# *.sources is deb822 format, anything else the one-line format.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
src=${1:?sources file}
rm -f /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources
: > /etc/apt/sources.list
case $src in
  *.sources) cp "$src" /etc/apt/sources.list.d/hpcai.sources ;;
  *) cp "$src" /etc/apt/sources.list ;;
esac
