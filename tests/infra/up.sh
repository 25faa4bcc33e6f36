#!/usr/bin/env bash
# Start every engine the test suite uses, installing what is missing (root + apt only): every
# package of tests/infra/packages.txt, then Docker + a local Debian base, Podman (the same base
# copied over), a registry (TLS, htpasswd) on loopback, Charliecloud, Apptainer, the Slurm test cluster nid[001-004] and enroot + pyxis in it, two more clusters joined by slurmdbd. Each bring-up ends with a
# self-check that runs something real on its engine and fails here, with the reason, rather than
# later in a test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

bash "$here/install-packages.sh" all  # one apt-get call for everything
bash "$here/docker-up.sh"
bash "$here/reclaim.sh"  # older revisions' images and the files made from them
# Podman is optional on a workstation (its tests then skip), required on CI.
if ! bash "$here/podman-up.sh"; then
  [ "${HPCAI_REQUIRE_ENGINES:-0}" = 1 ] && exit 1
  echo "up: no usable Podman here; the podman tests will skip" >&2
fi
bash "$here/registry-up.sh"  # a real registry on loopback: TLS from a CA made here, htpasswd (needs Docker's base)
bash "$here/charliecloud-up.sh"
bash "$here/apptainer-up.sh"  # Debian sid's Apptainer from package archives (its self-check converts the Docker base)
bash "$here/slurm-up.sh"
bash "$here/slurm-multi-up.sh"  # two more clusters, alpha and beta, joined by slurmdbd over MariaDB (-M)
bash "$here/enroot-pyxis-up.sh"  # enroot + pyxis into that cluster (needs it and Docker)
bash "$here/jube-up.sh"  # JUBE 2.7.1 into the project venv (`make test` makes the venv first)
echo "up: all engines up" >&2
