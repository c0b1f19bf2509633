// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command sluice-overflow-node is the overflow node: a virtual-kubelet
// that registers one node for every external GPU provider in its
// configuration and runs the pods bound to it there (pkg/overflownode).
//
//	sluice-overflow-node --config /etc/sluice/overflow-node.yaml
//	sluice-overflow-node gc --config /etc/sluice/overflow-node.yaml [--node OLD]... [--delete]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/overflownode"
)

// version is set with -ldflags "-X main.version=...".
var version = "v0.0.0-dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "gc" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := runGC(ctx, os.Args[2:], os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "sluice-overflow-node:", err)
			os.Exit(1)
		}
		return
	}
	configFile := flag.String("config", "", "path of the OverflowNodeConfiguration file (required)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the home cluster (default: in-cluster)")
	var serving servingOptions
	flag.StringVar(&serving.addr, "metrics-bind-address", ":10266", "address of /metrics (https, authenticated and authorized by the home cluster), /healthz and /readyz; empty disables")
	flag.StringVar(&serving.certFile, "tls-cert-file", "", "serving certificate of /metrics (PEM, re-read when it changes); default: self-signed at start")
	flag.StringVar(&serving.keyFile, "tls-private-key-file", "", "the serving certificate's key")
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
	if err := run(ctx, *configFile, *kubeconfig, serving, *nodeIP); err != nil {
		klog.ErrorS(err, "sluice-overflow-node failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context, configFile, kubeconfig string, serving servingOptions, nodeIP string) error {
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
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("the replica's identity: %w", err)
	}
	// The pod's name, and a suffix of its own: a restarted container is a
	// replica of its own (as kube-scheduler names its leader).
	replica := overflownode.NewReplica(host + "_" + string(uuid.NewUUID()))
	if serving.addr != "" {
		client, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		if err := serve(ctx, serving, client, replica.Ready); err != nil {
			return err
		}
	}
	return replica.Run(ctx, rc, cfg, members)
}
