// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/crdcheck"
	"github.com/sluice-sched/sluice/pkg/metrics"
)

// Replica is one of the processes that serve a node: it stands by until
// it holds the node's leader Lease (Config.LeaderElection), then runs the
// node (Start). The node keeps no state of its own, so a standby that
// takes over rebuilds it from the API and the providers, as a restart
// does.
type Replica struct {
	identity string
	// observed: the leader Lease has been read (someone leads, maybe
	// this replica); running: this replica leads and its node runs.
	observed, leading, running atomic.Bool
}

// NewReplica is a replica named identity (unique among the node's
// replicas: the pod's name and a random suffix).
func NewReplica(identity string) *Replica { return &Replica{identity: identity} }

// Ready reports whether the replica is of use: standing by with the
// leader Lease read, or leading with its node running.
func (r *Replica) Ready() bool {
	if !r.observed.Load() {
		return false
	}
	return !r.leading.Load() || r.running.Load()
}

// errLeadershipLost ends a replica that stopped renewing its lease in time:
// another may lead now, so it must stop acting for the node at once.
var errLeadershipLost = errors.New("lost the node's leader Lease")

// Run serves the node until ctx ends (nil) or the replica, leading, loses
// its lease, cannot start the node, or its node stops (its node or pod
// controller failed): an error, to exit and come back as a standby.
// Without leader election it runs the node at once.
func (r *Replica) Run(ctx context.Context, rc *rest.Config, cfg *Config, members []*Member) error {
	metrics.RegisterOverflowNode()
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	// The claims it reads must be the ones the scheduler writes; an older
	// CRD stops every replica here, naming the fix.
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := crdcheck.Check(ctx, dyn, crdcheck.ResearchClaims()); err != nil {
		return err
	}
	go watchNodeLease(ctx, client, cfg.NodeName)
	le := cfg.LeaderElection
	if !ptr.Deref(le.LeaderElect, true) {
		r.observed.Store(true)
		r.leading.Store(true)
		return r.lead(ctx, client, rc, cfg, members)
	}
	logger := klog.FromContext(ctx).WithValues("node", cfg.NodeName, "identity", r.identity)
	// The elector's context ends only once this replica has stopped
	// acting for the node: with ReleaseOnCancel the Lease is handed over
	// as it ends, and the standby must not start the node while this one
	// still reconciles or deletes. A leader ends it after its node has
	// stopped; a standby as soon as ctx ends.
	electorCtx, stopElector := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopElector(nil)
	led := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.ResourceNamespace, Name: le.ResourceName},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: r.identity},
		},
		LeaseDuration: seconds(le.LeaseDurationSeconds),
		RenewDeadline: seconds(le.RenewDeadlineSeconds),
		RetryPeriod:   seconds(le.RetryPeriodSeconds),
		// On SIGTERM (a rolling update) the standby takes over at once.
		ReleaseOnCancel: true,
		Name:            cfg.NodeName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				defer close(led)
				r.leading.Store(true)
				logger.Info("Leading: running the node")
				metrics.OverflowNodeLeader.Set(1)
				// The node ends with the leadership, or with ctx.
				nodeCtx, stopNode := context.WithCancel(leading)
				defer stopNode()
				defer context.AfterFunc(ctx, stopNode)()
				err := r.lead(nodeCtx, client, rc, cfg, members)
				if err == nil {
					err = context.Canceled
				}
				stopElector(err)
			},
			OnStoppedLeading: func() { metrics.OverflowNodeLeader.Set(0) },
			OnNewLeader: func(identity string) {
				r.observed.Store(true)
				if identity != r.identity {
					logger.Info("Standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leaderElection: %w", err)
	}
	standing := context.AfterFunc(ctx, func() {
		if !r.leading.Load() {
			stopElector(context.Canceled)
		}
	})
	defer standing()
	elector.Run(electorCtx)
	if r.leading.Load() {
		// The node's goroutines end with the leadership, which Run ended
		// (lost), or with ctx; wait for them.
		<-led
	}
	switch cause := context.Cause(electorCtx); {
	case ctx.Err() != nil:
		return nil
	case cause != nil && !errors.Is(cause, context.Canceled):
		return cause // the node could not start, or stopped
	}
	return errLeadershipLost
}

// lead runs the node until ctx ends.
func (r *Replica) lead(ctx context.Context, client kubernetes.Interface, rc *rest.Config, cfg *Config, members []*Member) error {
	renewNodeLease(ctx, client, cfg.NodeName)
	node, err := Start(ctx, rc, cfg, members)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	r.running.Store(true)
	<-node.Done()
	return node.Err()
}

// renewNodeLease renews the node's heartbeat Lease at once. A new leader
// must: its start (informers, the claims, a first listing of every
// provider) comes before its lease controller's first renewal, and the
// old leader's last renewal may already be a lease duration old.
func renewNodeLease(ctx context.Context, client kubernetes.Interface, node string) {
	leases := client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	logger := klog.FromContext(ctx)
	lease, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return // a new node: its lease controller creates it
	}
	if err != nil {
		logger.Error(err, "Reading the node's Lease before taking it over")
		return
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		logger.Error(err, "Renewing the node's Lease on taking it over")
		return
	}
	logger.V(2).Info("Renewed the node's Lease on taking it over")
}

// leaseAgeInterval is how often the node Lease's age is published.
const leaseAgeInterval = time.Second

// watchNodeLease publishes the age of the node's heartbeat Lease
// (sluice_overflow_node_lease_age_seconds) until ctx ends, from every
// replica: a standby shows a leader that stopped renewing.
func watchNodeLease(ctx context.Context, client kubernetes.Interface, node string) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(v1.NamespaceNodeLease),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
		}))
	leases := factory.Coordination().V1().Leases()
	lister := leases.Lister()
	leases.Informer() // registered before Start
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	gauge := metrics.OverflowNodeLeaseAge.WithLabelValues(node)
	wait.UntilWithContext(ctx, func(context.Context) {
		lease, err := lister.Leases(v1.NamespaceNodeLease).Get(node)
		if err != nil {
			return // not read yet, or no lease: the age is not known
		}
		if renewed := renewTime(lease); !renewed.IsZero() {
			gauge.Set(time.Since(renewed).Seconds())
		}
	}, leaseAgeInterval)
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
