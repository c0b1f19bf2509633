// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package localcluster

import (
	"context"
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
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KubeletClientUser is the user the apiservers present to kubelets (their
// --kubelet-client-certificate), as kubeadm names it.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// KubeletPKI is the CA that signs the apiservers' kubelet client
// certificate, and that kubelets (the overflow node) trust for clients.
type KubeletPKI struct {
	caFile, certFile, keyFile string
	ca                        *x509.Certificate
	caKey                     *ecdsa.PrivateKey
}

// NewKubeletPKI makes a CA and the apiservers' kubelet client certificate
// in dir.
func NewKubeletPKI(dir string) (*KubeletPKI, error) {
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
	p := &KubeletPKI{caFile: filepath.Join(dir, "kubelet-client-ca.crt"), certFile: filepath.Join(dir, "kubelet-client.crt"),
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
func (p *KubeletPKI) sign(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
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

// Flags are the apiserver's kubelet client flags.
func (p *KubeletPKI) Flags() []string {
	return []string{"--kubelet-client-certificate=" + p.certFile, "--kubelet-client-key=" + p.keyFile}
}

// CAFile is the CA a kubelet (the overflow node's kubeletAPI.clientCAFile)
// verifies the apiservers' client certificate with.
func (p *KubeletPKI) CAFile() string { return p.caFile }

// Sign makes a client certificate for user (and groups) signed by the CA,
// to call a kubelet endpoint as someone else.
func (p *KubeletPKI) Sign(user string, groups ...string) (tls.Certificate, error) {
	certPEM, keyPEM, err := p.sign(user, groups...)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate for %s: %w", user, err)
	}
	return cert, nil
}

// SignFiles writes a client certificate for user (and groups) signed by
// the CA, and its key, into dir, for a component that reads files (e.g.
// metrics-server's --kubelet-client-certificate); it returns their paths.
func (p *KubeletPKI) SignFiles(dir, user string, groups ...string) (certFile, keyFile string, err error) {
	certPEM, keyPEM, err := p.sign(user, groups...)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, user+".crt"), filepath.Join(dir, user+".key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, keyPEM, 0o600)
}

// AllowKubeletClient binds KubeletClientUser to system:kubelet-api-admin,
// as kubeadm does, so the apiserver may use kubelets' API (pod logs).
func AllowKubeletClient(ctx context.Context, client kubernetes.Interface) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sluice:kubelet-api-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KubeletClientUser}},
	}
	_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
