#!/usr/bin/env bash
# Stop what slurm-multi-up.sh started: each cluster's slurmd and slurmctld, slurmdbd, and (unless
# --keep-db) MariaDB. The data (state, database) stays. Safe to call when nothing runs.
set -uo pipefail
RUN=/run/hpcai-slurm-multi
log() { printf 'slurm-multi-down: %s\n' "$*" >&2; }
stop() {  # stop PIDFILE: TERM, KILL after 10 s
  local pid
  [ -s "$1" ] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $(basename "$(dirname "$1")")/$(basename "$1" .pid) (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$1"
}
stop "$RUN/rest/slurmrestd.pid"
for c in alpha beta; do
  for f in "$RUN/$c"/slurmd-*.pid; do [ -e "$f" ] && stop "$f"; done
  stop "$RUN/$c/slurmctld.pid"
done
stop "$RUN/dbd/slurmdbd.pid"
[ "${1:-}" = --keep-db ] || stop "$RUN/mysql/mariadbd.pid"
exit 0
