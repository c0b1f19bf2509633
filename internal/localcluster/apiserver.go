// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package localcluster

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/google/uuid"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// Package localcluster runs etcd and kube-apiserver inside this process, for
// the integration tests, the simulator and the demo: the real apiserver
// (kube-apiserver's own test server), with sluice's APIs and gates on.
//
// APIServerFlags() are the kube-apiserver flags every local control plane
// gets:
//   - the Workload/PodGroup API (scheduling.k8s.io/v1beta1) is served and the
//     gates of the native gang path are on (they also reach the in-process
//     scheduler, which shares the process-wide feature gates);
//   - ServiceAccount admission is off: no token controller runs;
//   - TaintNodesByCondition admission is off: no node-lifecycle controller
//     would ever remove the not-ready taint it puts on new nodes;
//   - RBAC is on, so the shipped RBAC manifests can be tested for real
//     (the harness's own client is a cluster admin).
func APIServerFlags() []string {
	return []string{
		"--runtime-config=scheduling.k8s.io/v1beta1=true",
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--endpoint-reconciler-type=none",
		"--authorization-mode=RBAC",
	}
}

// ControlPlane is etcd plus kube-apiserver, both in this process.
type ControlPlane struct {
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for Config, for components
	// that read one (the scheduler, kubectl).
	Kubeconfig string

	etcd     *Etcd
	teardown func()
	dir      string
}

// StartControlPlane starts embedded etcd and kube-apiserver. tb receives the
// apiserver's logs and cleanups; etcdLog receives etcd's (stderr when
// empty); extraFlags are appended to APIServerFlags().
func StartControlPlane(tb ktesting.TB, etcdLog string, extraFlags ...string) (*ControlPlane, error) {
	etcd, err := StartEtcd(etcdLog)
	if err != nil {
		return nil, err
	}
	storage := storagebackend.NewDefaultConfig(path.Join(uuid.New().String(), "registry"), nil)
	storage.Transport.ServerList = []string{etcd.ClientURL}

	opts := kubeapiservertesting.NewDefaultTestServerOptions()
	// The invariant check scrapes apiserver metrics at teardown and fails on
	// things sluice does not control; tests assert their own invariants.
	opts.DisableInvariantChecks = true
	flags := append(append([]string{}, APIServerFlags()...), extraFlags...)
	server, err := kubeapiservertesting.StartTestServer(tb, opts, flags, storage)
	if err != nil {
		etcd.Stop()
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	cfg := rest.CopyConfig(server.ClientConfig)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		server.TearDownFn()
		etcd.Stop()
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-controlplane")
	if err != nil {
		server.TearDownFn()
		etcd.Stop()
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(cfg, kubeconfig); err != nil {
		server.TearDownFn()
		etcd.Stop()
		return nil, err
	}
	return &ControlPlane{
		Config:     cfg,
		Client:     client,
		Kubeconfig: kubeconfig,
		etcd:       etcd,
		teardown:   server.TearDownFn,
		dir:        dir,
	}, nil
}

// Stop stops kube-apiserver, then etcd, and removes their files.
func (cp *ControlPlane) Stop() {
	cp.teardown()
	cp.etcd.Stop()
	_ = os.RemoveAll(cp.dir)
}

// KubeconfigAs writes a kubeconfig in dir that reaches the apiserver as
// user (impersonated by the admin client), e.g. a ServiceAccount
// "system:serviceaccount:ns:name" with its groups.
func (cp *ControlPlane) KubeconfigAs(dir, user string, groups ...string) (string, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	file := filepath.Join(dir, "kubeconfig-as")
	return file, WriteKubeconfig(cfg, file)
}

// WriteKubeconfig writes cfg (server, CA, bearer token or client cert) as a
// kubeconfig file readable only by its owner.
func WriteKubeconfig(cfg *rest.Config, file string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sluice"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		CertificateAuthority:     cfg.CAFile,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos["sluice"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateGroups:     cfg.Impersonate.Groups,
	}
	kc.Contexts["sluice"] = &clientcmdapi.Context{Cluster: "sluice", AuthInfo: "sluice"}
	kc.CurrentContext = "sluice"
	return clientcmd.WriteToFile(*kc, file)
}
