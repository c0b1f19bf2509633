#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# From the team's reference ../shared/reference/slurm-24.11/slurm24-up.sh (its NOTES.md
# has every pitfall found); used by hack/with-test-slurm.sh for the live suite on 24.11.
#
# slurm24-up.sh - run a small, real Slurm 24.11 cluster (Debian trixie
# packages) on ONE Debian 12 machine, inside a chroot, for tests:
# munge + slurmctld + N slurmd (one per node, distinct ports; the Debian build
# has MULTIPLE_SLURMD) with fake GPU GRES, topology/tree (or topology/block),
# and two slurmrestd (JWT on 127.0.0.1 TCP, local auth on a unix socket).
# Every daemon runs inside the chroot and binds 127.0.0.1 only; nothing is
# installed on the host except, if the chroot must be made, debootstrap.
#
# Idempotent: re-running while it is up only checks and re-writes the env
# file (a changed configuration restarts the cluster). Logs go to stderr; the
# only stdout line is the env file's path. Needs root (chroot, mount, mknod,
# slurmd) and, on the host, curl, ss (iproute2), util-linux, coreutils.
# Stop with slurm24-down.sh (same environment). See NOTES.md.
#
# Tunables (env):
#   SLURM24_CHROOT     chroot directory                 (default /var/tmp/trixie)
#   SLURM24_SUITE / SLURM24_MIRROR  for debootstrap     (trixie; debootstrap's default mirror)
#   SLURM24_DIR        state/config/log dir, as a path INSIDE the chroot
#                      (default /var/tmp/slurm24; on the host it is
#                      $SLURM24_CHROOT$SLURM24_DIR, and a symlink
#                      $SLURM24_DIR -> there is made on the host if free)
#   SLURM24_NODES      number of nodes gpu01..gpuNN     (default 8)
#   SLURM24_LEAVES     leaf switches / blocks           (default 2)
#   SLURM24_TOPOLOGY   tree | block | flat              (default tree)
#   SLURM24_GPUS       GPUs per node                    (default 8)
#   SLURM24_GPU_TYPE   optional GRES type, e.g. h100    (default none -> gpu:8)
#   SLURM24_CPUS       CPUs per node (2 sockets)        (default 16)
#   SLURM24_MEM_MB     RealMemory per node              (default 64000)
#   SLURM24_CTLD_PORT / SLURM24_SLURMD_PORT0 / SLURM24_REST_PORT
#                      (default 26817 / 27001.. / 26820: clear of a 22.05
#                      test cluster on 16817 / 17001.. / 6820)
#   SLURM24_SLURMD_TIMEOUT  seconds until a silent node is DOWN* (default 30)
#   SLURM24_UNIX_REST_USER  user of the unix-socket slurmrestd: root (default,
#                      read+write for root clients) or slurmrestd (read-only)
#   SLURM24_KEEP_STATE=1    keep slurmctld state (drains, jobs) across restarts
#   SLURMCTLD_FAKETIME      start slurmctld with its clock offset by libfaketime,
#                      e.g. -30s (tests of a skewed slurmctld; default none)
#   SLURM24_NO_INSTALL=1    never debootstrap / apt-get (fail if missing)
set -euo pipefail

CHROOT=${SLURM24_CHROOT:-/var/tmp/trixie}
SUITE=${SLURM24_SUITE:-trixie}
MIRROR=${SLURM24_MIRROR:-}   # empty: debootstrap's own default Debian mirror
DIR=${SLURM24_DIR:-/var/tmp/slurm24}
NODES=${SLURM24_NODES:-8}
LEAVES=${SLURM24_LEAVES:-2}
TOPOLOGY=${SLURM24_TOPOLOGY:-tree}
GPUS=${SLURM24_GPUS:-8}
GPU_TYPE=${SLURM24_GPU_TYPE:-}
CPUS=${SLURM24_CPUS:-16}
MEM=${SLURM24_MEM_MB:-64000}
CTLD_PORT=${SLURM24_CTLD_PORT:-26817}
SLURMD_PORT0=${SLURM24_SLURMD_PORT0:-27001}
REST_PORT=${SLURM24_REST_PORT:-26820}
SLURMD_TIMEOUT=${SLURM24_SLURMD_TIMEOUT:-30}
REST_USER=slurmrestd
# slurm-wlm-jwt-plugin is still a separate package in trixie: it holds
# auth_jwt.so (AuthAltTypes=auth/jwt, `scontrol token`). rest_auth_jwt.so
# (slurmrestd -a rest_auth/jwt) is in slurm-wlm-basic-plugins.
PKGS="munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin faketime"

T0=$(date +%s.%N)
log() { printf '[slurm24-up %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
[ "$(id -u)" = 0 ] || die "must run as root"
case "$DIR" in /*) ;; *) die "SLURM24_DIR must be absolute" ;; esac
case "$TOPOLOGY" in tree|block|flat) ;; *) die "SLURM24_TOPOLOGY must be tree, block or flat" ;; esac
mkdir -p "$CHROOT"
CHROOT=$(readlink -f "$CHROOT")
H=$CHROOT$DIR                 # the state dir as seen from the host
CONF=$DIR/etc/slurm.conf      # as seen inside the chroot

# in_chroot CMD... : run CMD inside the chroot with a clean environment (no
# host SLURM_* / PATH leaks; SLURM_JWT in particular must never be set there).
in_chroot() {
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C SLURM_CONF="$CONF" \
    chroot "$CHROOT" "$@"
}
# pid_alive PIDFILE COMM -> true if the pid in PIDFILE is alive, is COMM and
# runs inside OUR chroot (a 22.05 cluster on the host has the same names).
pid_alive() {
  local f=$1 comm=$2 pid
  [ -s "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 1
  [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$CHROOT" ]
}
# wait_for SECONDS CMD... -> poll CMD every 0.2 s
wait_for() {
  local t=$1; shift
  local end=$(( $(date +%s) + t ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.2
  done
}
port_busy() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }
need_port() { ! port_busy "$1" || die "port $1 ($2) is already in use: $(ss -Hltnp "sport = :$1" | head -1)"; }

# ---------------------------------------------------------------- 1. chroot
if [ ! -x "$CHROOT/usr/bin/apt-get" ]; then
  [ "${SLURM24_NO_INSTALL:-0}" != 1 ] || die "$CHROOT is not a Debian chroot and SLURM24_NO_INSTALL=1"
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap on the host"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  fi
  log "debootstrap --variant=minbase $SUITE $CHROOT $MIRROR (a few minutes)"
  debootstrap --variant=minbase "$SUITE" "$CHROOT" ${MIRROR:+"$MIRROR"} >"$CHROOT.debootstrap.log" 2>&1 \
    || die "debootstrap failed, see $CHROOT.debootstrap.log (remove $CHROOT before retrying)"
  log "chroot created in $(since "$T0") s"
fi
mkdir -p "$H"/{etc,state,spool,log,pids,dev,run,bin,work}
chmod 755 "$H" "$H/run"
# host convenience symlink: the same path works on the host and in the chroot
if [ ! -e "$DIR" ] && [ ! -L "$DIR" ]; then mkdir -p "$(dirname "$DIR")"; ln -s "$H" "$DIR"; fi

# Mounts: only /proc (slurmd/slurmstepd/proctrack read it; munged and apt want
# it). No /sys, /dev, /dev/pts: the debootstrap /dev holds null/zero/urandom/
# tty/ptmx, and the configuration below needs no cgroups or hwloc sysfs.
# A mount that this script made is recorded so that down unmounts only those.
if ! mountpoint -q "$CHROOT/proc"; then
  mount -t proc proc "$CHROOT/proc"
  echo proc >> "$H/pids/mounts"
  log "mounted $CHROOT/proc"
fi
# apt's services must not start inside the chroot (the munge postinst would
# start a munged that nobody records): policy-rc.d "101 = action forbidden".
if [ ! -x "$CHROOT/usr/sbin/policy-rc.d" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$CHROOT/usr/sbin/policy-rc.d"; chmod 755 "$CHROOT/usr/sbin/policy-rc.d"
fi
# debootstrap leaves no /etc/hosts: "localhost" would go to DNS and fail.
grep -qs '^127\.0\.0\.1[[:space:]].*localhost' "$CHROOT/etc/hosts" \
  || printf '127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost\n' "$(hostname)" >> "$CHROOT/etc/hosts"

# ---------------------------------------------------------------- 2. packages
T1=$(date +%s.%N)
missing=""
for p in $PKGS; do
  in_chroot dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  [ "${SLURM24_NO_INSTALL:-0}" != 1 ] || die "missing in chroot:$missing and SLURM24_NO_INSTALL=1"
  log "apt-get install in the chroot:$missing"
  in_chroot apt-get update -qq >"$H/log/apt-update.log" 2>&1 || { cat "$H/log/apt-update.log" >&2; die "apt-get update failed"; }
  in_chroot env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing \
    >"$H/log/apt-install.log" 2>&1 || { tail -20 "$H/log/apt-install.log" >&2; die "apt-get install failed"; }
  in_chroot apt-get clean
  log "installed in $(since "$T1") s"
fi
VERSION=$(in_chroot /usr/sbin/slurmctld -V | awk '{print $2}')
log "slurm $VERSION, munge $(in_chroot dpkg-query -W -f='${Version}' munge) in $CHROOT"

# ---------------------------------------------------------------- 3. layout
T2=$(date +%s.%N)
in_chroot id -u "$REST_USER" >/dev/null 2>&1 \
  || in_chroot useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$REST_USER"
# Fake GPU device nodes for gres.conf File= (a file-less GPU is dropped and
# the node goes INVAL); they must be real char devices.
for ((g = 0; g < GPUS; g++)); do
  [ -e "$H/dev/nvidia$g" ] || mknod "$H/dev/nvidia$g" c 195 "$g"
done
[ -s "$H/etc/jwt_hs256.key" ] || dd if=/dev/urandom of="$H/etc/jwt_hs256.key" bs=32 count=1 status=none
chmod 600 "$H/etc/jwt_hs256.key"

# ---------------------------------------------------------------- 4. configs
last=$(printf '%02d' "$NODES")
NODELIST="gpu[01-$last]"
[ "$NODES" -eq 1 ] && NODELIST=gpu01
lastport=$(( SLURMD_PORT0 + NODES - 1 ))
if [ -n "$GPU_TYPE" ]; then GRES="gpu:$GPU_TYPE:$GPUS"; GTYPE=" Type=$GPU_TYPE"; else GRES="gpu:$GPUS"; GTYPE=""; fi
TOPO_LINE="TopologyPlugin=topology/$TOPOLOGY"
[ "$TOPOLOGY" = flat ] && TOPO_LINE="# TopologyPlugin unset (flat)"
TMPC=$(mktemp -d)
cat > "$TMPC/slurm.conf" <<EOF
# generated by slurm24-up.sh (Slurm $VERSION in $CHROOT; paths are chroot paths)
ClusterName=ci24
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT0
# bind slurmctld/slurmd to the node address (127.0.0.1), not INADDR_ANY
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$DIR/etc/jwt_hs256.key
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/pids/slurmctld.pid
SlurmdPidFile=$DIR/pids/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
# The 24.11 packages ship no task_none, jobacct_gather_none,
# accounting_storage_none or jobcomp_none plugin (only e.g. task_affinity,
# task_cgroup): leave TaskPlugin, JobAcctGatherType, AccountingStorageType
# and JobCompType unset (= none).
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
GresTypes=gpu
# No AccountingStorageTRES=gres/gpu: without slurmdbd slurmctld exits with
# "fatal: slurmdbd is required to run with TRES gres/gpu". So GPUs appear in
# gres/gres_used only, never in tres/tres_used (as with 22.05).
$TOPO_LINE
# use the CPUs/memory/GRES written below, not the real hardware
SlurmdParameters=config_overrides
# 1: admin DOWN stays DOWN; nodes DOWN only for not responding come back
ReturnToService=1
SlurmctldTimeout=30
SlurmdTimeout=$SLURMD_TIMEOUT
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
NodeName=$NODELIST NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$SLURMD_PORT0-$lastport] CPUs=$CPUS Sockets=2 CoresPerSocket=$((CPUS / 2)) ThreadsPerCore=1 RealMemory=$MEM Gres=$GRES State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
# 24.11 slurmd initializes a cgroup plugin even with proctrack/linuxproc and
# no TaskPlugin ("cgroup filesystem not mounted in /sys/fs/cgroup/", "Unable
# to initialize cgroup plugin", slurmd exits): turn cgroups off altogether.
cat > "$TMPC/cgroup.conf" <<EOF
# generated by slurm24-up.sh
CgroupPlugin=disabled
EOF
cat > "$TMPC/gres.conf" <<EOF
# generated by slurm24-up.sh - fake devices, no real GPU needed
AutoDetect=off
NodeName=$NODELIST Name=gpu$GTYPE File=$DIR/dev/nvidia[0-$((GPUS - 1))]
EOF
# leaf l gets nodes [first, end]; tree: leaf switches under one spine;
# block: the same groups as blocks, BlockSizes = base size then doublings.
per=$(( (NODES + LEAVES - 1) / LEAVES ))
{
  echo "# generated by slurm24-up.sh: topology/$TOPOLOGY, $LEAVES groups of up to $per nodes"
  first=1; nl=0
  for ((l = 1; l <= LEAVES && first <= NODES; l++)); do
    end=$(( first + per - 1 )); [ $end -gt "$NODES" ] && end=$NODES
    if [ $first -eq $end ]; then n=$(printf 'gpu%02d' $first); else n=$(printf 'gpu[%02d-%02d]' $first $end); fi
    if [ "$TOPOLOGY" = block ]; then echo "BlockName=block$l Nodes=$n"; else echo "SwitchName=leaf$l Nodes=$n"; fi
    nl=$l; first=$(( end + 1 ))
  done
  if [ "$TOPOLOGY" = block ]; then
    sizes=$per; s=$per; while [ $(( s * 2 )) -le $(( per * nl )) ]; do s=$(( s * 2 )); sizes="$sizes,$s"; done
    echo "BlockSizes=$sizes"
  elif [ "$nl" -gt 1 ]; then echo "SwitchName=spine Switches=leaf[1-$nl]"
  else echo "SwitchName=spine Switches=leaf1"; fi
} > "$TMPC/topology.conf"
[ "$TOPOLOGY" = flat ] && rm -f "$TMPC/topology.conf"

changed=0
for f in slurm.conf cgroup.conf gres.conf topology.conf; do
  if [ -e "$TMPC/$f" ] || [ -e "$H/etc/$f" ]; then cmp -s "$TMPC/$f" "$H/etc/$f" || changed=1; fi
done
if [ $changed = 1 ]; then
  if pid_alive "$H/pids/slurmctld.pid" slurmctld; then
    log "configuration changed: restarting the cluster"
    SLURM24_KEEP_MOUNTS=1 bash "$(dirname "$(readlink -f "$0")")/slurm24-down.sh" || true
  fi
  rm -f "$H/etc/topology.conf"
  cp "$TMPC"/*.conf "$H/etc/"
fi
rm -rf "$TMPC"

# host-side wrappers: $H/bin/{scontrol,sinfo,squeue,sbatch,scancel,srun,...}
# run the chroot's 24.11 clients (the host may have 22.05 ones, which cannot
# talk to 24.11). They cd to $DIR/work so that slurm-%j.out lands there.
for c in scontrol sinfo squeue sbatch scancel srun sprio sshare sdiag; do
  cat > "$H/bin/$c" <<EOF
#!/bin/sh
# generated by slurm24-up.sh: Slurm $VERSION client from $CHROOT
exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C SLURM_CONF=$CONF \\
  chroot $CHROOT /bin/sh -c 'cd $DIR/work && exec "\$0" "\$@"' /usr/bin/$c "\$@"
EOF
  chmod 755 "$H/bin/$c"
done

# ---------------------------------------------------------------- 5. munge
# The chroot's own munged: socket /run/munge/munge.socket.2 INSIDE the chroot
# (= $CHROOT/run/munge/munge.socket.2 on the host), its own key; the host's
# munged (a 22.05 cluster's) is never touched.
if pid_alive "$H/pids/munged.pid" munged; then
  log "munged already running (pid $(cat "$H/pids/munged.pid"))"
elif in_chroot sh -c 'munge -n | unmunge' >/dev/null 2>&1; then
  log "munged already answering in the chroot, not ours (reusing it, down leaves it)"
else
  in_chroot sh -c '[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key'
  in_chroot sh -c 'mkdir -p /run/munge /var/log/munge /var/lib/munge &&
    chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge &&
    chmod 400 /etc/munge/munge.key && chmod 755 /run/munge && rm -f /run/munge/munged.pid'
  in_chroot runuser -u munge -- /usr/sbin/munged      # daemonizes
  wait_for 10 in_chroot sh -c 'munge -n | unmunge' || die "munged did not start; see $CHROOT/var/log/munge/munged.log"
  cp "$CHROOT/run/munge/munged.pid" "$H/pids/munged.pid"   # ours: slurm24-down stops it
  log "munged started (pid $(cat "$H/pids/munged.pid"))"
fi

# ---------------------------------------------------------------- 6. slurmctld
if pid_alive "$H/pids/slurmctld.pid" slurmctld; then
  log "slurmctld already running (pid $(cat "$H/pids/slurmctld.pid"))"
else
  need_port "$CTLD_PORT" slurmctld
  if [ "${SLURM24_KEEP_STATE:-0}" != 1 ]; then rm -rf "${H:?}/state"/*; fi
  in_chroot ${SLURMCTLD_FAKETIME:+env FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f "$SLURMCTLD_FAKETIME"} \
    /usr/sbin/slurmctld -f "$CONF" -i
  wait_for 20 in_chroot scontrol ping || die "slurmctld not answering; see $H/log/slurmctld.log"
  log "slurmctld started (pid $(cat "$H/pids/slurmctld.pid"))${SLURMCTLD_FAKETIME:+, clock offset $SLURMCTLD_FAKETIME}"
fi

# ---------------------------------------------------------------- 7. slurmd x N
started=0
for ((i = 1; i <= NODES; i++)); do
  n=$(printf 'gpu%02d' $i)
  pid_alive "$H/pids/slurmd-$n.pid" slurmd && continue
  need_port $(( SLURMD_PORT0 + i - 1 )) "slurmd $n"
  mkdir -p "$H/spool/$n"
  in_chroot /usr/sbin/slurmd -f "$CONF" -N "$n"
  started=$((started + 1))
done
log "slurmd: started $started of $NODES"
# registered = state without '*' (not responding), not unknown, not invalid
all_registered() { [ "$(in_chroot sinfo -h -N -o '%N %t' | awk '$2 !~ /[*]|unk|inval/' | sort -u | wc -l)" -ge "$NODES" ]; }
wait_for 60 all_registered || { in_chroot sinfo -N >&2; die "not all $NODES nodes registered"; }

# ---------------------------------------------------------------- 8. slurmrestd
# Two instances (as with 22.05; one process cannot do both auth modes):
#  a) 127.0.0.1:$REST_PORT, rest_auth/jwt: headers X-SLURM-USER-NAME and
#     X-SLURM-USER-TOKEN (from `scontrol token`), forwarded to slurmctld, so
#     requests run as the token's user (root: node update, job submit work).
#     slurmrestd refuses to run as root or SlurmUser: -u $REST_USER (it drops
#     to that user after opening the TCP socket).
#  b) unix socket, rest_auth/local: identity = the peer's uid, which must be
#     slurmrestd's own uid (others get HTTP 401), and slurmrestd then talks to
#     slurmctld with munge AS ITSELF. Run as $REST_USER, root's reads work but
#     every write fails (HTTP 500, error 2010 "Invalid user id"). So by
#     default it runs as root, allowed by SLURMRESTD_SECURITY=disable_user_check
#     (become_user is refused: "should not be run as SlurmUser", SlurmUser=root).
#     SLURM24_UNIX_REST_USER=slurmrestd gives the read-only variant.
UNIX_USER=${SLURM24_UNIX_REST_USER:-root}
REST_ARGS=(-f "$CONF" -s openapi/slurmctld)
rest_tcp_up() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$REST_PORT/slurm/v0.0.42/ping")" = 401 ]; }
if pid_alive "$H/pids/slurmrestd.pid" slurmrestd; then
  log "slurmrestd (jwt) already running (pid $(cat "$H/pids/slurmrestd.pid"))"
else
  need_port "$REST_PORT" slurmrestd
  # setsid in a non-interactive shell does not fork: $! is slurmrestd's pid
  setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C SLURM_CONF="$CONF" SLURM_JWT=daemon \
      chroot "$CHROOT" /usr/sbin/slurmrestd "${REST_ARGS[@]}" -u "$REST_USER" -a rest_auth/jwt "127.0.0.1:$REST_PORT" \
      </dev/null >"$H/log/slurmrestd.log" 2>&1 &
  echo $! > "$H/pids/slurmrestd.pid"
  wait_for 15 rest_tcp_up || die "slurmrestd (jwt) not answering; see $H/log/slurmrestd.log"
  pid_alive "$H/pids/slurmrestd.pid" slurmrestd || die "slurmrestd pid file does not match"
  log "slurmrestd (jwt) started (pid $(cat "$H/pids/slurmrestd.pid")) on 127.0.0.1:$REST_PORT"
fi
SOCK=$DIR/run/slurmrestd.sock
if pid_alive "$H/pids/slurmrestd-unix.pid" slurmrestd; then
  log "slurmrestd (unix) already running (pid $(cat "$H/pids/slurmrestd-unix.pid"))"
else
  rm -f "$H/run/slurmrestd.sock"
  if [ "$UNIX_USER" = root ]; then
    in_chroot chown root "$DIR/run"
    UNIX_ENV=(SLURMRESTD_SECURITY=disable_user_check); UNIX_ARGS=()
  else
    # the unix socket is bound after setuid: its directory belongs to the user
    in_chroot chown "$UNIX_USER" "$DIR/run"
    UNIX_ENV=(); UNIX_ARGS=(-u "$UNIX_USER")
  fi
  setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C SLURM_CONF="$CONF" "${UNIX_ENV[@]}" \
      chroot "$CHROOT" /usr/sbin/slurmrestd "${REST_ARGS[@]}" "${UNIX_ARGS[@]}" -a rest_auth/local "unix:$SOCK" \
      </dev/null >"$H/log/slurmrestd-unix.log" 2>&1 &
  echo $! > "$H/pids/slurmrestd-unix.pid"
  wait_for 15 curl -sf --unix-socket "$H/run/slurmrestd.sock" http://localhost/slurm/v0.0.42/ping \
    || die "slurmrestd (unix) not answering; see $H/log/slurmrestd-unix.log"
  pid_alive "$H/pids/slurmrestd-unix.pid" slurmrestd || die "slurmrestd (unix) pid file does not match"
  log "slurmrestd (unix, as $UNIX_USER) started (pid $(cat "$H/pids/slurmrestd-unix.pid")) on $H/run/slurmrestd.sock"
fi

# ---------------------------------------------------------------- 9. env file
TOKEN=$(in_chroot scontrol token username=root lifespan=86400 | sed 's/^SLURM_JWT=//')
umask 077; printf '%s\n' "$TOKEN" > "$H/etc/slurmrestd.token"; umask 022
HDR=(-H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $TOKEN")
curl -sf "${HDR[@]}" "http://127.0.0.1:$REST_PORT/slurm/v0.0.42/ping" >/dev/null || die "JWT request to slurmrestd failed"
# the served plugin versions, from the OpenAPI document itself
# (slurmrestd's JSON escapes '/' as '\/': "\/slurm\/v0.0.42\/nodes")
VERSIONS=$(curl -sf "${HDR[@]}" "http://127.0.0.1:$REST_PORT/openapi/v3" | sed 's#\\/#/#g' \
  | grep -o '"/slurm/v0\.0\.[0-9]*/' | sed 's#^"/slurm/##; s#/$##' | sort -uV | tr '\n' ' ' | sed 's/ $//')
[ -n "$VERSIONS" ] || die "could not read /openapi/v3"
LATEST=${VERSIONS##* }
cat > "$H/slurm24.env" <<EOF
# generated by slurm24-up.sh: Slurm $VERSION in $CHROOT ($(date -u +%FT%TZ))
export SLURM24_CHROOT=$CHROOT
export SLURM24_HOSTDIR=$H
# Slurm clients of this cluster (wrappers that chroot): \$SLURM24_BIN/scontrol ...
export SLURM24_BIN=$H/bin
export SLURM24_CONF_IN_CHROOT=$CONF
export SLURM24_VERSION=$VERSION
export SLURMRESTD_URL=http://127.0.0.1:$REST_PORT
export SLURMRESTD_SOCKET=$H/run/slurmrestd.sock
export SLURMRESTD_USER=root
export SLURMRESTD_TOKEN_FILE=$H/etc/slurmrestd.token
# NOT named SLURM_JWT: if SLURM_JWT is set, srun/sbatch switch to auth/jwt
export SLURMRESTD_TOKEN=$TOKEN
export SLURMRESTD_API_VERSIONS="$VERSIONS"
export SLURMRESTD_API_VERSION=$LATEST
EOF
# footprint of what this script started (RSS, MiB)
rss=0; np=0
for f in "$H"/pids/*.pid; do
  pid=$(cat "$f" 2>/dev/null) || continue
  [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$CHROOT" ] || continue
  r=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null) || continue
  rss=$((rss + ${r:-0})); np=$((np + 1))
done
log "up in $(since "$T0") s (daemons $(since "$T2") s): $NODES nodes, topology/$TOPOLOGY, API $VERSIONS, $np daemons, RSS $((rss / 1024)) MiB"
log "env: $H/slurm24.env"
in_chroot sinfo -N -o '%N %T %G %C' >&2
# the only line on stdout: the env file, for callers (`ENV=$(slurm24-up.sh)`)
echo "$H/slurm24.env"
