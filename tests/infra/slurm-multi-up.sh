#!/usr/bin/env bash
# Start two more Slurm clusters on this machine, alpha and beta, joined through one slurmdbd over
# a MariaDB of its own, so `sbatch/squeue/sacct -M` route between them as on a multi-cluster
# site (issue 31), and slurmrestd in front of alpha (auth/jwt, http://127.0.0.1:6820). Each cluster has its own slurmctld (loopback port), two `slurmd -N` nodes,
# config, state and logs; the main test cluster (slurm-up.sh) is not touched. Clients name a
# cluster's config with SLURM_CONF=/etc/slurm-multi/CLUSTER/slurm.conf; either one reaches both
# clusters through the database. Idempotent: what answers is left alone; a changed config restarts.
# Needs root and munged (slurm-up.sh starts it). Ends with a self-check: a batch job routed by
# `sbatch --clusters=alpha,beta`, seen by `squeue -M`, and a 2-node step on each cluster.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
STATE=/var/lib/hpcai-slurm-multi
RUN=/run/hpcai-slurm-multi
LOGS=${HPCAI_SLURM_LOGS:-/var/log/hpcai-slurm}/multi
ETC=/etc/slurm-multi
CLUSTERS=(alpha beta)
declare -A CTLD_PORT=([alpha]=6837 [beta]=6847) FIRST_NODE_PORT=([alpha]=17201 [beta]=17301) PREFIX=([alpha]=a [beta]=b)
DBD_PORT=6829
REST_PORT=6820
DB_PORT=3307
CPUS=${HPCAI_SLURM_CPUS:-4}

log() { printf 'slurm-multi-up: %s\n' "$*" >&2; }
fail() {
  log "$*"
  for f in "$LOGS"/*.log "$LOGS"/*/*.log; do [ -f "$f" ] && { printf '=== %s (last 30 lines) ===\n' "$f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
conf() { printf '%s/%s/slurm.conf' "$ETC" "$1"; }
nodes() { printf '%s01 %s02' "${PREFIX[$1]}" "${PREFIX[$1]}"; }

[ "$(id -u)" -eq 0 ] || { log "must run as root"; exit 1; }
bash "$here/install-packages.sh" slurm multicluster
munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || fail "munged does not answer: run tests/infra/slurm-up.sh first"
mkdir -p "$STATE" "$RUN" "$LOGS"
chmod 755 "$STATE"  # the database folder inside is the mysql user's; the password file is root's alone

# --- MariaDB, on loopback, in a data folder of its own -----------------------------------------
db=$STATE/mysql
sock=$RUN/mysql/mysqld.sock
mkdir -p "$RUN/mysql" && chown mysql:mysql "$RUN/mysql"
if [ ! -d "$db/mysql" ]; then
  log "initializing MariaDB in $db"
  mariadb-install-db --user=mysql --datadir="$db" --skip-test-db >"$LOGS/mariadb-install.log" 2>&1 ||
    fail "mariadb-install-db failed (see $LOGS/mariadb-install.log)"
fi
if ! mariadb-admin --socket="$sock" ping >/dev/null 2>&1; then
  log "starting MariaDB on 127.0.0.1:$DB_PORT"
  setsid mariadbd --user=mysql --datadir="$db" --socket="$sock" --port="$DB_PORT" --bind-address=127.0.0.1 \
    --pid-file="$RUN/mysql/mariadbd.pid" --log-error="$LOGS/mariadb.log" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 1 60); do mariadb-admin --socket="$sock" ping >/dev/null 2>&1 && break; sleep 0.5; done
  mariadb-admin --socket="$sock" ping >/dev/null 2>&1 || fail "MariaDB does not answer on $sock"
fi
# slurmdbd's own password, made once, readable by root alone
[ -s "$STATE/db-password" ] || (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$STATE/db-password")
pass=$(cat "$STATE/db-password")
# the key slurmctld signs and checks JSON Web Tokens with (scontrol token; slurmrestd forwards them)
[ -s "$STATE/jwt_hs256.key" ] || (umask 077; head -c 32 /dev/urandom >"$STATE/jwt_hs256.key")
mariadb --socket="$sock" -u root <<SQL || fail "cannot create slurmdbd's database user"
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
CREATE DATABASE IF NOT EXISTS hpcai_slurm_acct;
GRANT ALL ON hpcai_slurm_acct.* TO 'slurm'@'127.0.0.1';
SQL

# --- configs --------------------------------------------------------------------------------------
host=$(hostname)
render() {  # render TEMPLATE CLUSTER
  local nodes_block="" port=${FIRST_NODE_PORT[$2]:-0} n text
  if [ -n "${PREFIX[$2]:-}" ]; then
    for n in $(nodes "$2"); do
      nodes_block+="NodeName=$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$port"$'\n'
      port=$((port + 1))
    done
  fi
  text=$(sed -e "s|@CLUSTER@|$2|g" -e "s|@HOST@|$host|g" -e "s|@CTLD_PORT@|${CTLD_PORT[$2]:-0}|g" \
    -e "s|@STATE@|$STATE/$2|g" -e "s|@RUN@|$RUN/$2|g" -e "s|@LOGS@|$LOGS/$2|g" -e "s|@CPUS@|$CPUS|g" \
    -e "s|@DBD_PORT@|$DBD_PORT|g" -e "s|@DB_PORT@|$DB_PORT|g" -e "s|@DB_PASS@|$pass|g" \
    -e "s|@JWT_KEY@|$STATE/jwt_hs256.key|g" "$1")
  printf '%s\n' "${text/@NODES@/${nodes_block%$'\n'}}"
}
changed=0
write() {  # write FILE TEXT: only when it differs (a difference restarts the daemons)
  mkdir -p "$(dirname "$1")"
  if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then (umask 077; printf '%s\n' "$2" >"$1"); changed=1; fi
}
for c in "${CLUSTERS[@]}"; do
  mkdir -p "$STATE/$c/ctld" "$STATE/$c/spool" "$RUN/$c" "$LOGS/$c"
  write "$(conf "$c")" "$(render "$here/slurm/multi-cluster.conf.in" "$c")"
  chmod 644 "$(conf "$c")"
  # slurmdbd and the clients look for slurmdbd.conf beside SLURM_CONF's file: one copy per cluster
  write "$ETC/$c/slurmdbd.conf" "$(render "$here/slurm/slurmdbd.conf.in" dbd)"
  for n in $(nodes "$c"); do getent hosts "$n" >/dev/null || printf '127.0.0.1 %s\n' "$n" >>/etc/hosts; done
done
if ((changed)); then log "configs changed: restarting the multi-cluster daemons"; bash "$here/slurm-multi-down.sh" --keep-db; fi

# --- slurmdbd, then each cluster ----------------------------------------------------------------
export SLURM_CONF
SLURM_CONF=$(conf alpha)
mkdir -p "$RUN/dbd" "$LOGS/dbd"
if ! alive "$RUN/dbd/slurmdbd.pid"; then
  log "starting slurmdbd on 127.0.0.1:$DBD_PORT"
  slurmdbd || fail "slurmdbd failed to start"
fi
for _ in $(seq 1 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
sacctmgr -n list cluster >/dev/null 2>&1 || fail "slurmdbd does not answer sacctmgr"
for c in "${CLUSTERS[@]}"; do
  sacctmgr -n -P list cluster format=cluster | grep -qx "$c" || sacctmgr -i add cluster "$c" >/dev/null ||
    fail "sacctmgr add cluster $c failed"
done

for c in "${CLUSTERS[@]}"; do
  SLURM_CONF=$(conf "$c")
  if ! alive "$RUN/$c/slurmctld.pid"; then
    log "starting slurmctld of $c on 127.0.0.1:${CTLD_PORT[$c]}"
    slurmctld -i -c || fail "slurmctld of $c failed to start"
  fi
  for _ in $(seq 1 60); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
  scontrol ping 2>/dev/null | grep -q UP || fail "slurmctld of $c does not answer"
  for n in $(nodes "$c"); do
    mkdir -p "$STATE/$c/spool/$n" "/tmp/hpcai-slurm/$n"
    alive "$RUN/$c/slurmd-$n.pid" || { log "starting slurmd -N $n ($c)"; slurmd -N "$n" || fail "slurmd -N $n failed"; }
  done
  for _ in $(seq 1 120); do
    [ "$(sinfo -h -N -t idle,mixed,allocated -o '%N' 2>/dev/null | sort -u | wc -l)" -ge 2 ] && break
    sleep 0.5
  done
  [ "$(sinfo -h -N -t idle,mixed,allocated -o '%N' | sort -u | wc -l)" -ge 2 ] || fail "the nodes of $c are not up"
  out=$(timeout 60 srun -N 2 -n 2 printenv SLURM_CLUSTER_NAME 2>&1 | sort -u) || fail "srun on $c failed: $out"
  [ "$out" = "$c" ] || fail "a step on $c says it ran on '$out'"
done

# --- self-check: the database routes between the clusters --------------------------------------
SLURM_CONF=$(conf alpha)
for _ in $(seq 1 60); do  # each slurmctld registers its address with slurmdbd once it is up
  [ "$(sacctmgr -n -P list cluster format=cluster,controlport | grep -c -E '^(alpha|beta)\|[1-9]')" -eq 2 ] && break
  sleep 0.5
done
job=$(sbatch --parsable --clusters=beta --output=/dev/null --wrap 'sleep 2') || fail "sbatch --clusters=beta failed"
[ "${job#*;}" = beta ] || fail "sbatch --parsable --clusters=beta answered '$job' (no ';beta')"
squeue -M beta --noheader --format=%i | grep -qx "${job%;*}" || fail "squeue -M beta does not list job ${job%;*}"
# --- slurmrestd in front of alpha, JWT only, on loopback (`hpcai submit --rest`) -----------------
# It runs as nobody (it refuses root and SlurmUser) with SLURM_JWT=daemon: without it, it refuses
# every token ("Rejecting thread config token"). A token: `scontrol token` (SLURM_JWT=...).
if ! alive "$RUN/rest/slurmrestd.pid"; then
  mkdir -p "$RUN/rest" "$LOGS/rest"
  log "starting slurmrestd on http://127.0.0.1:$REST_PORT (rest_auth/jwt, alpha)"
  SLURM_JWT=daemon setsid slurmrestd -a rest_auth/jwt -s openapi/v0.0.38 -u "$(id -u nobody)" -g "$(id -g nobody)" \
    "127.0.0.1:$REST_PORT" </dev/null >>"$LOGS/rest/slurmrestd.log" 2>&1 &
  echo $! >"$RUN/rest/slurmrestd.pid"
fi
token=$(scontrol token lifespan=60 | sed -n 's/^SLURM_JWT=//p')
[ -n "$token" ] || fail "scontrol token gave no token (is auth/jwt loaded in slurmctld?)"
for _ in $(seq 1 40); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $token" \
    "http://127.0.0.1:$REST_PORT/slurm/v0.0.38/ping" || true)
  [ "$code" = 200 ] && break
  sleep 0.5
done
[ "$code" = 200 ] || fail "slurmrestd does not answer a ping with a token (HTTP $code; see $LOGS/rest/slurmrestd.log)"
log "clusters up: alpha ($(nodes alpha)) and beta ($(nodes beta)), one slurmdbd, slurmrestd on 127.0.0.1:$REST_PORT; SLURM_CONF=$ETC/CLUSTER/slurm.conf"
