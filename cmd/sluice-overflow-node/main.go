// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command sluice-overflow-node is the overflow node: a virtual-kubelet
// that registers one node for every external GPU provider in its
// configuration and runs the pods bound to it there (pkg/overflownode).
//
//	sluice-overflow-node --config /etc/sluice/overflow-node.yaml
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/overflownode"
)

// version is set with -ldflags "-X main.version=...".
var version = "v0.0.0-dev"

func main() {
	configFile := flag.String("config", "", "path of the OverflowNodeConfiguration file (required)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the home cluster (default: in-cluster)")
	listen := flag.String("metrics-bind-address", ":10266", "address of /metrics, /healthz and /readyz; empty disables")
	nodeIP := flag.String("node-ip", "", "the node's IP for the kubelet API (sets kubeletAPI.address), e.g. $(POD_IP)")
	showVersion := flag.Bool("version", false, "print the version and exit")
	klog.InitFlags(nil)
	flag.Parse()
	if *showVersion {
		fmt.Printf("sluice-overflow-node %s (virtual-kubelet v1.14.1)\n", version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *configFile, *kubeconfig, *listen, *nodeIP); err != nil {
		klog.ErrorS(err, "sluice-overflow-node failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context, configFile, kubeconfig, listen, nodeIP string) error {
	if configFile == "" {
		return errors.New("--config is required")
	}
	if nodeIP != "" && net.ParseIP(nodeIP) == nil {
		return fmt.Errorf("--node-ip %q: not an IP address", nodeIP)
	}
	cfg, err := overflownode.LoadConfig(configFile, overflownode.WithNodeIP(nodeIP))
	if err != nil {
		return err
	}
	if nodeIP != "" && cfg.KubeletAPI == nil {
		return fmt.Errorf("--node-ip %s: %s has no kubeletAPI to serve on it", nodeIP, configFile)
	}
	members, err := overflownode.Providers(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", configFile, err)
	}
	var rc *rest.Config
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("home cluster: %w", err)
	}
	rc.UserAgent = "sluice-overflow-node/" + version
	ready := make(chan struct{})
	if listen != "" {
		if err := serve(ctx, listen, ready); err != nil {
			return err
		}
	}
	node, err := overflownode.Start(ctx, rc, cfg, members)
	if err != nil {
		return err
	}
	close(ready)
	<-node.Done()
	return nil
}

// serve exposes /metrics, /healthz (the process runs) and /readyz (the
// node is registered).
func serve(ctx context.Context, addr string, ready <-chan struct{}) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-ready:
			_, _ = w.Write([]byte("ok"))
		default:
			http.Error(w, "node not registered yet", http.StatusServiceUnavailable)
		}
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-bind-address %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "metrics server stopped")
		}
	}()
	return nil
}
