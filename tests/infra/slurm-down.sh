#!/usr/bin/env bash
# Stop the Slurm test cluster started by slurm-up.sh: every slurmd, then slurmctld.
# munged is left running (other tools may use it). Safe to call when nothing runs.
set -uo pipefail

RUN=/run/hpcai-slurm
log() { printf 'slurm-down: %s\n' "$*" >&2; }

stop() {  # stop PIDFILE: TERM the daemon named in it, KILL after 10 s
  local pidfile=$1 pid
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $(basename "$pidfile" .pid) (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$pidfile"
}

for pidfile in "$RUN"/slurmd-*.pid; do
  [ -e "$pidfile" ] && stop "$pidfile"
done
stop "$RUN/slurmctld.pid"
exit 0
