#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# slurm-down.sh - stop ONLY the daemons slurm-up.sh started, by their pid
# files in $SLURM_CI_DIR/pids (each pid is checked against its process name
# before it is signalled).  Running jobs are cancelled first so that their
# slurmstepd processes exit.  SLURM_DOWN_PURGE=1 also deletes $SLURM_CI_DIR.
set -uo pipefail
DIR=${SLURM_CI_DIR:-/tmp/slurm-ci}
log() { printf '[slurm-down %s] %s\n' "$(date +%T)" "$*" >&2; }
[ -d "$DIR/pids" ] || { log "nothing to stop ($DIR/pids missing)"; exit 0; }
export SLURM_CONF="$DIR/etc/slurm.conf"

# alive PIDFILE COMM -> print pid if alive and named COMM
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ] && echo "$pid"
}
# stop COMM PIDFILE... : TERM all at once, wait up to 10 s, then KILL
stop() {
  local comm=$1 f pid i pids=(); shift
  for f in "$@"; do
    [ -e "$f" ] || continue
    if pid=$(alive "$f" "$comm"); then kill -TERM "$pid" 2>/dev/null && pids+=("$pid"); fi
    rm -f "$f"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  for ((i = 0; i < 100; i++)); do
    left=(); for pid in "${pids[@]}"; do [ -d "/proc/$pid" ] && left+=("$pid"); done
    [ ${#left[@]} -eq 0 ] && break; sleep 0.1
  done
  for pid in "${pids[@]}"; do
    [ -d "/proc/$pid" ] && { log "$comm $pid ignored TERM, sending KILL"; kill -KILL "$pid" 2>/dev/null; }
  done
  log "stopped $comm: ${pids[*]}"
}

# 1. cancel jobs of this cluster (only while our slurmctld is up)
if alive "$DIR/pids/slurmctld.pid" slurmctld >/dev/null && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
  scancel --full $(squeue -h -o %i) 2>/dev/null
  for ((i = 0; i < 100; i++)); do [ -z "$(squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  log "cancelled jobs"
fi
# 2. daemons: REST + slurmd first, controller last, munge only if we started it
stop slurmrestd "$DIR/pids/slurmrestd.pid" "$DIR/pids/slurmrestd-unix.pid"
stop slurmd "$DIR"/pids/slurmd-*.pid
stop slurmctld "$DIR/pids/slurmctld.pid"
stop munged "$DIR/pids/munged.pid"
rm -f "$DIR/run/slurmrestd.sock"
[ "${SLURM_DOWN_PURGE:-0}" = 1 ] && rm -rf "${DIR:?}" && log "removed $DIR"
log "down"
