// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package demo

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/internal/kcm"
	"github.com/sluice-sched/sluice/internal/localcluster"
	"github.com/sluice-sched/sluice/internal/nodesim"
	"github.com/sluice-sched/sluice/internal/procs"
	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/pkg/registry"
)

// Names in the demo cluster.
const (
	namespace       = "demo"
	remoteNamespace = "burst"
	overflowNode    = "sluice-overflow"
	slurmNodeLabel  = "sluice.dev/slurm-node"
)

// cluster is everything the demo runs.
type cluster struct {
	home, remote *localcluster.ControlPlane
	client       kubernetes.Interface
	procs        procs.Set
	nodes        []nodeInfo // physical GPU nodes, in fabric order
	tb           *localcluster.ProcessTB
	cancel       context.CancelFunc
	// pki signs the apiservers' kubelet client certificate.
	pki *localcluster.KubeletPKI
	// logs is the component logs' directory; scheduler the running
	// sluice-scheduler.
	logs      string
	scheduler *procs.Process
	// slurmFront is the TLS front of the demo Slurm's slurmrestd, which
	// serves no TLS of its own (sluice sends its token only over https).
	slurmFront *localcluster.TLSFront
}

// nodeInfo is a physical node's place in the fabric.
type nodeInfo struct {
	name, leaf, spine, slurm string
}

// up starts the control planes, controllers, simulators, nodes and the two
// sluice binaries.
func up(ctx context.Context, o *Options, say func(string, ...any)) (c *cluster, err error) {
	for _, p := range []struct {
		port int
		what string
	}{{o.SchedulerPort, "sluice-scheduler's /healthz and /metrics"}, {o.OverflowPort, "sluice-overflow-node's /metrics"}, {o.KubeletPort, "sluice-overflow-node's kubelet API (kubectl logs)"}} {
		if err := procs.CheckPortFree(p.port, p.what); err != nil {
			return nil, err
		}
	}
	logs := filepath.Join(o.Out, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(logs, "control-plane.log"))
	if err != nil {
		return nil, err
	}
	c = &cluster{tb: localcluster.NewProcessTB("demo", logFile), logs: logs}
	ctx, c.cancel = context.WithCancel(ctx)
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(localcluster.Fatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("starting the control plane: %s (see %s)", f, logFile.Name())
		}
		if err != nil {
			c.down(say)
		}
	}()

	say("starting etcd and kube-apiserver (home cluster), and a second control plane (the remote cluster the overflow node bursts into)")
	// Both apiservers reach kubelets (the overflow node, the remote
	// cluster's simulated ones) for pod logs with a client certificate
	// of the demo's own CA.
	if c.pki, err = localcluster.NewKubeletPKI(c.tb.TempDir()); err != nil {
		return c, err
	}
	if c.home, err = localcluster.StartControlPlane(c.tb, filepath.Join(logs, "etcd-home.log"), c.pki.Flags()...); err != nil {
		return c, err
	}
	if c.remote, err = localcluster.StartControlPlane(c.tb, filepath.Join(logs, "etcd-remote.log"), c.pki.Flags()...); err != nil {
		return c, err
	}
	c.client = c.home.Client
	for _, cp := range []*localcluster.ControlPlane{c.home, c.remote} {
		if err := localcluster.AllowKubeletClient(ctx, cp.Client); err != nil {
			return c, err
		}
	}
	if err := localcluster.CreatePriorityClasses(ctx, c.client); err != nil {
		return c, err
	}
	// Research claims live in the apiserver (manifests/crds).
	if err := localcluster.InstallCRDs(ctx, c.home, filepath.Join(o.Manifests, "crds", "claims.sluice.dev_researchclaims.yaml")); err != nil {
		return c, err
	}
	if err := localcluster.TenantNamespace(ctx, c.client, namespace); err != nil {
		return c, err
	}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sluice-system"}}, metav1.CreateOptions{}); err != nil {
		return c, err
	}
	if _, err := c.remote.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: remoteNamespace}}, metav1.CreateOptions{}); err != nil {
		return c, err
	}

	say("starting the ReplicaSet, Deployment and disruption controllers and the node simulators")
	if _, err := kcm.Start(ctx, c.home.Config, kcm.Set{Workloads: true, Cleanup: true}); err != nil {
		return c, err
	}
	skipOverflow := labels.SelectorFromSet(labels.Set{overflownode.LabelType: overflownode.TypeValue})
	if _, err := nodesim.Start(ctx, c.client, nodesim.Options{StartupDelay: o.StartupDelay, Workers: 8, Skip: skipOverflow}); err != nil {
		return c, err
	}
	if err := c.startRemote(ctx, o, logs); err != nil {
		return c, err
	}
	if err := c.createNodes(ctx, o); err != nil {
		return c, err
	}
	say("%d GPU nodes x %d GPUs: %d leaves under %d spines; the remote cluster has %d nodes", len(c.nodes), o.GPUsPerNode, o.Spines*o.LeavesPerSpine, o.Spines, len(c.nodes))

	if err := c.startScheduler(ctx, o, true, say); err != nil {
		return c, err
	}
	if err := c.startOverflowNode(ctx, o, logs, say); err != nil {
		return c, err
	}
	return c, nil
}

// startRemote runs the stock kube-scheduler and a node simulator on the
// remote cluster and gives it as many GPU nodes as the home cluster.
func (c *cluster) startRemote(ctx context.Context, o *Options, logs string) error {
	file := filepath.Join(logs, "remote-scheduler.yaml")
	cfg := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: {leaderElect: false}\nclientConnection: {kubeconfig: %q}\nprofiles: [{schedulerName: default-scheduler}]\n", c.remote.Kubeconfig)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		return err
	}
	if _, err := localcluster.RunScheduler(ctx, file); err != nil {
		return fmt.Errorf("remote kube-scheduler: %w", err)
	}
	if _, err := nodesim.Start(ctx, c.remote.Client, nodesim.Options{StartupDelay: o.RemoteStartupDelay, Workers: 8, Kubelet: true}); err != nil {
		return err
	}
	for i := range o.Spines * o.LeavesPerSpine * o.NodesPerLeaf {
		if _, err := c.remote.Client.CoreV1().Nodes().Create(ctx, gpuNode(fmt.Sprintf("remote-%02d", i+1), o.GPUsPerNode, nil), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// createNodes creates the physical GPU nodes with the fabric labels
// sluice reads by default; with Slurm, the first nodes map to Slurm's.
func (c *cluster) createNodes(ctx context.Context, o *Options) error {
	i := 0
	for s := range o.Spines {
		for l := range o.LeavesPerSpine {
			leaf := fmt.Sprintf("leaf-%d", s*o.LeavesPerSpine+l+1)
			spine := fmt.Sprintf("spine-%d", s+1)
			for range o.NodesPerLeaf {
				i++
				n := nodeInfo{name: fmt.Sprintf("node-%02d", i), leaf: leaf, spine: spine}
				lbls := map[string]string{
					configv1.DefaultLeafLabel: leaf, configv1.DefaultSpineLabel: spine, configv1.DefaultBlockLabel: "block-1",
				}
				if o.Slurm != nil && i <= o.Slurm.Nodes {
					n.slurm = fmt.Sprintf("gpu%02d", i)
					lbls[slurmNodeLabel] = n.slurm
				}
				if _, err := c.client.CoreV1().Nodes().Create(ctx, gpuNode(n.name, o.GPUsPerNode, lbls), metav1.CreateOptions{}); err != nil {
					return err
				}
				c.nodes = append(c.nodes, n)
			}
		}
	}
	return nil
}

// gpuNode is a Ready node with GPUs.
func gpuNode(name string, gpus int, lbls map[string]string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}}}
	for k, v := range lbls {
		n.Labels[k] = v
	}
	res := v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("128"), v1.ResourceMemory: resource.MustParse("1Ti"), v1.ResourcePods: resource.MustParse("110"),
		"nvidia.com/gpu": *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	n.Status.Capacity, n.Status.Allocatable = res, res.DeepCopy()
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}}
	return n
}

// startScheduler runs bin/sluice-scheduler with the shipped configuration
// from manifests/, pointed at this cluster, with the demo's overrides.
// startScheduler runs bin/sluice-scheduler with the shipped
// configuration, make-before-break claims on or off.
func (c *cluster) startScheduler(ctx context.Context, o *Options, makeBeforeBreak bool, say func(string, ...any)) error {
	data, err := os.ReadFile(filepath.Join(o.Manifests, "scheduler-config.yaml"))
	if err != nil {
		return err
	}
	patches := map[string]map[string]any{"OverflowPreemption": {"return": map[string]any{
		"hysteresisSeconds":      int(o.ReturnHysteresis / time.Second),
		"minWaveIntervalSeconds": 1,
		"pollIntervalSeconds":    1,
		"maxPodsPerWave":         64,
	}, "claims": map[string]any{"makeBeforeBreak": makeBeforeBreak}}}
	endpoint := ""
	if o.Slurm != nil {
		var caFile string
		if endpoint, caFile, err = c.slurmEndpoint(o); err != nil {
			return err
		}
		patches["SlurmNodeState"] = map[string]any{"slurm": map[string]any{
			"endpoint":            endpoint,
			"caFile":              caFile,
			"tokenFile":           o.Slurm.TokenFile,
			"pollIntervalSeconds": 2,
			"nodeNameLabel":       slurmNodeLabel,
		}}
	}
	if data, err = registry.MergePluginArgs(data, patches); err != nil {
		return fmt.Errorf("manifests/scheduler-config.yaml: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("manifests/scheduler-config.yaml: %w", err)
	}
	cc, _ := cfg["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"] = c.home.Kubeconfig // the shipped limits stay
	cfg["clientConnection"] = cc
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	file := filepath.Join(o.Out, "scheduler-config.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		return err
	}
	msg := "starting bin/sluice-scheduler with manifests/scheduler-config.yaml (demo overrides: return hysteresis %s, waves every 1s"
	if o.Slurm != nil {
		msg += ", Slurm at " + endpoint
	}
	logName := "sluice-scheduler.log"
	if !makeBeforeBreak {
		msg += ", make-before-break off"
		logName = "sluice-scheduler-break-before-make.log"
	}
	say(msg+")", o.ReturnHysteresis)
	p, err := procs.Start("sluice-scheduler", filepath.Join(o.Bin, "sluice-scheduler"), filepath.Join(c.logs, logName),
		"--config="+file,
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
		fmt.Sprintf("--secure-port=%d", o.SchedulerPort), "--bind-address=127.0.0.1",
		"--authentication-skip-lookup=true", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--authentication-kubeconfig="+c.home.Kubeconfig, "--authorization-kubeconfig="+c.home.Kubeconfig, "--v=2")
	if err != nil {
		return err
	}
	c.procs.Add(p)
	c.scheduler = p
	return procs.WaitHealthy(ctx, p, fmt.Sprintf("https://127.0.0.1:%d/healthz", o.SchedulerPort), 60*time.Second)
}

// restartScheduler stops sluice-scheduler (it releases its Lease) and
// starts it again, make-before-break on or off.
func (c *cluster) restartScheduler(ctx context.Context, o *Options, makeBeforeBreak bool, say func(string, ...any)) error {
	if old := c.scheduler; old != nil {
		c.procs.Remove(old)
		old.Stop(30 * time.Second)
	}
	return c.startScheduler(ctx, o, makeBeforeBreak, say)
}

// startOverflowNode runs bin/sluice-overflow-node with the kubernetes
// provider pointed at the remote cluster, and waits for its node.
func (c *cluster) startOverflowNode(ctx context.Context, o *Options, logs string, say func(string, ...any)) error {
	cfg := overflownode.Config{
		APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: overflowNode,
		ReconcileIntervalSeconds: ptr.To[int64](1),
		Providers: []overflownode.ProviderConfig{{
			Name: "burst", Type: overflownode.TypeKubernetes, PricePerGPUHour: 2.5,
			Kubernetes: &overflownode.KubernetesProvider{Kubeconfig: c.remote.Kubeconfig, Namespace: remoteNamespace},
		}},
		KubeletAPI: &overflownode.KubeletAPI{Address: "127.0.0.1", Port: int32(o.KubeletPort), ClientCAFile: c.pki.CAFile()},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	file := filepath.Join(o.Out, "overflow-node.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		return err
	}
	say("starting bin/sluice-overflow-node: one virtual-kubelet node for the remote cluster (kubernetes provider)")
	p, err := procs.Start("sluice-overflow-node", filepath.Join(o.Bin, "sluice-overflow-node"), filepath.Join(logs, "sluice-overflow-node.log"),
		"--config="+file, "--kubeconfig="+c.home.Kubeconfig, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", o.OverflowPort), "--v=2")
	if err != nil {
		return err
	}
	c.procs.Add(p)
	if err := procs.WaitHealthy(ctx, p, fmt.Sprintf("https://127.0.0.1:%d/readyz", o.OverflowPort), 60*time.Second); err != nil {
		return err
	}
	return waitFor(ctx, 30*time.Second, "overflow node "+overflowNode+" Ready", func() (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, overflowNode, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// down stops everything the demo started.
func (c *cluster) down(say func(string, ...any)) {
	c.procs.StopAll(say)
	if c.cancel != nil {
		say("stopping the in-process controllers and the node simulator")
		c.cancel()
	}
	if c.remote != nil {
		say("stopping the remote cluster (kube-apiserver, etcd)")
		c.remote.Stop()
	}
	if c.home != nil {
		say("stopping the home cluster (kube-apiserver, etcd)")
		c.home.Stop()
	}
	c.tb.RunCleanups()
}

// slurmEndpoint is how the scheduler reaches the demo's slurmrestd: an
// http URL (as hack/slurm-up.sh serves it) through a TLS front of the
// demo's own, started once; an https URL as it is.
func (c *cluster) slurmEndpoint(o *Options) (endpoint, caFile string, err error) {
	u, err := url.Parse(o.Slurm.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fmt.Errorf("SLURMRESTD_URL %q: want http://host:port or https://host:port", o.Slurm.URL)
	}
	if u.Scheme == "https" {
		return o.Slurm.URL, "", nil
	}
	if c.slurmFront == nil {
		if c.slurmFront, err = localcluster.NewTLSFront(u.Host, o.Out); err != nil {
			return "", "", err
		}
		c.tb.Cleanup(c.slurmFront.Close)
	}
	return c.slurmFront.URL, c.slurmFront.CAFile, nil
}

// writeKubeconfig copies the home cluster's admin kubeconfig for the user.
func (c *cluster) writeKubeconfig(file string) error {
	in, err := os.Open(c.home.Kubeconfig)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// waitFor polls cond every 250ms until it holds, fails, or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not happen within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
