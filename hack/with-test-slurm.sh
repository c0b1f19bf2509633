#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# with-test-slurm.sh CMD... - run CMD with both test Slurms up: 22.05 on the
# host (hack/slurm-up.sh) and 24.11 in a Debian trixie chroot
# (hack/slurm24-up.sh), so the live suite runs against both.
#
# A Slurm that is already running (started by hand, by .ci/run, or by an
# outer with-test-slurm.sh) is reused and left running. Otherwise this
# script starts it (installing its Debian packages, or making the chroot,
# on first use) and stops it when CMD ends, also when CMD fails or on
# Ctrl-C: it stops only what it started.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export SLURM_CI_DIR=${SLURM_CI_DIR:-/tmp/slurm-ci}
chroot_dir=$(readlink -m "${SLURM24_CHROOT:-/var/tmp/trixie}")
export SLURM24_HOSTDIR=${SLURM24_HOSTDIR:-$chroot_dir${SLURM24_DIR:-/var/tmp/slurm24}}

# alive PIDFILE COMM: the pid in PIDFILE runs COMM.
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

started=()
stop() {
  local s
  for s in "${started[@]}"; do "$here/$s-down.sh" || true; done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for s in slurm slurm24; do
  case $s in
    slurm) pidfile=$SLURM_CI_DIR/pids/slurmctld.pid ;;
    slurm24) pidfile=$SLURM24_HOSTDIR/pids/slurmctld.pid ;;
  esac
  if alive "$pidfile" slurmctld; then
    # Idempotent: checks every daemon and restarts only what is missing.
    "$here/$s-up.sh" >/dev/null 2>&1 || "$here/$s-up.sh" >/dev/null
    continue
  fi
  echo "with-test-slurm: starting hack/$s-up.sh; it stops when '$*' ends" >&2
  started+=("$s")
  "$here/$s-up.sh" >/dev/null
done
"$@"
