#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# cluster.sh up|down - two real one-node Kubernetes clusters on this machine
# for `make e2e` (hack/e2e/run.sh): "home", where sluice is installed, and
# "remote", the second control plane the overflow node's `kubernetes`
# provider runs production on. Each has etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, and a real kubelet on a
# containerd 2.x of its own with runc; home also has kube-proxy.
#
# Every address is on the bridge sluice-e2e this script creates, taken from
# the benchmarking range 198.18.0.0/15 (RFC 2544), so none is anyone's real
# network:
#
#	198.18.0.1, 198.18.0.2   home's and remote's node (and apiserver) address
#	198.18.1.0/24            home's pods       198.19.0.0/24  home's Services
#	198.18.2.0/24            remote's pods     198.19.1.0/24  remote's Services
#
# Service ranges are routed onto the bridge (kube-proxy's rules rewrite them
# to pods' addresses first; nothing else answers there) and a FORWARD rule
# drops whatever a pod sends off the bridge, so nothing is routed off the
# machine. Ports are below the
# ephemeral range (so test suites' random ports never meet them).
#
# `up` records every process it starts in $E2E_DIR/pids and every system
# setting it changes in $E2E_DIR/saved; `down` stops exactly those (by PID,
# and containerd's shims by their socket), removes what the clusters
# mounted and created, and restores the settings. `down` is safe to run
# twice and after a failed `up`.
#
# Needs root, runc, the CNI plugins, iptables and conntrack (run.sh installs
# the Debian packages) and the binaries in $E2E_BIN (run.sh builds them).
set -euo pipefail

E2E_DIR=${E2E_DIR:-/var/tmp/sluice-e2e}
E2E_BIN=${E2E_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/bin/e2e}
BRIDGE=sluice-e2e
CLUSTERS="home remote"
W=$E2E_DIR
B=$E2E_BIN
# containerd finds its shim on PATH.
export PATH=$B:$PATH
ARCH=$(dpkg --print-architecture)

# Per cluster: node IP, pod and Service range, and ports.
node_ip() { case $1 in home) echo 198.18.0.1 ;; remote) echo 198.18.0.2 ;; esac; }
pod_net() { case $1 in home) echo 198.18.1 ;; remote) echo 198.18.2 ;; esac; }
svc_net() { case $1 in home) echo 198.19.0 ;; remote) echo 198.19.1 ;; esac; }
port() { # cluster component
	local base
	case $1 in home) base=0 ;; remote) base=10 ;; esac
	case $2 in
	etcd) echo $((12379 + base)) ;;
	etcd-peer) echo $((12380 + base)) ;;
	apiserver) echo $((16443 + base / 10)) ;;
	kcm) echo $((11257 + base)) ;;
	scheduler) echo $((11259 + base)) ;;
	kubelet-healthz) echo $((11248 - base)) ;;
	esac
}

t0=$(date +%s.%N)
log() { printf '[e2e %6.1fs] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*"; }

start() { # cluster name cmd...
	local c=$1 n=$2
	shift 2
	mkdir -p "$W/pids" "$W/$c/logs"
	nohup "$@" >"$W/$c/logs/$n.log" 2>&1 &
	# The PID and its start time: `down` signals only the same process.
	local pid=$! started
	started=$(starttime $pid)
	if [ -z "$started" ]; then
		echo "cluster.sh: $c $n exited at once; its log: $W/$c/logs/$n.log" >&2
		return 1
	fi
	echo "$pid $started" >"$W/pids/$c-$n"
}

starttime() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null; }

waitfor() { # what seconds cmd...
	local what=$1 secs=$2
	shift 2
	local deadline=$(($(date +%s) + secs))
	until "$@" >/dev/null 2>&1; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			log "timed out after ${secs}s waiting for $what"
			return 1
		fi
		sleep 0.3
	done
	log "$what"
}

kubectl_of() { "$B/kubectl" --kubeconfig "$W/$1/admin.kubeconfig" "${@:2}"; }

# save KEY: remember a sysctl's value before the first change (once).
save_sysctl() {
	mkdir -p "$W"
	grep -q "^$1=" "$W/saved" 2>/dev/null || echo "$1=$(sysctl -n "$1")" >>"$W/saved"
}

# --- PKI: one CA per cluster, certificates by openssl ----------------------
pki() { # cluster
	local c=$1 d=$W/$1/pki ip
	ip=$(node_ip "$c")
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -subj "/CN=sluice-e2e-$c-ca" \
		-days 2 -out "$d/ca.crt" 2>/dev/null
	cert() { # name CN O SAN EKU
		{
			echo "basicConstraints=CA:FALSE"
			echo "keyUsage=critical,digitalSignature,keyEncipherment"
			echo "extendedKeyUsage=$5"
			[ -n "$4" ] && echo "subjectAltName=$4"
		} >"$d/$1.ext"
		openssl req -newkey rsa:2048 -nodes -keyout "$d/$1.key" -subj "/CN=$2${3:+/O=$3}" \
			-out "$d/$1.csr" 2>/dev/null
		openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
			-days 2 -extfile "$d/$1.ext" -out "$d/$1.crt" 2>/dev/null
		rm -f "$d/$1.csr" "$d/$1.ext"
	}
	cert apiserver kube-apiserver "" "IP:$ip,IP:127.0.0.1,IP:$(svc_net "$c").1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost" serverAuth
	cert admin kubernetes-admin system:masters "" clientAuth
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" clientAuth
	cert kubelet "system:node:$c" system:nodes "" clientAuth
	cert kubelet-serving "$c" "" "IP:$ip,DNS:$c" serverAuth
	cert kcm system:kube-controller-manager "" "" clientAuth
	cert scheduler system:kube-scheduler "" "" clientAuth
	cert kube-proxy system:kube-proxy "" "" clientAuth
	# The overflow node's identity at the remote cluster (test/e2e gives it
	# its RBAC there).
	cert overflow-provider sluice-overflow-provider "" "" clientAuth
	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
	openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

# --- configuration files -----------------------------------------------------
configs() { # cluster
	local c=$1 d=$W/$1 ip pods
	ip=$(node_ip "$c")
	pods=$(pod_net "$c")
	for who in admin kubelet kcm scheduler kube-proxy; do
		cat >"$d/$who.kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters:
- name: $c
  cluster:
    server: https://$ip:$(port "$c" apiserver)
    certificate-authority: $d/pki/ca.crt
users:
- name: $who
  user:
    client-certificate: $d/pki/$who.crt
    client-key: $d/pki/$who.key
contexts:
- name: $c
  context: {cluster: $c, user: $who}
current-context: $c
EOT
	done

	# containerd 2.x: state, sockets and runc's root of its own; NRI off (its
	# socket is machine-wide); no CAP_SYS_RESOURCE here, so runc must not
	# set the negative oom_score_adj sandboxes get.
	mkdir -p "$d/containerd" "$d/cni"
	cat >"$d/containerd/config.toml" <<EOT
version = 3
root = "$d/containerd/root"
state = "$d/containerd/state"
[grpc]
  address = "$d/containerd/containerd.sock"
[ttrpc]
  address = "$d/containerd/containerd.sock.ttrpc"
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.internal.v1.opt']
  path = "$d/containerd/opt"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "local/sluice-e2e-app:e2e"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$d/cni"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$d/containerd/runc"
        SystemdCgroup = false
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
EOT
	cat >"$d/cni/10-sluice-e2e.conflist" <<EOT
{
  "cniVersion": "1.0.0",
  "name": "sluice-e2e-$c",
  "plugins": [{
    "type": "bridge",
    "bridge": "$BRIDGE",
    "isGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "$pods.0/24", "rangeStart": "$pods.10", "gateway": "$pods.1"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": "$d/cni-ipam"
    }
  }]
}
EOT

	# kubelet: this VM is cgroup v1 (kubelet >= 1.35 refuses it unless
	# told); each cluster's pods under a cgroup root of their own.
	cat >"$d/kubelet.yaml" <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /sluice-e2e-$c
containerRuntimeEndpoint: unix://$d/containerd/containerd.sock
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $(port "$c" kubelet-healthz)
tlsCertFile: $d/pki/kubelet-serving.crt
tlsPrivateKeyFile: $d/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $d/pki/ca.crt}
authorization:
  mode: AlwaysAllow
staticPodPath: $d/manifests
podLogsDir: $d/pod-logs
resolvConf: /etc/resolv.conf
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
syncFrequency: 10s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
EOT
	mkdir -p "$d/manifests" "$d/pod-logs"

	cat >"$d/kube-proxy.yaml" <<EOT
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $d/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $pods.0/24
hostnameOverride: $c
healthzBindAddress: 127.0.0.1:11256
metricsBindAddress: 127.0.0.1:11249
nodePortAddresses: ["$ip/32"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOT
}

# --- bring-up ------------------------------------------------------------------
network_up() {
	# What the kubelets set (pkg/kubelet/cm: setupKernelTunables).
	for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
		kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
		save_sysctl $k
	done
	# Netns that exist already are not this run's to remove.
	ip netns list 2>/dev/null | awk '{print $1}' >"$W/netns.before"
	if ! ip link show $BRIDGE >/dev/null 2>&1; then
		ip link add $BRIDGE type bridge
		echo "bridge" >>"$W/created"
	fi
	# The node addresses and each pod range's gateway: the bridge plugin
	# keeps one IPv4 address per bridge, so this script sets them all.
	ip link set $BRIDGE up
	for c in $CLUSTERS; do
		ip addr replace "$(node_ip "$c")/24" dev $BRIDGE
		ip addr replace "$(pod_net "$c").1/24" dev $BRIDGE
		ip route replace "$(svc_net "$c").0/24" dev $BRIDGE
	done
	# Pods of one cluster reach the other's addresses through this machine:
	# forwarding on the bridge only (IPv4 asks the incoming device).
	sysctl -qw "net.ipv4.conf.$BRIDGE.forwarding=1"
	if ! iptables -C FORWARD -i $BRIDGE ! -o $BRIDGE -j DROP 2>/dev/null; then
		iptables -I FORWARD 1 -i $BRIDGE ! -o $BRIDGE -j DROP
		echo "forward-rule" >>"$W/created"
	fi
	log "network: bridge $BRIDGE, nodes $(node_ip home) and $(node_ip remote)"
}

cgroups_up() { # cluster
	local m
	for m in /sys/fs/cgroup/*/; do
		[ -d "$m" ] && [ ! -L "${m%/}" ] || continue
		mkdir -p "$m/sluice-e2e-$1"
	done
	# A new v1 cpuset has no CPUs or memory nodes until given its parent's.
	local cs=/sys/fs/cgroup/cpuset
	if [ -f "$cs/cpuset.cpus" ]; then
		cat "$cs/cpuset.cpus" >"$cs/sluice-e2e-$1/cpuset.cpus"
		cat "$cs/cpuset.mems" >"$cs/sluice-e2e-$1/cpuset.mems"
	fi
}

containerd_up() { # cluster
	local d=$W/$1/containerd
	start "$1" containerd "$B/containerd" --config "$d/config.toml"
	waitfor "$1: containerd" 30 "$B/ctr" -a "$d/containerd.sock" version
	for image in "$W"/images/*.oci.tar; do
		"$B/ctr" -a "$d/containerd.sock" -n k8s.io images import --platform "linux/$ARCH" "$image" >/dev/null
	done
}

control_plane_up() { # cluster
	local c=$1 d=$W/$1 ip
	ip=$(node_ip "$c")
	start "$c" etcd "$B/etcd" --name "$c" --data-dir "$d/etcd" \
		--listen-client-urls "http://127.0.0.1:$(port "$c" etcd)" --advertise-client-urls "http://127.0.0.1:$(port "$c" etcd)" \
		--listen-peer-urls "http://127.0.0.1:$(port "$c" etcd-peer)" --initial-advertise-peer-urls "http://127.0.0.1:$(port "$c" etcd-peer)" \
		--initial-cluster "$c=http://127.0.0.1:$(port "$c" etcd-peer)" --unsafe-no-fsync --log-level warn
	waitfor "$c: etcd" 30 curl -sf "http://127.0.0.1:$(port "$c" etcd)/health"
	start "$c" kube-apiserver "$B/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$(port "$c" etcd)" \
		--bind-address="$ip" --secure-port="$(port "$c" apiserver)" --advertise-address="$ip" \
		--cert-dir="$d/apiserver-certs" \
		--tls-cert-file="$d/pki/apiserver.crt" --tls-private-key-file="$d/pki/apiserver.key" --client-ca-file="$d/pki/ca.crt" \
		--kubelet-client-certificate="$d/pki/apiserver-kubelet-client.crt" --kubelet-client-key="$d/pki/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=InternalIP \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$d/pki/sa.pub" --service-account-signing-key-file="$d/pki/sa.key" \
		--service-cluster-ip-range="$(svc_net "$c").0/24" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--allow-privileged=true --profiling=false
	waitfor "$c: kube-apiserver" 90 kubectl_of "$c" get --raw /readyz
	start "$c" kube-controller-manager "$B/kube-controller-manager" --kubeconfig="$d/kcm.kubeconfig" \
		--authentication-kubeconfig="$d/kcm.kubeconfig" --authorization-kubeconfig="$d/kcm.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$(port "$c" kcm)" --leader-elect=false \
		--service-account-private-key-file="$d/pki/sa.key" --root-ca-file="$d/pki/ca.crt" \
		--use-service-account-credentials=true --profiling=false
	start "$c" kube-scheduler "$B/kube-scheduler" --kubeconfig="$d/scheduler.kubeconfig" \
		--authentication-kubeconfig="$d/scheduler.kubeconfig" --authorization-kubeconfig="$d/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$(port "$c" scheduler)" --leader-elect=false --profiling=false
}

node_up() { # cluster
	local c=$1 d=$W/$1
	if [ "$c" = home ]; then
		start "$c" kube-proxy "$B/kube-proxy" --config="$d/kube-proxy.yaml"
	fi
	start "$c" kubelet "$B/kubelet" --config="$d/kubelet.yaml" --kubeconfig="$d/kubelet.kubeconfig" \
		--hostname-override="$c" --node-ip="$(node_ip "$c")" --root-dir="$d/kubelet" --v=2
}

# preflight: refuse (exit 3, changing nothing) what this script must not
# touch: a run already up, another Kubernetes node on this machine, a
# state directory another user could write to, a cgroup v2 host.
preflight() {
	if [ -n "$(ls -A "$W/pids" 2>/dev/null)" ]; then
		echo "cluster.sh: $W/pids is not empty: a run is up or was not taken down; run 'cluster.sh down' first" >&2
		exit 3
	fi
	if iptables -S KUBE-FIREWALL >/dev/null 2>&1 || iptables -t nat -S KUBE-SERVICES >/dev/null 2>&1 || pgrep -x kubelet >/dev/null; then
		echo "cluster.sh: this machine runs Kubernetes already (a kubelet, or KUBE- iptables chains): refusing to add two nodes beside it" >&2
		exit 3
	fi
	if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
		echo "cluster.sh: a cgroup v1 host is needed (the kubelet configuration here is v1's); /sys/fs/cgroup is cgroup v2" >&2
		exit 3
	fi
	if [ -L "$W" ] || { [ -e "$W" ] && [ "$(stat -c %u "$W")" != 0 ]; }; then
		echo "cluster.sh: $W must be a directory owned by root, not a link" >&2
		exit 3
	fi
	install -d -m 0700 "$W"
}

up() {
	preflight
	[ -d "$W/images" ] || {
		echo "cluster.sh: no images in $W/images (run.sh puts them there)" >&2
		exit 1
	}
	network_up
	for c in $CLUSTERS; do
		mkdir -p "$W/$c"
		pki "$c"
		configs "$c"
		cgroups_up "$c"
		containerd_up "$c"
		control_plane_up "$c"
	done
	for c in $CLUSTERS; do node_up "$c"; done
	for c in $CLUSTERS; do
		waitfor "$c: node Ready" 120 kubectl_of "$c" wait --for=condition=Ready "node/$c" --timeout=1s
		waitfor "$c: default ServiceAccount" 60 kubectl_of "$c" get sa default -n default
	done
	log "clusters up"
}

# --- tear-down -------------------------------------------------------------------
stop_pid() { # pidfile
	local f=$1 p started
	[ -f "$f" ] || return 0
	read -r p started <"$f"
	# A PID whose start time differs is another process now: not ours.
	if [ -n "$started" ] && [ "$(starttime "$p")" = "$started" ] && kill "$p" 2>/dev/null; then
		for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
		kill -9 "$p" 2>/dev/null || true
	fi
	rm -f "$f"
}

down() {
	[ -d "$W" ] || return 0
	set +e
	local c d
	for c in $CLUSTERS; do
		d=$W/$c
		# Pods first, gracefully, while the kubelet runs.
		if [ -f "$W/pids/$c-kubelet" ] && [ -f "$W/pids/$c-kube-apiserver" ]; then
			timeout 60 "$B/kubectl" --kubeconfig "$d/admin.kubeconfig" delete pods --all -A --wait=true --timeout=50s >/dev/null 2>&1
		fi
		stop_pid "$W/pids/$c-kubelet"
		if [ -S "$d/containerd/containerd.sock" ]; then
			local ctr=(timeout 10 "$B/ctr" -a "$d/containerd/containerd.sock" -n k8s.io)
			for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
			for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks rm -f "$t" >/dev/null 2>&1; done
			for k in $("${ctr[@]}" containers ls -q 2>/dev/null); do "${ctr[@]}" containers rm "$k" >/dev/null 2>&1; done
		fi
		if [ -f "$W/pids/$c-kube-proxy" ]; then
			stop_pid "$W/pids/$c-kube-proxy"
			"$B/kube-proxy" --cleanup --config="$d/kube-proxy.yaml" >/dev/null 2>&1
		fi
		for n in kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do stop_pid "$W/pids/$c-$n"; done
		# containerd 2.x leaves sandbox shims running: theirs name its socket.
		for p in /proc/[0-9]*; do
			tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "containerd-shim-runc-v2 .*-address $d/containerd/containerd.sock " &&
				kill -9 "${p#/proc/}" 2>/dev/null
		done
		grep -E " $d/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
		# Whatever still runs in this cluster's cgroups (containers left when
		# containerd went first) is this run's: stop it, then the cgroups.
		for m in /sys/fs/cgroup/*/sluice-e2e-$c; do
			[ -d "$m" ] || continue
			find "$m" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null
		done
		for m in /sys/fs/cgroup/*/sluice-e2e-$c; do
			[ -d "$m" ] && for _ in 1 2 3 4 5; do find "$m" -depth -type d -exec rmdir {} + 2>/dev/null && break; sleep 0.2; done
		done
		rm -f /var/lib/cni/results/sluice-e2e-"$c"-*
		find /var/log/containers /var/log/pods -maxdepth 1 -lname "$d/*" -delete 2>/dev/null
	done
	for c in $CLUSTERS; do
		ip route del "$(svc_net "$c").0/24" dev $BRIDGE 2>/dev/null
	done
	grep -q '^forward-rule$' "$W/created" 2>/dev/null && iptables -D FORWARD -i $BRIDGE ! -o $BRIDGE -j DROP 2>/dev/null
	local rc=0
	if grep -q '^bridge$' "$W/created" 2>/dev/null && ip link show $BRIDGE >/dev/null 2>&1 && ! ip link del $BRIDGE; then
		echo "cluster.sh: could not delete bridge $BRIDGE; run 'cluster.sh down' again" >&2
		rc=1
	fi
	# Chains the kubelets create (kube-proxy --cleanup leaves them).
	for ipt in iptables ip6tables; do
		# (one jump per kubelet: two kubelets may each have added theirs)
		while $ipt -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
		while $ipt -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
		$ipt -F KUBE-FIREWALL 2>/dev/null
		$ipt -X KUBE-FIREWALL 2>/dev/null
		for t in filter nat mangle; do
			for k in KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT KUBE-PROXY-CANARY; do $ipt -t $t -X $k 2>/dev/null; done
		done
	done
	# The sysctls the kubelets and the CNI bridge plugin set, as they were.
	if [ -f "$W/saved" ]; then
		while IFS= read -r kv; do sysctl -qw "$kv"; done <"$W/saved"
	fi
	# The pod network namespaces this run's containerds left.
	if [ -f "$W/netns.before" ]; then
		for ns in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do
			grep -qx "$ns" "$W/netns.before" && continue
			ip netns pids "$ns" 2>/dev/null | grep -q . || ip netns del "$ns"
		done
	fi
	rm -rf "${W:?}"/home "${W:?}"/remote "$W/pids" "$W/netns.before"
	if [ $rc != 0 ]; then
		return $rc # keep saved and created for the next `down`
	fi
	rm -f "$W/saved" "$W/created"
	log "clusters down"
}

case ${1:-} in
up) up ;;
down) down ;;
*)
	echo "usage: cluster.sh up|down" >&2
	exit 2
	;;
esac
