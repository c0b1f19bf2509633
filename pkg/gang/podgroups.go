// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
)

// PodGroups reads scheduler-plugins PodGroups through a dynamic informer
// whose store holds typed objects. kube-scheduler has no informer for this
// CRD, so this is not a duplicate of its caches. When the cluster does not
// serve the API, Served is false and a background check starts the
// informer once it appears.
type PodGroups struct {
	served   atomic.Bool
	informer atomic.Pointer[cache.SharedIndexInformer]

	mu       sync.Mutex
	handlers []cache.ResourceEventHandler
	onSynced []func()
}

// NewPodGroups starts reading scheduler-plugins PodGroups with cfg's
// credentials; it stops with ctx. A scheduler has one (its runtime's).
func NewPodGroups(ctx context.Context, client kubernetes.Interface, cfg *rest.Config) (*PodGroups, error) {
	if cfg == nil {
		return nil, fmt.Errorf("no kubeconfig to watch %s", v1alpha1.Resource)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &PodGroups{}
	go s.run(ctx, client, dyn)
	return s, nil
}

// Served reports whether the cluster serves scheduler-plugins PodGroups and
// their informer has synced.
func (s *PodGroups) Served() bool { return s.served.Load() }

// Get returns a PodGroup.
func (s *PodGroups) Get(namespace, name string) (*v1alpha1.PodGroup, error) {
	inf := s.informer.Load()
	if inf == nil {
		return nil, apierrors.NewNotFound(v1alpha1.Resource.GroupResource(), name)
	}
	obj, ok, err := (*inf).GetStore().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(v1alpha1.Resource.GroupResource(), name)
	}
	return obj.(*v1alpha1.PodGroup), nil
}

// AddEventHandler registers h for PodGroup events, now or when the informer
// starts.
func (s *PodGroups) AddEventHandler(h cache.ResourceEventHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, h)
	if inf := s.informer.Load(); inf != nil {
		_, _ = (*inf).AddEventHandler(h)
	}
}

// OnSynced registers f to run once the informer has synced (at once if it
// has): members held back while the API was not yet readable need a nudge.
func (s *PodGroups) OnSynced(f func()) {
	s.mu.Lock()
	if !s.served.Load() {
		s.onSynced = append(s.onSynced, f)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	f()
}

// List returns every PodGroup.
func (s *PodGroups) List() []*v1alpha1.PodGroup {
	inf := s.informer.Load()
	if inf == nil {
		return nil
	}
	objs := (*inf).GetStore().List()
	out := make([]*v1alpha1.PodGroup, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*v1alpha1.PodGroup))
	}
	return out
}

// discoveryRetry is how often an unserved API is looked for again.
const discoveryRetry = 30 * time.Second

func (s *PodGroups) run(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) {
	logger := klog.FromContext(ctx)
	for {
		if servesPodGroups(client) {
			break
		}
		logger.V(2).Info("scheduler-plugins PodGroups are not served; label gangs wait for the CRD", "resource", v1alpha1.Resource)
		select {
		case <-ctx.Done():
			return
		case <-time.After(discoveryRetry):
		}
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, v1.NamespaceAll, nil)
	inf := factory.ForResource(v1alpha1.Resource).Informer()
	if err := inf.SetTransform(toTyped); err != nil {
		logger.Error(err, "PodGroup informer transform")
		return
	}
	s.mu.Lock()
	for _, h := range s.handlers {
		_, _ = inf.AddEventHandler(h)
	}
	s.informer.Store(&inf)
	s.mu.Unlock()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	s.mu.Lock()
	s.served.Store(true)
	callbacks := s.onSynced
	s.onSynced = nil
	s.mu.Unlock()
	logger.V(2).Info("watching scheduler-plugins PodGroups", "resource", v1alpha1.Resource)
	for _, f := range callbacks {
		f()
	}
}

func servesPodGroups(client kubernetes.Interface) bool {
	ok, _ := Serves(client, v1alpha1.SchemeGroupVersion.String(), v1alpha1.Resource.Resource)
	return ok
}

// NativeGroupVersion is the native Workload API's group and version.
const NativeGroupVersion = "scheduling.k8s.io/v1beta1"

// Serves reports whether the apiserver serves resource in groupVersion
// (e.g. "scheduling.x-k8s.io/v1alpha1", "podgroups"). An unserved group
// version is false with no error; a failed discovery is an error.
func Serves(client kubernetes.Interface, groupVersion, resource string) (bool, error) {
	list, err := client.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", groupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}

// toTyped converts the informer's unstructured objects once, at ingestion.
// An object that does not convert (a malformed PodGroup) is kept as an
// empty-spec PodGroup carrying its name, so members can be told why.
func toTyped(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	pg := &v1alpha1.PodGroup{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pg); err != nil {
		pg = &v1alpha1.PodGroup{}
		pg.Name, pg.Namespace, pg.UID = u.GetName(), u.GetNamespace(), u.GetUID()
		pg.ResourceVersion = u.GetResourceVersion()
		pg.Annotations = map[string]string{MalformedAnnotation: err.Error()}
	}
	return pg, nil
}

// MalformedAnnotation is set (in sluice's memory only) on a PodGroup whose
// object could not be read; its value is the decoding error.
const MalformedAnnotation = "sluice.dev/malformed"
