#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# with-test-slurm.sh CMD... - run CMD with the test Slurm up.
#
# A Slurm that is already running (started by hand, by .ci/run, or by an
# outer with-test-slurm.sh) is reused and left running. Otherwise this
# script starts one with hack/slurm-up.sh (installing its Debian packages
# on first use) and stops it with hack/slurm-down.sh when CMD ends, also
# when CMD fails or on Ctrl-C: it stops only what it started.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export SLURM_CI_DIR=${SLURM_CI_DIR:-/tmp/slurm-ci}

running() {
  local pid
  pid=$(cat "$SLURM_CI_DIR/pids/slurmctld.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmctld ]
}

if running; then
  # Idempotent: checks every daemon and restarts only what is missing.
  "$here/slurm-up.sh" >/dev/null 2>&1 || "$here/slurm-up.sh"
  exec "$@"
fi

stop() { "$here/slurm-down.sh" || true; }
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "with-test-slurm: starting the test Slurm (hack/slurm-up.sh); it stops when '$*' ends" >&2
"$here/slurm-up.sh"
"$@"
