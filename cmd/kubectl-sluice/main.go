// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command kubectl-sluice is the kubectl plugin `kubectl sluice` (put it on
// PATH): why a pod or gang is where it is, the fabric's GPUs, research
// claims and what runs on overflow nodes, read from the cluster's API
// (internal/kubectlsluice).
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sluice-sched/sluice/internal/kubectlsluice"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

func main() {
	if err := command().Execute(); err != nil {
		os.Exit(1)
	}
}

func command() *cobra.Command {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	var research, production []string
	var overflowSelector, overflowTaint, gpu, levels string
	o := &kubectlsluice.Options{Out: os.Stdout, Now: time.Now}
	root := &cobra.Command{
		Use:           "kubectl-sluice",
		Short:         "What sluice decided and holds, read from the cluster",
		SilenceUsage:  true,
		SilenceErrors: false,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
			rc, err := cfg.ClientConfig()
			if err != nil {
				return err
			}
			rc.UserAgent = "kubectl-sluice"
			if o.Client, err = kubernetes.NewForConfig(rc); err != nil {
				return err
			}
			if o.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
				return err
			}
			if o.Namespace, _, err = cfg.Namespace(); err != nil {
				return err
			}
			if o.Classes, err = overflow.NewClasses(research, production, overflowSelector, overflowTaint); err != nil {
				return fmt.Errorf("--overflow-node-selector: %w", err)
			}
			o.GPU = v1.ResourceName(gpu)
			o.LevelLabels = strings.Split(levels, ",")
			return nil
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&loading.ExplicitPath, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&overrides.CurrentContext, "context", "", "kubeconfig context")
	f.StringVarP(&overrides.Context.Namespace, "namespace", "n", "", "namespace (default: the context's)")
	f.StringSliceVar(&research, "research-priority-classes", []string{"research"}, "the scheduler's overflow.researchPriorityClasses")
	f.StringSliceVar(&production, "production-priority-classes", []string{"production"}, "the scheduler's overflow.productionPriorityClasses")
	f.StringVar(&overflowSelector, "overflow-node-selector", "type=virtual-kubelet", "the scheduler's overflow.overflowNodeSelector")
	f.StringVar(&overflowTaint, "overflow-taint-key", "virtual-kubelet.io/provider", "the scheduler's overflow.overflowTaintKey")
	f.StringVar(&gpu, "gpu-resource", "nvidia.com/gpu", "the GPU resource name")
	f.StringVar(&levels, "fabric-labels", "network.topology.nvidia.com/leaf,network.topology.nvidia.com/spine,network.topology.nvidia.com/block",
		"the fabric's node labels, leaf first (the scheduler's fabric.levels)")

	root.AddCommand(&cobra.Command{
		Use:   "why (POD | podgroup/NAME)",
		Short: "Why a pod or a gang is where it is: sluice's conditions and Events, in numbers",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.Why(cmd.Context(), args[0]) },
	}, &cobra.Command{
		Use:   "fabric",
		Short: "GPUs per fabric leaf: free and used by research, production and others; the largest free domain per level",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.Fabric(cmd.Context()) },
	}, &cobra.Command{
		Use:   "claims",
		Short: "Research claims: victims moved, moving and left, waves, stall, ETA (all namespaces unless -n)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("namespace") {
				o.Namespace = ""
			}
			return o.Claims(cmd.Context())
		},
	}, &cobra.Command{
		Use:   "overflow",
		Short: "Pods on overflow nodes: provider, GPUs, Ready, since when (all namespaces unless -n)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("namespace") {
				o.Namespace = ""
			}
			return o.Overflow(cmd.Context())
		},
	})
	return root
}
