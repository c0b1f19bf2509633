// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	logklog "github.com/virtual-kubelet/virtual-kubelet/log/klogv2"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider/httpprovider"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider/kube"
)

// leaseSeconds is the node lease's duration.
const leaseSeconds = 40

// podWorkers is how many pods virtual-kubelet syncs in parallel.
const podWorkers = 10

// Providers builds the configured providers. Errors name the provider's
// field path.
func Providers(cfg *Config) ([]*Member, error) {
	out := make([]*Member, 0, len(cfg.Providers))
	for i, pc := range cfg.Providers {
		var p provider.Provider
		var err error
		switch pc.Type {
		case TypeKubernetes:
			k := pc.Kubernetes
			p, err = kube.FromKubeconfig(k.Kubeconfig, k.Namespace, cfg.NodeName,
				kube.Options{Secrets: ptr.Deref(k.Secrets, true), ConfigMaps: ptr.Deref(k.ConfigMaps, true)})
		case TypeHTTP:
			h := pc.HTTP
			p, err = httpprovider.New(httpprovider.Options{URL: h.URL, TokenFile: h.TokenFile, CAFile: h.CAFile, Node: cfg.NodeName,
				Secrets: ptr.Deref(h.Secrets, true), ConfigMaps: ptr.Deref(h.ConfigMaps, true)})
		default:
			err = fmt.Errorf("unknown type %q", pc.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("providers[%d] (%s): %w", i, pc.Name, err)
		}
		out = append(out, &Member{Config: pc, Provider: p})
	}
	return out, nil
}

// Running is a started overflow node.
type Running struct {
	*Node
	done chan struct{}
	err  error
}

// Done is closed when the node has stopped.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err says, once Done is closed, why the node stopped before its context
// ended (its node or pod controller failed); nil when the context ended.
func (r *Running) Err() error { return r.err }

// homeQPS and homeBurst limit the node's requests to the home apiserver
// when the kubeconfig sets no limit.
const (
	homeQPS   = 50
	homeBurst = 100
)

// claimsWait bounds how long Start waits to read the ResearchClaims before
// its first reconcile (a cluster without the CRD has none to wait for).
const claimsWait = 10 * time.Second

// Start registers the node and runs it until ctx ends: virtual-kubelet's
// node controller (registration, status, lease) and pod controller
// (create/delete at the providers), and the reconcile loop. It returns
// once the node is registered and its first reconcile is done. rc
// reaches the home cluster.
func Start(parent context.Context, rc *rest.Config, cfg *Config, members []*Member) (*Running, error) {
	logger := klog.FromContext(parent).WithValues("node", cfg.NodeName)
	// Everything of the node stops with ctx: when parent ends, or when
	// its node or pod controller fails (a replica then gives the node up
	// to a standby, rather than lead a node whose heartbeat stopped).
	ctx, stopNode := context.WithCancelCause(klog.NewContext(parent, logger))
	log.L = logklog.New(nil)
	metrics.RegisterOverflowNode()
	if rc.QPS == 0 {
		// client-go's default (5 QPS, burst 10) would pace a claim's
		// moves: each pod's status, and each victim's warm condition
		// twice; the apiserver's priority and fairness still guards it.
		rc = rest.CopyConfig(rc)
		rc.QPS, rc.Burst = homeQPS, homeBurst
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		stopNode(err)
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		stopNode(err)
		return nil, err
	}
	// The claims say which victims to warm (make-before-break).
	store := claims.NewStore(ctx, dyn, client.Discovery())

	podInformers := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}))
	pods := podInformers.Core().V1().Pods()
	// virtual-kubelet wants ConfigMap, Secret and Service informers for
	// downward-API resolution, which is off (the providers resolve what
	// they can carry): they are never started, so the node needs no
	// cluster-wide read access to Secrets.
	unused := informers.NewSharedInformerFactory(client, 0)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: KubeletString, Host: cfg.NodeName})

	n := New(cfg, members, client, pods.Lister(), recorder)
	if node, err := client.CoreV1().Nodes().Get(ctx, cfg.NodeName, metav1.GetOptions{}); err == nil {
		n.resume(node) // a restart or a takeover
	}
	n.SetClaims(store)
	n.budgets = newLedgerBudgets(ctx, client)
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:                 client.CoreV1(),
		PodInformer:               pods,
		EventRecorder:             recorder,
		Provider:                  n,
		ConfigMapInformer:         unused.Core().V1().ConfigMaps(),
		SecretInformer:            unused.Core().V1().Secrets(),
		ServiceInformer:           unused.Core().V1().Services(),
		SkipDownwardAPIResolution: true,
	})
	if err != nil {
		broadcaster.Shutdown()
		stopNode(err)
		return nil, fmt.Errorf("pod controller: %w", err)
	}
	// The kubelet API stops with ctx, or as soon as starting fails.
	apiCtx, stopAPI := context.WithCancel(ctx)
	fail := func(err error) (*Running, error) {
		stopNode(err)
		stopAPI()
		if n.kubeletDone != nil {
			<-n.kubeletDone
		}
		broadcaster.Shutdown()
		return nil, err
	}
	if cfg.KubeletAPI != nil {
		if err := n.serveKubeletAPI(apiCtx); err != nil {
			return fail(err)
		}
	}
	podInformers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return fail(fmt.Errorf("pod informer did not sync: %w", ctx.Err()))
	}
	// The first reconcile fills the index from the providers' listings
	// before the pod controller compares them with the apiserver, and,
	// with the claims read, finds the warm instances replacements adopt.
	served := make(chan struct{})
	store.OnServed(func() { close(served) })
	select {
	case <-served:
	case <-time.After(claimsWait):
		logger.Info("ResearchClaims are not read yet: no warm instances until they are", "waited", claimsWait)
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	n.Reconcile(ctx)

	// The node object is built from the first reconcile: before it no
	// provider has been asked, and a node registered (or, on a restart or
	// a takeover, updated) from that would be NotReady, which the node
	// lifecycle controller acts on.
	nc, err := node.NewNodeController(n, n.NodeObject(), client.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(client.CoordinationV1().Leases(v1.NamespaceNodeLease), leaseSeconds),
		node.WithNodeStatusUpdateInterval(time.Minute))
	if err != nil {
		return fail(fmt.Errorf("node controller: %w", err))
	}
	r := &Running{Node: n, done: make(chan struct{})}
	nodeDone := make(chan struct{})
	go func() {
		defer close(nodeDone)
		if err := nc.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Node controller stopped")
			stopNode(fmt.Errorf("node controller stopped: %w", err))
		}
	}()
	select {
	case <-nc.Ready():
	case <-nodeDone:
		return fail(fmt.Errorf("registering node %s failed: %v", cfg.NodeName, nc.Err()))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	podDone := make(chan struct{})
	go func() {
		defer close(podDone)
		if err := pc.Run(ctx, podWorkers); err != nil && ctx.Err() == nil {
			logger.Error(err, "Pod controller stopped")
			stopNode(fmt.Errorf("pod controller stopped: %w", err))
		}
	}()
	go func() {
		defer close(r.done)
		wait.UntilWithContext(ctx, n.Reconcile, cfg.ReconcileInterval())
		<-nodeDone
		<-podDone
		stopAPI()
		if n.kubeletDone != nil {
			<-n.kubeletDone
		}
		broadcaster.Shutdown()
		if parent.Err() == nil {
			r.err = context.Cause(ctx)
		}
		stopNode(nil)
	}()
	// The node status callback exists now: publish the current status.
	n.mu.Lock()
	n.lastNode, n.lastOffer = nil, ""
	n.mu.Unlock()
	n.syncNode()
	logger.Info("Overflow node running", "providers", len(members))
	return r, nil
}
