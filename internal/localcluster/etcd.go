// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package localcluster

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Etcd is an etcd server embedded in this process.
type Etcd struct {
	// ClientURL is where kube-apiserver reaches it (http on loopback).
	ClientURL string
	server    *embed.Etcd
	dataDir   string
}

// StartEtcd starts a single-member etcd on free loopback ports, with its data
// in a fresh temporary directory and fsync off (the data is disposable).
// Its logs go to logFile, or to stderr when logFile is empty.
func StartEtcd(logFile string) (*Etcd, error) {
	dataDir, err := os.MkdirTemp("", "sluice-etcd")
	if err != nil {
		return nil, fmt.Errorf("etcd data dir: %w", err)
	}
	var lastErr error
	// Free ports are found by binding :0 and closing, so another process can
	// take one before etcd binds it; a few attempts make that harmless.
	for attempt := 0; attempt < 5; attempt++ {
		clientPort, err1 := freePort()
		peerPort, err2 := freePort()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("finding free ports for etcd: %v %v", err1, err2)
		}
		cfg := embed.NewConfig()
		cfg.Name = "sluice-test"
		cfg.Dir = dataDir
		cfg.LogLevel = "error"
		cfg.UnsafeNoFsync = true
		if logFile != "" {
			cfg.LogOutputs = []string{logFile}
		}
		clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
		peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

		server, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			_ = os.RemoveAll(dataDir)
			if dataDir, err = os.MkdirTemp("", "sluice-etcd"); err != nil {
				return nil, fmt.Errorf("etcd data dir: %w", err)
			}
			continue
		}
		select {
		case <-server.Server.ReadyNotify():
			return &Etcd{ClientURL: clientURL.String(), server: server, dataDir: dataDir}, nil
		case <-time.After(60 * time.Second):
			server.Close()
			lastErr = fmt.Errorf("etcd did not become ready within 60s")
		}
	}
	_ = os.RemoveAll(dataDir)
	return nil, fmt.Errorf("starting embedded etcd: %w", lastErr)
}

// Stop stops etcd and removes its data.
func (e *Etcd) Stop() {
	e.server.Close()
	_ = os.RemoveAll(e.dataDir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
