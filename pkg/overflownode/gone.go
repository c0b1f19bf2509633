// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// ReasonProviderGone is the Event on the node, and on each of its pods
// there, when a provider has not listed its workloads for
// providerFailureTimeoutSeconds.
const ReasonProviderGone = "ProviderGone"

// defaultMaxUnavailable paces the pods of a controller without a
// PodDisruptionBudget, as the scheduler's claims.defaultMaxUnavailable
// does by default (like a rolling update).
const defaultMaxUnavailable = "25%"

// retirement is what became of a pod at a provider that is gone.
type retirement int

const (
	// evicted: through the Eviction API, its budget allowing.
	evicted retirement = iota
	// waiting: for its budget (or for the budgets to be read).
	waiting
	// unpaced: no budget can pace it (no controller replaces it, or its
	// budgets never allow a disruption): it is failed.
	unpaced
)

// budgets evicts the pods at a gone provider as their disruption budgets
// allow.
type budgets interface {
	// Retire evicts pod if its budget allows now, with note as the
	// reason; otherwise it says why it waits, or why no budget paces it.
	Retire(ctx context.Context, pod *v1.Pod, note string) (retirement, string, error)
	// Idle says no pod is left at a gone provider.
	Idle()
}

// ledgerBudgets asks the disruption ledger (pkg/disruption, as the
// scheduler's claims and returns do) over informers of its own (every
// pod, PodDisruptionBudget and workload controller of the cluster),
// started when a provider is gone and stopped once no pod waits there:
// otherwise the node watches only its own pods.
type ledgerBudgets struct {
	ctx    context.Context
	client kubernetes.Interface

	// Guarded by mu; stop ends the informers (nil: not started).
	mu     sync.Mutex
	stop   context.CancelFunc
	ledger *disruption.Ledger
	synced []cache.InformerSynced
}

func newLedgerBudgets(ctx context.Context, client kubernetes.Interface) *ledgerBudgets {
	return &ledgerBudgets{ctx: ctx, client: client}
}

// started returns the ledger, starting its informers first if need be;
// nil until they have synced.
func (b *ledgerBudgets) started() (*disruption.Ledger, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop == nil {
		factory := informers.NewSharedInformerFactory(b.client, 0)
		ledger, err := disruption.NewLedger(factory, intstr.FromString(defaultMaxUnavailable), b.client, nil)
		if err != nil {
			return nil, err
		}
		ctx, stop := context.WithCancel(b.ctx)
		b.ledger, b.synced, b.stop = ledger, disruption.Synced(factory), func() { stop(); factory.Shutdown() }
		factory.Start(ctx.Done())
		klog.FromContext(b.ctx).Info("A provider is gone: reading the cluster's disruption budgets to pace its pods' evictions")
	}
	for _, synced := range b.synced {
		if !synced() {
			return nil, nil
		}
	}
	return b.ledger, nil
}

func (b *ledgerBudgets) Idle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		b.stop()
		b.stop, b.ledger, b.synced = nil, nil, nil
		klog.FromContext(b.ctx).Info("No pod waits at a gone provider: no longer reading the cluster's disruption budgets")
	}
}

func (b *ledgerBudgets) Retire(ctx context.Context, pod *v1.Pod, note string) (retirement, string, error) {
	ledger, err := b.started()
	if err != nil {
		return waiting, "", err
	}
	if ledger == nil {
		return waiting, "reading the cluster's disruption budgets", nil
	}
	if _, why := disruption.OwnerOf(pod); why != "" {
		return unpaced, why, nil
	}
	budget, why := ledger.Of(pod)
	if why != "" {
		if !ledger.OwnerKnown(pod) {
			return waiting, why, nil
		}
		return unpaced, why, nil
	}
	move, why := ledger.Reserve(pod, budget, false)
	if move == nil {
		return waiting, why, nil
	}
	ok, err := move.Evict(ctx, disruption.MoveProviderGone, note)
	switch {
	case err != nil:
		return waiting, "", err
	case !ok:
		return waiting, budget.String() + " allows no more now (the Eviction API said so)", nil
	}
	return evicted, budget.String(), nil
}

// resume takes from the node as the last leader published it when each
// provider's listing began to fail, so that a new leader does not restart
// the providerFailureTimeoutSeconds of a provider that is gone.
func (n *Node) resume(node *v1.Node) {
	published, err := offer.Of(node, false)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range published.Providers {
		if m := n.member(p.Name); m != nil && p.UnlistedSince != nil && m.unlistedSince.IsZero() {
			m.unlistedSince = p.UnlistedSince.Time
		}
	}
}

// retire removes a pod whose provider has not listed its workloads for
// providerFailureTimeoutSeconds: it is evicted as its budget allows, so
// its controller replaces it elsewhere a budget's worth at a time, never
// all at once; a pod no budget paces is failed. The first time it waits,
// and when it goes, its Event says so.
func (n *Node) retire(ctx context.Context, pod *v1.Pod, provider string, unlisted time.Duration) (retirement, error) {
	note := fmt.Sprintf("provider %s could not be listed for %s", provider, unlisted.Round(time.Second))
	if n.budgets == nil {
		n.fail(pod, ReasonProviderUnavailable, note)
		return unpaced, nil
	}
	out, why, err := n.budgets.Retire(ctx, pod, note)
	if err != nil {
		return waiting, fmt.Errorf("evicting %s: %w", klog.KObj(pod), err)
	}
	switch out {
	case evicted:
		metrics.GoneProviderEvictions.WithLabelValues(provider).Inc()
		n.recorder.Eventf(pod, v1.EventTypeWarning, ReasonProviderGone, "%s: evicted, as %s allows", note, why)
	case unpaced:
		n.fail(pod, ReasonProviderUnavailable, note+"; no budget paces it: "+why)
	case waiting:
		n.mu.Lock()
		first := !n.retiring[pod.UID]
		n.retiring[pod.UID] = true
		n.mu.Unlock()
		if first {
			n.recorder.Eventf(pod, v1.EventTypeWarning, ReasonProviderGone, "%s: evicted as its budget allows; waiting: %s", note, why)
		}
	}
	return out, nil
}

// announceGone is the Event on the node when a provider's listing has failed
// for providerFailureTimeoutSeconds.
func (n *Node) announceGone(m *Member, unlisted time.Duration, pods int) {
	ref := &v1.ObjectReference{Kind: "Node", Name: n.cfg.NodeName, UID: types.UID(n.cfg.NodeName)}
	n.recorder.Eventf(ref, v1.EventTypeWarning, ReasonProviderGone,
		"provider %s could not be listed for %s: its %d pods are evicted as their disruption budgets allow", m.Config.Name, unlisted.Round(time.Second), pods)
}
