#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# run.sh - `make e2e`: sluice installed the way users install it, on real
# clusters on this machine (hack/e2e/cluster.sh), then the story
# (test/e2e). It
#   1. installs the Debian packages a node needs, once: runc (bookworm's
#      1.1.5), containernetworking-plugins, iptables, conntrack, bc,
#      openssl, curl, iproute2;
#   2. builds into bin/e2e: containerd 2.x (module hack/containerd), etcd,
#      kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy
#      and kubelet at the Kubernetes version sluice builds on (tools of
#      sluice's go.mod), kubectl and helm;
#   3. builds the images `make image` builds, for this machine's platform,
#      and the run's own (test/e2e/app: the pause container and
#      production's HTTP server), into $E2E_DIR/images;
#   4. brings up both clusters, runs `go test ./test/e2e`, and takes them
#      down whatever happened (E2E_KEEP=1 leaves them up; then
#      `hack/e2e/cluster.sh down`).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
export E2E_DIR=${E2E_DIR:-/var/tmp/sluice-e2e}
export E2E_BIN=$root/bin/e2e
GO=${GO:-go}
arch=$($GO env GOARCH)
t0=$(date +%s)
step() { echo "== e2e [$(($(date +%s) - t0))s] $*"; }

if [ "$(id -u)" != 0 ]; then
	echo "run.sh: a kubelet needs root" >&2
	exit 1
fi
missing=()
for f in /usr/sbin/runc:runc /usr/lib/cni/bridge:containernetworking-plugins \
	/usr/sbin/iptables:iptables /usr/sbin/conntrack:conntrack /usr/bin/bc:bc \
	/usr/bin/openssl:openssl /usr/bin/curl:curl /usr/sbin/ip:iproute2; do
	[ -x "${f%%:*}" ] || missing+=("${f#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
	step "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

step "building cluster binaries into bin/e2e"
k8s_version=$($GO list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$k8s_version" | cut -d. -f2)
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
mkdir -p "$E2E_BIN"
CGO_ENABLED=0 $GO build -ldflags "$ldflags" -o "$E2E_BIN/" k8s.io/kubernetes/cmd/kubelet \
	k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
CGO_ENABLED=0 $GO build -o "$E2E_BIN/etcd" go.etcd.io/etcd/server/v3
(cd hack/containerd && CGO_ENABLED=0 $GO build -tags no_btrfs,no_devmapper,no_zfs -o "$E2E_BIN/" \
	github.com/containerd/containerd/v2/cmd/containerd \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	github.com/containerd/containerd/v2/cmd/ctr)
make --no-print-directory bin/kubectl bin/helm >/dev/null
cp bin/kubectl "$E2E_BIN/kubectl"
# containerd runs its shim from PATH.
export PATH=$E2E_BIN:$PATH

step "building images (linux/$arch) into $E2E_DIR/images"
rm -rf "$E2E_DIR/images" && mkdir -p "$E2E_DIR/images"
make --no-print-directory image IMAGE_PLATFORMS="linux/$arch" IMAGE_DIR="$E2E_DIR/images" >/dev/null
CGO_ENABLED=0 GOOS=linux $GO build -trimpath -ldflags "-s -w" -o "$E2E_DIR/images/app" ./test/e2e/app
$GO run ./hack/image -name sluice-e2e-app -ref local/sluice-e2e-app:e2e -version e2e -created 0 \
	-binary "linux/$arch=$E2E_DIR/images/app" -o "$E2E_DIR/images/sluice-e2e-app.oci.tar" >/dev/null
rm "$E2E_DIR/images/app"

cleanup() {
	if [ -n "${E2E_KEEP:-}" ]; then
		echo "E2E_KEEP: the clusters stay up (kubeconfigs: $E2E_DIR/{home,remote}/admin.kubeconfig); take them down with hack/e2e/cluster.sh down"
		return
	fi
	step "taking the clusters down"
	hack/e2e/cluster.sh down
}
trap cleanup EXIT
step "bringing up the clusters"
# Exit 3: cluster.sh refused and changed nothing (e.g. a run is up): not
# this run's clusters to take down.
hack/e2e/cluster.sh up || {
	rc=$?
	[ $rc = 3 ] && trap - EXIT
	exit $rc
}

step "the story (test/e2e)"
E2E_HOME_KUBECONFIG=$E2E_DIR/home/admin.kubeconfig \
	E2E_REMOTE_KUBECONFIG=$E2E_DIR/remote/admin.kubeconfig \
	E2E_HELM=$root/bin/helm \
	E2E_IMAGE_TAG=${SLUICE_VERSION:-$(make --no-print-directory -s print-version)} \
	$GO test -count=1 -timeout 20m -v ./test/e2e/ 2>&1 | tee "$E2E_DIR/test.log"
step "passed"
