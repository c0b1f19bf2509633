// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"sync"
	"time"
)

// TLSFront terminates TLS in front of a plain-TCP server, as stunnel or a
// proxy does in front of slurmrestd (which serves no TLS of its own): sluice
// sends its token only over https. A connection whose backend cannot be
// reached is closed at once, so the client sees the backend down, not a
// proxy's error page.
type TLSFront struct {
	// URL is https://127.0.0.1:<port>; CAFile verifies it.
	URL, CAFile string

	l      net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// NewTLSFront listens on a free loopback port and forwards to target
// (host:port); its certificate (for 127.0.0.1) goes to a file of its own
// in dir, removed by Close.
func NewTLSFront(target, dir string) (*TLSFront, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice-test-tls-front"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	file, err := os.CreateTemp(dir, "tls-front-*-ca.crt")
	if err != nil {
		return nil, err
	}
	caFile := file.Name()
	_, err = file.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(caFile)
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		_ = os.Remove(caFile)
		return nil, fmt.Errorf("TLS front for %s: %w", target, err)
	}
	f := &TLSFront{URL: "https://" + l.Addr().String(), CAFile: caFile, l: l, target: target, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *TLSFront) serve() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of file descriptors, say
			continue
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.forward(c)
		}()
	}
}

// track records a live connection, or reports false once the front closed.
func (f *TLSFront) track(c net.Conn, live bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !live {
		delete(f.conns, c)
		return true
	}
	if f.closed {
		return false
	}
	f.conns[c] = true
	return true
}

func (f *TLSFront) forward(c net.Conn) {
	defer c.Close()
	back, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		return
	}
	defer back.Close()
	if !f.track(c, true) || !f.track(back, true) {
		return
	}
	defer f.track(c, false)
	defer f.track(back, false)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(back, c)
	go pipe(c, back)
	<-done // either side ending ends both
}

// Close stops listening and ends every forwarded connection.
func (f *TLSFront) Close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	_ = f.l.Close()
	f.wg.Wait()
	_ = os.Remove(f.CAFile)
}
