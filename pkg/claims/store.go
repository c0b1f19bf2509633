// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/crdcheck"
	"github.com/sluice-sched/sluice/pkg/metrics"
)

// Store reads and writes ResearchClaims: a dynamic informer whose store
// holds typed claims (kube-scheduler has no informer for sluice's CRD),
// and an index of what live claims hold (the nodes they free, the
// overflow room they reserve) that scheduling reads without a lookup per
// claim. A cluster that does not serve the CRD yet has no claims; the
// store starts watching once it appears.
type Store struct {
	dyn      dynamic.Interface
	served   atomic.Bool
	informer atomic.Pointer[cache.SharedIndexInformer]

	mu       sync.Mutex
	handlers []cache.ResourceEventHandler
	onServed []func()
	// idx is what live claims hold, kept as claims change (index.go).
	idx index
}

// NewStore starts watching claims with dyn; it stops with ctx.
func NewStore(ctx context.Context, dyn dynamic.Interface, disco discovery.DiscoveryInterface) *Store {
	s := &Store{dyn: dyn}
	go s.run(ctx, disco)
	return s
}

// discoveryRetry is how often an unserved CRD is looked for again;
// schemaRetry how often an outdated one is checked again.
const (
	discoveryRetry = 2 * time.Second
	schemaRetry    = 30 * time.Second
)

func (s *Store) run(ctx context.Context, disco discovery.DiscoveryInterface) {
	logger := klog.FromContext(ctx)
	for !served(disco) {
		logger.V(2).Info("ResearchClaims are not served; research cannot claim room until manifests/crds is installed", "resource", v1alpha1.Resource)
		select {
		case <-ctx.Done():
			return
		case <-time.After(discoveryRetry):
		}
	}
	// A CRD installed after start-up is checked as the binaries check it
	// at start-up: an older schema would drop fields this release writes,
	// so claims are neither read nor written until it is upgraded.
	for {
		err := crdcheck.Check(ctx, s.dyn, crdcheck.ResearchClaims())
		if err == nil {
			break
		}
		logger.Error(err, "ResearchClaims are not used until the CRD is fixed", "retry", schemaRetry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(schemaRetry):
		}
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.dyn, 0, metav1.NamespaceAll, nil)
	inf := factory.ForResource(v1alpha1.Resource).Informer()
	if err := inf.SetTransform(toTyped); err != nil {
		logger.Error(err, "ResearchClaim informer transform")
		return
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.indexObj, UpdateFunc: func(_, o any) { s.indexObj(o) }, DeleteFunc: s.unindexObj,
	}); err != nil {
		logger.Error(err, "ResearchClaim informer")
		return
	}
	s.mu.Lock()
	for _, h := range s.handlers {
		_, _ = inf.AddEventHandler(h)
	}
	s.informer.Store(&inf)
	s.mu.Unlock()
	factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		s.served.Store(true)
		logger.V(2).Info("Watching ResearchClaims", "resource", v1alpha1.Resource)
		s.mu.Lock()
		fs := s.onServed
		s.onServed = nil
		s.mu.Unlock()
		for _, f := range fs {
			f()
		}
	}
}

// OnServed calls f once the store serves claims (at once if it does).
func (s *Store) OnServed(f func()) {
	s.mu.Lock()
	if !s.served.Load() {
		s.onServed = append(s.onServed, f)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	f()
}

func served(disco discovery.DiscoveryInterface) bool {
	list, err := disco.ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == v1alpha1.Resource.Resource {
			return true
		}
	}
	return false
}

// toTyped converts the informer's objects once, at ingestion.
func toTyped(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	c, err := v1alpha1.FromUnstructured(u.Object)
	if err != nil {
		// A claim sluice cannot read holds nothing; it is left alone.
		c = &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}}
		c.Status.Phase = v1alpha1.PhaseGivenUp
		c.Status.Message = "cannot be read: " + err.Error()
	}
	return c, nil
}

// Served reports whether the cluster serves ResearchClaims and the store
// has synced.
func (s *Store) Served() bool { return s.served.Load() }

// AddEventHandler registers h for claim events, now or once the CRD is
// served.
func (s *Store) AddEventHandler(h cache.ResourceEventHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, h)
	if inf := s.informer.Load(); inf != nil {
		_, _ = (*inf).AddEventHandler(h)
	}
}

// Get returns a claim.
func (s *Store) Get(namespace, name string) (*v1alpha1.ResearchClaim, bool) {
	inf := s.informer.Load()
	if inf == nil {
		return nil, false
	}
	obj, ok, err := (*inf).GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*v1alpha1.ResearchClaim), true
}

// List returns every claim.
func (s *Store) List() []*v1alpha1.ResearchClaim {
	inf := s.informer.Load()
	if inf == nil {
		return nil
	}
	objs := (*inf).GetStore().List()
	out := make([]*v1alpha1.ResearchClaim, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*v1alpha1.ResearchClaim))
	}
	return out
}

// Live reports whether a claim still holds room (it is not given up).
func Live(c *v1alpha1.ResearchClaim) bool { return c.Status.Phase != v1alpha1.PhaseGivenUp }

// NodeClaimed reports whether a live claim frees a node, or nominates a
// claimant to it: production must not take it.
func (s *Store) NodeClaimed(node string) bool { return s.ClaimedNodes().Has(node) }

func (s *Store) resource(namespace string) dynamic.ResourceInterface {
	return s.dyn.Resource(v1alpha1.Resource).Namespace(namespace)
}

// Create creates a claim.
func (s *Store) Create(ctx context.Context, c *v1alpha1.ResearchClaim) (*v1alpha1.ResearchClaim, error) {
	obj, err := c.ToUnstructured()
	if err != nil {
		return nil, err
	}
	created, err := s.resource(c.Namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err
	}
	out, err := v1alpha1.FromUnstructured(created.Object)
	if err != nil {
		return nil, err
	}
	s.written(out)
	return out, nil
}

// written puts a claim just written into the store before its watch event
// arrives, so the next scheduling cycle (another gang's plan, say) counts
// what it holds: two plans made between a write and its event would
// otherwise both count the same room. The watch event replaces it.
func (s *Store) written(c *v1alpha1.ResearchClaim) {
	inf := s.informer.Load()
	if inf == nil {
		return
	}
	store := (*inf).GetStore()
	if cur, ok, _ := store.Get(c); ok && newer(cur.(*v1alpha1.ResearchClaim), c) {
		return
	}
	if err := store.Update(c); err == nil {
		s.indexObj(c)
	}
}

// newer reports whether a has a higher resourceVersion than b (both from
// the same apiserver, where they are increasing integers in practice; a
// version that does not parse is not newer).
func newer(a, b *v1alpha1.ResearchClaim) bool {
	av, err1 := strconv.ParseUint(a.ResourceVersion, 10, 64)
	bv, err2 := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return err1 == nil && err2 == nil && av > bv
}

// UpdateStatus writes a claim's status.
func (s *Store) UpdateStatus(ctx context.Context, c *v1alpha1.ResearchClaim) (*v1alpha1.ResearchClaim, error) {
	obj, err := c.ToUnstructured()
	if err != nil {
		return nil, err
	}
	updated, err := s.resource(c.Namespace).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err
	}
	out, err := v1alpha1.FromUnstructured(updated.Object)
	if err != nil {
		return nil, err
	}
	s.written(out)
	return out, nil
}

// Delete deletes a claim (a claim already gone is not an error).
func (s *Store) Delete(ctx context.Context, namespace, name string) error {
	err := s.resource(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// FieldManager is the claims' field manager.
const FieldManager = "sluice-scheduler"

// NameOf is the name of a claimant key's claim: "rc-" and the key's
// readable part, with a hash of the whole key when that is too long or
// not unique.
func NameOf(key string) string {
	readable := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, key)
	sum := sha256.Sum256([]byte(key))
	hash := hex.EncodeToString(sum[:])[:10]
	if len(readable) > 200 {
		readable = readable[:200]
	}
	return fmt.Sprintf("rc-%s-%s", strings.Trim(readable, "-."), hash)
}

// AttemptsAnnotation carries, on a new claim, how many claims of the same
// claimant were given up before (the status cannot be set at creation).
const AttemptsAnnotation = "claims.sluice.dev/attempts"

// Sample reports the claims in progress when /metrics is scraped: how many
// by phase, the victims they still have to move, and the longest any has
// gone without progress against waveTimeout, after which it gives up.
func (s *Store) Sample(waveTimeout time.Duration) metrics.Sampler {
	return func(emit metrics.Emit) {
		now := time.Now()
		byPhase := map[v1alpha1.Phase]int{v1alpha1.PhaseEvicting: 0, v1alpha1.PhasePaused: 0, v1alpha1.PhaseFreed: 0}
		remaining, stalled := 0, 0.0
		for _, c := range s.List() {
			if !First(c) {
				continue // counted with its first record
			}
			records := s.RecordsOf(c)
			if len(records) == 0 {
				records = []*v1alpha1.ResearchClaim{c} // not indexed yet
			}
			phase, _ := claimStatus(records, c)
			if phase == v1alpha1.PhaseGivenUp {
				continue
			}
			if phase == "" {
				phase = v1alpha1.PhaseEvicting
			}
			byPhase[phase]++
			for _, r := range records {
				remaining += max(len(r.Spec.Victims)-len(r.Status.Replaced), 0)
			}
			if phase != v1alpha1.PhaseFreed {
				stalled = max(stalled, now.Sub(progressOf(records, c)).Seconds())
			}
		}
		for phase, n := range byPhase {
			emit(metrics.ClaimActive, float64(n), string(phase))
		}
		emit(metrics.ClaimVictimsRemaining, float64(remaining))
		emit(metrics.ClaimStalled, stalled)
		emit(metrics.ClaimWaveTimeout, waveTimeout.Seconds())
	}
}
