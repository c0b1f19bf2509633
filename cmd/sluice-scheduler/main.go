// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command sluice-scheduler is kube-scheduler with sluice's plugins compiled
// in. Everything kube-scheduler offers (flags, --config, leader election,
// /metrics, /healthz, feature gates) comes from kube-scheduler itself: the
// command is kube-scheduler's options, Setup and Run, with one step
// between the last two, where sluice's runtime is attached to the
// scheduler's configuration (its profiles' plugin args, and its leader
// election, so sluice's controllers run only on the replica that leads).
//
// The Makefile stamps versions through -ldflags -X: k8s.io/component-base/
// version carries the Kubernetes version sluice is built on (kube-scheduler
// and feature gates rely on it), and verflag's program name carries
// sluice's own version, so --version prints e.g.
//
//	sluice-scheduler v0.1.0 built on Kubernetes v1.37.2
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/sluice-sched/sluice/pkg/registry"
)

func main() {
	os.Exit(cli.Run(command()))
}

func command() *cobra.Command {
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use: "sluice-scheduler",
		Long: `sluice-scheduler is kube-scheduler with sluice's plugins: gangs placed
all-or-nothing at the lowest fabric level that fits, Slurm's node state and
GPUs as one capacity pool, research claims that move production to overflow
nodes within its disruption budgets, and inference packed so whole nodes stay
free for training. Its flags and configuration are kube-scheduler's.`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates are set before RunE, as kube-scheduler does.
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd, opts) },
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if arg != "" {
					return fmt.Errorf("%q takes no arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range nfs.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	return cmd
}

func run(cmd *cobra.Command, opts *options.Options) error {
	verflag.PrintAndExitIfRequested()
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		return err
	}
	cliflag.PrintFlags(cmd.Flags())
	if opts.InformerName == nil {
		name, err := cache.NewInformerName("kube-scheduler")
		if err != nil {
			return err
		}
		opts.InformerName = name
	}
	ctx := server.SetupSignalContext()
	rt := registry.New()
	cc, sched, err := app.Setup(ctx, opts, rt.Options()...)
	if err != nil {
		return err
	}
	if mfg, ok := fg.(featuregate.MutableFeatureGate); ok {
		mfg.AddMetrics()
	}
	opts.ComponentGlobalsRegistry.AddMetrics()
	rt.Attach(cc)
	return app.Run(ctx, cc, sched)
}
