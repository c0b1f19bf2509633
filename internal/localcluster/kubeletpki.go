// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// KubeletClientUser is the user the apiservers present to kubelets (their
// --kubelet-client-certificate), as kubeadm names it.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// kubeletPKI is the CA that signs the apiservers' kubelet client
// certificate, and that kubelets (the overflow node) trust for clients.
type kubeletPKI struct {
	caFile, certFile, keyFile string
	ca                        *x509.Certificate
	caKey                     *ecdsa.PrivateKey
}

var kubeletCA *kubeletPKI

// newKubeletPKI makes a CA and the apiserver's client certificate in dir.
func newKubeletPKI(dir string) (*kubeletPKI, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice-test-kubelet-client-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &kubeletPKI{caFile: filepath.Join(dir, "kubelet-client-ca.crt"), certFile: filepath.Join(dir, "kubelet-client.crt"),
		keyFile: filepath.Join(dir, "kubelet-client.key"), ca: ca, caKey: key}
	if err := os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := p.sign(KubeletClientUser)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.certFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	return p, os.WriteFile(p.keyFile, keyPEM, 0o600)
}

// sign makes a client certificate for user, signed by the CA.
func (p *kubeletPKI) sign(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// flags are the apiserver's kubelet client flags.
func (p *kubeletPKI) flags() []string {
	return []string{"--kubelet-client-certificate=" + p.certFile, "--kubelet-client-key=" + p.keyFile}
}

// KubeletClientCA is the CA file a kubelet (the overflow node's
// kubeletAPI.clientCAFile) verifies the apiservers' client certificate
// with; the package's TestMain must pass WithNetwork.
func KubeletClientCA(t testing.TB) string {
	t.Helper()
	if kubeletCA == nil {
		t.Fatal("harness: no kubelet client CA: pass harness.WithNetwork to harness.Main")
	}
	return kubeletCA.caFile
}

// KubeletClientCert is a client certificate for user (and groups) signed
// by the kubelet client CA, to call a kubelet endpoint as someone else.
func KubeletClientCert(t testing.TB, user string, groups ...string) tls.Certificate {
	t.Helper()
	if kubeletCA == nil {
		t.Fatal("harness: no kubelet client CA: pass harness.WithNetwork to harness.Main")
	}
	certPEM, keyPEM, err := kubeletCA.sign(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(fmt.Errorf("client certificate for %s: %w", user, err))
	}
	return cert
}
