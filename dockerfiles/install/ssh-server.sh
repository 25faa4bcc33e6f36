#!/bin/bash
# ssh-server.sh: an ssh server for launchers that start ranks over ssh (`--ssh 1`, an -ssh image):
# a Kubeflow MPIJob's launcher runs mpirun, which starts Open MPI's daemons or MPICH's proxies on
# the workers over ssh, and each worker runs $HPCAI_PREFIX/bin/hpcai-sshd (`hpcai export k8s`).
# No host keys stay in the image (each would be one private key shared by every container made
# from it): hpcai-sshd makes them at each start. Logins are by key only; the operator mounts the
# job's key pair into ~/.ssh.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# system-packages.sh is here: the stage's first step copied it, and it stays until the build folder goes.
"$(dirname "$0")/system-packages.sh" final openssh-server openssh-client
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/ssh/sshd_config.d /etc/ssh/ssh_config.d
# sshd and ssh keep the first value they read, so these files, included first, win.
add_include() {  # add_include CONFIG DIR: Ubuntu 20.04's configs have no Include line
  grep -q "^Include $2/" "$1" || sed -i "1i Include $2/*.conf" "$1"
}
add_include /etc/ssh/sshd_config /etc/ssh/sshd_config.d
add_include /etc/ssh/ssh_config /etc/ssh/ssh_config.d
# StrictModes no: Kubernetes mounts a Secret's files through links its group may read, which
# StrictModes refuses. UsePAM no: PAM's loginuid and limits modules fail in an unprivileged
# container.
cat >/etc/ssh/sshd_config.d/00-hpcai.conf <<'CONF'
# hpcai --ssh 1 (dockerfiles/install/ssh-server.sh): keys only, for MPI launchers.
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
CONF
# sshd starts a session with a bare environment, so the MPI daemons and the ranks they start would
# miss the image's PATH, library paths, HPCAI_* and the base's CUDA/NCCL/ROCm variables, and the
# pod's env. hpcai-sshd writes the container's environment to a root-only file; bash, when sshd
# runs it, reads /etc/bash.bashrc and ~/.bashrc only (not BASH_ENV), so the first line of
# bash.bashrc reads that file, before the file's return for non-interactive shells, once per
# session (the file sets HPCAI_SSHD_ENVIRONMENT).
# shellcheck disable=SC2016 # written as it is: the session's bash expands it
line='if [ -n "${SSH_CONNECTION:-}" ] && [ -z "${HPCAI_SSHD_ENVIRONMENT:-}" ] && [ -r /run/hpcai-sshd/environment ]; then . /run/hpcai-sshd/environment; fi'
touch /etc/bash.bashrc
printf '%s\n%s\n' "# hpcai --ssh 1: ssh sessions get the container's environment (hpcai-sshd)" "$line" \
  | cat - /etc/bash.bashrc >/etc/bash.bashrc.new
mv /etc/bash.bashrc.new /etc/bash.bashrc
# Workers' host keys are new at each start, so there is nothing to check them against; LogLevel
# ERROR keeps ssh's "Permanently added" line out of the ranks' output.
cat >/etc/ssh/ssh_config.d/00-hpcai.conf <<'CONF'
# hpcai --ssh 1 (dockerfiles/install/ssh-server.sh): workers' host keys change at each start.
Host *
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    ConnectionAttempts 10
CONF
# Check the configuration with throwaway host keys (and the privilege separation folder sshd
# wants; hpcai-sshd makes it again where /run is a fresh tmpfs), then remove the keys again.
mkdir -p /run/sshd
ssh-keygen -A >/dev/null
/usr/sbin/sshd -t || die "sshd refuses its configuration"
rm -f /etc/ssh/ssh_host_*
log "ssh server: $(/usr/sbin/sshd -V 2>&1 | head -n1)"
