// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"crypto/tls"
	"testing"

	"github.com/sluice-sched/sluice/internal/localcluster"
)

// KubeletClientUser is the user the apiservers present to kubelets.
const KubeletClientUser = localcluster.KubeletClientUser

// kubeletCA signs the package's apiservers' kubelet client certificate
// (WithNetwork).
var kubeletCA *localcluster.KubeletPKI

// KubeletClientCA is the CA file a kubelet (the overflow node's
// kubeletAPI.clientCAFile) verifies the apiservers' client certificate
// with; the package's TestMain must pass WithNetwork.
func KubeletClientCA(t testing.TB) string {
	t.Helper()
	if kubeletCA == nil {
		t.Fatal("harness: no kubelet client CA: pass harness.WithNetwork to harness.Main")
	}
	return kubeletCA.CAFile()
}

// KubeletClientCert is a client certificate for user (and groups) signed
// by the kubelet client CA, to call a kubelet endpoint as someone else.
func KubeletClientCert(t testing.TB, user string, groups ...string) tls.Certificate {
	t.Helper()
	if kubeletCA == nil {
		t.Fatal("harness: no kubelet client CA: pass harness.WithNetwork to harness.Main")
	}
	cert, err := kubeletCA.Sign(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// KubeletClientCertFiles writes a client certificate for user (and
// groups) signed by the kubelet client CA, and its key, for a component
// that reads files; it returns their paths.
func KubeletClientCertFiles(t testing.TB, user string, groups ...string) (certFile, keyFile string) {
	t.Helper()
	if kubeletCA == nil {
		t.Fatal("harness: no kubelet client CA: pass harness.WithNetwork to harness.Main")
	}
	certFile, keyFile, err := kubeletCA.SignFiles(t.TempDir(), user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
