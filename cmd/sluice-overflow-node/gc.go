// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sluice-sched/sluice/pkg/overflownode"
)

// gcUsage is the gc subcommand's synopsis.
const gcUsage = `sluice-overflow-node gc --config FILE [--kubeconfig FILE] [--node NAME]... [--delete]

Lists the remote workloads, at every provider of the configuration, that no
pod of the home cluster runs any more: of the configured node, and of each
--node (overflow nodes removed or renamed since, whose workloads nobody
collects). With --delete, deletes them. Workloads of other nodes are never
touched.`

// runGC is the gc subcommand: it prints the orphans and, with --delete,
// deletes them.
func runGC(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gc", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprintln(out, gcUsage); fs.PrintDefaults() }
	configFile := fs.String("config", "", "path of the OverflowNodeConfiguration file (required)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the home cluster (default: in-cluster)")
	del := fs.Bool("delete", false, "delete the orphans found")
	var nodes nodeNames
	fs.Var(&nodes, "node", "another overflow node name whose workloads to look at (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *configFile == "" {
		return fmt.Errorf("gc: --config is required")
	}
	cfg, err := overflownode.LoadConfig(*configFile)
	if err != nil {
		return err
	}
	var rc *rest.Config
	if *kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("home cluster: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	orphans, findErr := overflownode.FindOrphans(ctx, client, cfg, append([]string{cfg.NodeName}, nodes...))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tNODE\tWORKLOAD\tPOD\tWHY")
	for _, o := range orphans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\n", o.Provider, o.Node, o.ID, o.Pod.Namespace, o.Pod.Name, o.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !*del {
		fmt.Fprintf(out, "%d orphans; --delete deletes them\n", len(orphans))
		return findErr
	}
	deleted, delErr := overflownode.DeleteOrphans(ctx, cfg, orphans)
	fmt.Fprintf(out, "%d of %d orphans deleted\n", deleted, len(orphans))
	if findErr != nil || delErr != nil {
		return fmt.Errorf("gc: %w", errors.Join(findErr, delErr))
	}
	return nil
}

// nodeNames is a repeatable --node flag.
type nodeNames []string

func (n *nodeNames) String() string { return strings.Join(*n, ",") }

func (n *nodeNames) Set(v string) error {
	if v == "" {
		return fmt.Errorf("empty node name")
	}
	*n = append(*n, v)
	return nil
}
