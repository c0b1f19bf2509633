#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# From the team's reference ../shared/reference/slurm-24.11/slurm24-down.sh (its NOTES.md
# has every pitfall found); used by hack/with-test-slurm.sh for the live suite on 24.11.
#
# slurm24-down.sh - stop ONLY the daemons slurm24-up.sh started, by the pid
# files in $SLURM24_CHROOT$SLURM24_DIR/pids. Each pid is checked against its
# process name AND its root directory (/proc/PID/root = the chroot) before it
# is signalled, so a 22.05 cluster on the host with the same daemon names is
# never touched. Running jobs are cancelled first so that their slurmstepd
# processes exit. Then the mounts that slurm24-up.sh made (recorded in
# pids/mounts) are unmounted, unless some other process still runs in the
# chroot. The chroot itself is left in place.
#   SLURM24_DOWN_PURGE=1  also delete the state dir (not the chroot)
#   SLURM24_KEEP_MOUNTS=1 leave the mounts (used by slurm24-up.sh on restart)
set -uo pipefail
CHROOT=$(readlink -f "${SLURM24_CHROOT:-/var/tmp/trixie}")
DIR=${SLURM24_DIR:-/var/tmp/slurm24}
H=$CHROOT$DIR
CONF=$DIR/etc/slurm.conf
log() { printf '[slurm24-down %s] %s\n' "$(date +%T)" "$*" >&2; }
[ -d "$H/pids" ] || { log "nothing to stop ($H/pids missing)"; exit 0; }
in_chroot() {
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C SLURM_CONF="$CONF" chroot "$CHROOT" "$@"
}
# alive PIDFILE COMM -> print pid if alive, named COMM and inside our chroot
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] \
    && [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$CHROOT" ] && echo "$pid"
}
# in_root: pids of every process whose root is the chroot
in_root() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$CHROOT" ] && echo "${p#/proc/}"
  done
  return 0
}
# running PID: exists and is not a zombie
running() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# stop COMM PIDFILE... : TERM all at once, wait up to 10 s, then KILL
stop() {
  local comm=$1 f pid i left pids=(); shift
  for f in "$@"; do
    [ -e "$f" ] || continue
    if pid=$(alive "$f" "$comm"); then kill -TERM "$pid" 2>/dev/null && pids+=("$pid"); fi
    rm -f "$f"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  for ((i = 0; i < 100; i++)); do
    left=(); for pid in "${pids[@]}"; do running "$pid" && left+=("$pid"); done
    [ ${#left[@]} -eq 0 ] && break; sleep 0.1
  done
  for pid in "${pids[@]}"; do
    running "$pid" && { log "$comm $pid ignored TERM, sending KILL"; kill -KILL "$pid" 2>/dev/null; }
  done
  log "stopped $comm: ${pids[*]}"
}

# 1. cancel this cluster's jobs (only while our slurmctld is up)
if alive "$H/pids/slurmctld.pid" slurmctld >/dev/null; then
  jobs=$(in_chroot squeue -h -o %i 2>/dev/null)
  if [ -n "$jobs" ]; then
    in_chroot scancel --full $jobs 2>/dev/null
    for ((i = 0; i < 100; i++)); do [ -z "$(in_chroot squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.2; done
    log "cancelled jobs: $(echo $jobs)"
  fi
fi
# 2. daemons: REST + slurmd first, controller last, munge only if we started it
stop slurmrestd "$H/pids/slurmrestd.pid" "$H/pids/slurmrestd-unix.pid"
stop slurmd "$H"/pids/slurmd-*.pid
stop slurmctld "$H/pids/slurmctld.pid"
# slurmstepd of a cancelled job may need a moment after its slurmd is gone
for ((i = 0; i < 50; i++)); do
  s=""; for p in $(in_root); do [ "$(cat /proc/$p/comm 2>/dev/null)" = slurmstepd ] && s="$s $p"; done
  [ -z "$s" ] && break; sleep 0.2
done
[ -n "$s" ] && log "WARNING: slurmstepd still running in the chroot:$s"
stop munged "$H/pids/munged.pid"
rm -f "$H/run/slurmrestd.sock"

# 3. mounts made by slurm24-up.sh, if nothing runs in the chroot any more
if [ "${SLURM24_KEEP_MOUNTS:-0}" != 1 ] && [ -s "$H/pids/mounts" ]; then
  rest=$(in_root | tr '\n' ' ')
  if [ -n "$rest" ]; then
    log "WARNING: not unmounting, processes still run in $CHROOT: $rest"
  else
    for m in $(tac "$H/pids/mounts"); do
      mountpoint -q "$CHROOT/$m" && umount "$CHROOT/$m" && log "unmounted $CHROOT/$m"
    done
    rm -f "$H/pids/mounts"
  fi
fi
left=$(in_root | tr '\n' ' ')
[ -n "$left" ] && log "processes still inside $CHROOT (not started by slurm24-up.sh or not stopped): $left"
if [ "${SLURM24_DOWN_PURGE:-0}" = 1 ]; then
  rm -rf "${H:?}" && log "removed $H"
  [ -L "$DIR" ] && [ "$(readlink "$DIR")" = "$H" ] && rm -f "$DIR"
fi
log "down"
