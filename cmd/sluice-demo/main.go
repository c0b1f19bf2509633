// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command sluice-demo plays sluice's story on one machine (internal/demo):
//
//	make demo            # 32 nodes x 8 GPUs, a 256-GPU gang
//	make demo KEEP=1     # leave the cluster up for kubectl afterwards
//	make demo SLURM=1    # also read a real Slurm and drain a node halfway
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/term"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/internal/demo"
)

func main() {
	o := demo.Options{Stdout: os.Stdout}
	smoke := flag.Bool("smoke", false, "a small, quick version for tests: 8 nodes, a 64-GPU gang")
	slurm := flag.Bool("slurm", false, "read node state from the Slurm that hack/slurm-up.sh started (env SLURMRESTD_URL, SLURMRESTD_TOKEN_FILE, SLURM_CONF)")
	flag.StringVar(&o.Bin, "bin", "bin", "directory with sluice-scheduler and sluice-overflow-node")
	flag.StringVar(&o.Manifests, "manifests", "manifests", "the manifests/ directory")
	flag.StringVar(&o.Out, "out", "_output/demo", "directory for the report, logs and kubeconfig")
	flag.BoolVar(&o.Keep, "keep", false, "leave the cluster up after the story until Ctrl-C")
	flag.StringVar(&o.Kubectl, "kubectl", "", "the kubectl to name in -keep's instructions (default: the one on PATH)")
	flag.IntVar(&o.SchedulerPort, "scheduler-port", 10259, "sluice-scheduler's secure port")
	flag.IntVar(&o.OverflowPort, "overflow-port", 10266, "sluice-overflow-node's metrics port")
	flag.IntVar(&o.KubeletPort, "kubelet-port", 10250, "sluice-overflow-node's kubelet API port (kubectl logs)")
	plain := flag.Bool("plain", false, "plain log lines even on a terminal")
	remoteStart := flag.Duration("remote-start", 0, "how long a pod takes to start at the overflow provider (default 20s, 1s with -smoke)")
	flag.Parse()

	o.Spines, o.LeavesPerSpine, o.NodesPerLeaf, o.GPUsPerNode = 2, 2, 8, 8
	// The gang takes 20 of the 32 nodes: at least 3 of the 4 leaves.
	o.Deployments, o.GangPods = 8, 20
	o.Hold, o.ReturnHysteresis, o.StartupDelay, o.StepTimeout = 15*time.Second, 10*time.Second, 500*time.Millisecond, 20*time.Minute
	if *smoke {
		o.Spines, o.LeavesPerSpine, o.NodesPerLeaf = 2, 1, 4
		o.Deployments, o.GangPods = 2, 6
		o.Hold, o.ReturnHysteresis, o.StartupDelay, o.StepTimeout = 2*time.Second, 3*time.Second, 200*time.Millisecond, 3*time.Minute
	}
	o.RemoteStartupDelay = *remoteStart
	if o.RemoteStartupDelay == 0 {
		o.RemoteStartupDelay = 20 * time.Second
		if *smoke {
			o.RemoteStartupDelay = time.Second
		}
	}
	if *slurm {
		nodes, _ := strconv.Atoi(os.Getenv("SLURM_NODES"))
		if nodes == 0 {
			nodes = 8
		}
		o.Slurm = &demo.Slurm{URL: os.Getenv("SLURMRESTD_URL"), TokenFile: os.Getenv("SLURMRESTD_TOKEN_FILE"), Nodes: nodes}
		if o.Slurm.URL == "" || o.Slurm.TokenFile == "" {
			fmt.Fprintln(os.Stderr, "sluice-demo: -slurm needs SLURMRESTD_URL and SLURMRESTD_TOKEN_FILE: run hack/slurm-up.sh and source the env file it prints")
			os.Exit(2)
		}
	}
	o.TTY = !*plain && term.IsTerminal(int(os.Stdout.Fd()))

	// Components log through klog: into the log directory, not the view.
	if err := os.MkdirAll(o.Out+"/logs", 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "sluice-demo: %v\n", err)
		os.Exit(1)
	}
	logFile, err := os.Create(o.Out + "/logs/demo.log")
	if err != nil {
		fmt.Fprintf(os.Stderr, "sluice-demo: %v\n", err)
		os.Exit(1)
	}
	klog.LogToStderr(false)
	klog.SetOutput(logFile)
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("stderrthreshold", "FATAL")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = demo.Run(ctx, &o)
	stop()
	klog.Flush()
	_ = logFile.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sluice-demo: %v\n", err)
		os.Exit(1)
	}
}
