#!/usr/bin/env bash
# Start a real Slurm test cluster on this one machine: munged, slurmctld and four
# `slurmd -N nid00X` (nodes nid[001-004], one port, spool dir, pid file and log each).
# Idempotent: daemons that already answer are left alone; a changed config, or a change to the
# packages they load (a plugin's dlopen that failed stays failed until a restart), restarts them.
# Installs the slurm group of packages.txt when missing (root + apt only). Needs root: jobs run as
# root. Ends with a self-check: a 2-node step under each MPI plugin the tests use.
#
# Settings (environment):
#   HPCAI_SLURM_NODES      number of fake nodes (default 4 -> nid001..nid004)
#   HPCAI_SLURM_CPUS       CPUs each node advertises (default 4; oversubscribes the machine)
#   HPCAI_SLURM_IB_ALIASES 1 (default) also maps nid00Xi to 127.0.0.1, for the JSC suffix test
#   HPCAI_SLURM_LOGS       log folder (default /var/log/hpcai-slurm)
#   HPCAI_SLURM_MPI_TYPES  srun --mpi types the self-check runs (default: pmix pmi2 none)
#   HPCAI_SLURM_NODE_LOCAL the node-local folder (default /var/cache/hpcai-node): each slurmd runs in
#                          a mount namespace of its own where this path is its node's own folder
#                          ($STATE/node-local/NODE), as a local disk is on a real node; the jobs it
#                          starts and sbcast's writes to it see that folder (hpcai stage, issue 29).
#                          Everything else (/tmp, the runs) stays shared, as on a cluster's shared FS.
#   HPCAI_SLURM_SHARED     a folder whose later mounts the nodes see too (default $STATE/shared,
#                          a shared-propagation mount): benchmarks/stage_scaling.py mounts its
#                          byte-counting file system there, as a cluster's shared file system.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
NODES=${HPCAI_SLURM_NODES:-4}
CPUS=${HPCAI_SLURM_CPUS:-4}
IB_ALIASES=${HPCAI_SLURM_IB_ALIASES:-1}
LOGS=${HPCAI_SLURM_LOGS:-/var/log/hpcai-slurm}
MPI_TYPES=${HPCAI_SLURM_MPI_TYPES:-pmix pmi2 none}
STATE=/var/lib/hpcai-slurm
NODE_LOCAL=${HPCAI_SLURM_NODE_LOCAL:-/var/cache/hpcai-node}
SHARED=${HPCAI_SLURM_SHARED:-$STATE/shared}
SPOOL=/var/spool/slurmd
RUN=/run/hpcai-slurm
CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
CTLD_PORT=6817
FIRST_SLURMD_PORT=17001
MARKER="hpcai-test-cluster"

log() { printf 'slurm-up: %s\n' "$*" >&2; }
node_names() { for i in $(seq 1 "$NODES"); do printf 'nid%03d\n' "$i"; done; }

dump_logs() {
  log "cluster did not come up; logs from $LOGS:"
  for f in "$LOGS"/*.log; do
    [ -f "$f" ] || continue
    printf '=== %s (last 40 lines) ===\n' "$f" >&2
    tail -n 40 "$f" >&2
  done
  sinfo -N 2>&1 | sed 's/^/sinfo: /' >&2 || true
}
fail() { log "$*"; dump_logs; exit 1; }

alive() {  # alive PIDFILE: the process named in the pid file exists
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

[ "$(id -u)" -eq 0 ] || { log "must run as root (slurmd runs jobs as root here)"; exit 1; }

bash "$here/install-packages.sh" slurm

# --- host names: MASTER_ADDR=nid001 (and the JSC-style nid001i) must resolve -----------------
for n in $(node_names); do
  names=$n
  [ "$IB_ALIASES" = 1 ] && names="$names ${n}i"
  for name in $names; do
    getent hosts "$name" >/dev/null || printf '127.0.0.1 %s\n' "$name" >>/etc/hosts
  done
done

# --- munge --------------------------------------------------------------------------------------
mkdir -p "$LOGS" "$STATE/ctld" "$RUN"
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  [ -s /etc/munge/munge.key ] || {
    log "creating /etc/munge/munge.key"
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chown munge:munge /etc/munge/munge.key 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
  }
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
  log "starting munged"
  if id munge >/dev/null 2>&1 && command -v runuser >/dev/null; then
    runuser -u munge -- munged
  else
    munged --force
  fi
  for _ in $(seq 1 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
  munge -n | unmunge >/dev/null || fail "munged does not answer"
fi

# --- slurm.conf ---------------------------------------------------------------------------------
host=$(hostname)
nodes_block=""
port=$FIRST_SLURMD_PORT
for n in $(node_names); do
  nodes_block+="NodeName=$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$port"$'\n'
  port=$((port + 1))
done
rendered=$(sed -e "s|@HOST@|$host|g" -e "s|@CTLD_PORT@|$CTLD_PORT|g" -e "s|@STATE@|$STATE|g" -e "s|@SPOOL@|$SPOOL|g" \
  -e "s|@RUN@|$RUN|g" -e "s|@LOGS@|$LOGS|g" -e "s|@CPUS@|$CPUS|g" "$here/slurm/slurm.conf.in")
rendered=${rendered/@NODES@/${nodes_block%$'\n'}}

# What the running daemons were started with: the config and the packages they load.
loaded_packages() {
  # shellcheck disable=SC2046  # package names: one word each
  dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n' \
    $(bash "$here/install-packages.sh" --list slurm) slurmd slurmctld libpmix2 2>/dev/null
}
started_with="$rendered"$'\n'"$(loaded_packages)"$'\n'"node-local: $NODE_LOCAL shared: $SHARED"

mkdir -p "$(dirname "$CONF")"
if [ -f "$CONF" ] && ! grep -q "$MARKER" "$CONF"; then
  log "moving a foreign $CONF aside to $CONF.hpcai-orig"
  mv "$CONF" "$CONF.hpcai-orig"
fi
if alive "$RUN/slurmctld.pid" && [ "$(cat "$RUN/started-with" 2>/dev/null)" != "$started_with" ]; then
  log "config or Slurm/PMIx packages changed since the daemons started: restarting the cluster"
  bash "$here/slurm-down.sh"
fi
[ -f "$CONF" ] && [ "$(cat "$CONF")" = "$rendered" ] || printf '%s\n' "$rendered" >"$CONF"
printf '%s\n' "$started_with" >"$RUN/started-with"

# --- daemons ------------------------------------------------------------------------------------
if ! alive "$RUN/slurmctld.pid"; then
  # -c: a test cluster starts empty. Jobs saved by an earlier life of the daemons have no
  # processes any more, yet would hold their nodes (and the idle wait below) until cancelled.
  log "starting slurmctld"
  slurmctld -i -c || fail "slurmctld failed to start"
fi
for _ in $(seq 1 60); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
scontrol ping 2>/dev/null | grep -q UP || fail "slurmctld does not answer scontrol ping"

# A mount made under $SHARED after the nodes started reaches them: a bind of it onto itself, made
# a shared mount before the slurmds copy this host's mounts (as slaves) into their namespaces.
mkdir -p "$SHARED"
if ! grep -q " $SHARED .*shared:" /proc/self/mountinfo; then
  mountpoint -q "$SHARED" || mount --bind "$SHARED" "$SHARED"
  mount --make-shared "$SHARED"
fi

for n in $(node_names); do
  mkdir -p "$SPOOL/$n" "/tmp/hpcai-slurm/$n" "$STATE/node-local/$n" "$NODE_LOCAL"  # /tmp may have been cleaned
  if ! alive "$RUN/slurmd-$n.pid"; then
    log "starting slurmd -N $n (its $NODE_LOCAL: $STATE/node-local/$n)"
    # shellcheck disable=SC2016  # $1.. are the inner shell's
    unshare --mount --propagation slave sh -c 'mount --bind "$1" "$2" && exec slurmd -N "$3"' \
      sh "$STATE/node-local/$n" "$NODE_LOCAL" "$n" || fail "slurmd -N $n failed to start"
  fi
done

# --- wait for every node to be up: idle, or running jobs (mixed, allocated) --------------------
want=$NODES
for i in $(seq 1 120); do
  idle=$(sinfo -h -N -t idle,mixed,allocated -o '%N' 2>/dev/null | sort -u | wc -l)
  [ "$idle" -ge "$want" ] && break
  # A node left DOWN/DRAIN by an earlier run (or unknown reboot) is brought back.
  if [ $((i % 10)) -eq 0 ]; then
    bad=$(sinfo -h -N -t down,drain,fail -o '%N' 2>/dev/null | sort -u | paste -sd, -)
    if [ -n "$bad" ]; then scontrol update NodeName="$bad" State=RESUME 2>/dev/null || true; fi
  fi
  sleep 0.5
done
[ "$idle" -ge "$want" ] || fail "only $idle of $want nodes are up (idle, mixed or allocated) after 60 s"

# Self-check: one task per node, each on a different fake node; then a 2-node step under each MPI
# plugin the tests use (a plugin that cannot load fails here, naming srun's reason).
seen=$(timeout 60 srun -N "$NODES" -n "$NODES" --ntasks-per-node=1 printenv SLURMD_NODENAME 2>&1 |
  sort -u | paste -sd, -) || fail "srun smoke test failed: $seen"
[ "$seen" = "$(node_names | paste -sd, -)" ] || fail "srun smoke test saw nodes '$seen'"
for mpi in $MPI_TYPES; do
  out=$(timeout 60 srun -N 2 -n 2 --mpi="$mpi" true 2>&1) || fail "self-check failed: srun -N2 --mpi=$mpi true: $out"
done
log "cluster up: $seen idle, srun --mpi=${MPI_TYPES// /|} runs (config $CONF, logs $LOGS)"
