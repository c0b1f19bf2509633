// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package returns

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Fit asks a scheduling profile's own PreFilter and Filter plugins where a
// pod may go: the framework's simulation, over a snapshot the return
// controller builds (never the scheduler's own, which its scheduling loop
// owns). Only kube-scheduler's in-tree plugins take part, with the args
// the profile gives them; sluice's own filters are facts the controller
// applies itself (Slurm's hold, in the nodes' allocatable; claimed nodes,
// left out of the snapshot).
type Fit struct {
	fw     framework.Framework
	lister *swappable
}

// pluginLister is what a profile's framework offers about its plugins.
type pluginLister interface {
	ListPlugins() *schedconfig.Plugins
}

// NewFit builds a Fit for the profile behind h (a plugin's framework
// handle), its in-tree plugins configured by args (the profile's plugin
// config; a plugin without an entry takes its defaults).
func NewFit(ctx context.Context, h fwk.Handle, args []schedconfig.PluginConfig) (*Fit, error) {
	pl, ok := h.(pluginLister)
	if !ok {
		return nil, fmt.Errorf("profile %s: its framework does not list its plugins", h.ProfileName())
	}
	listed := pl.ListPlugins()
	if listed == nil {
		return nil, fmt.Errorf("profile %s lists no plugins", h.ProfileName())
	}
	inTree := plugins.NewInTreeRegistry()
	// Plugins that need a manager the handle does not have (a framework
	// built without them, in tests) are left out rather than crash.
	if h.SharedDRAManager() == nil {
		delete(inTree, names.DynamicResources)
	}
	if h.SharedCSIManager() == nil {
		delete(inTree, names.NodeVolumeLimits)
	}
	pick := func(set schedconfig.PluginSet) []schedconfig.Plugin {
		var out []schedconfig.Plugin
		for _, p := range set.Enabled {
			if _, ok := inTree[p.Name]; ok {
				out = append(out, schedconfig.Plugin{Name: p.Name})
			}
		}
		return out
	}
	profile := &schedconfig.KubeSchedulerProfile{
		SchedulerName: h.ProfileName() + "/sluice-return-fit",
		Plugins: &schedconfig.Plugins{
			QueueSort: schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: queuesort.Name}}},
			PreFilter: schedconfig.PluginSet{Enabled: pick(listed.PreFilter)},
			Filter:    schedconfig.PluginSet{Enabled: pick(listed.Filter)},
			Bind:      schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: defaultbinder.Name}}},
		},
	}
	needed := sets.New[string]()
	for _, set := range [][]schedconfig.Plugin{profile.Plugins.PreFilter.Enabled, profile.Plugins.Filter.Enabled} {
		for _, p := range set {
			needed.Insert(p.Name)
		}
	}
	for _, a := range args {
		if needed.Has(a.Name) {
			profile.PluginConfig = append(profile.PluginConfig, a)
		}
	}
	lister := &swappable{s: internalcache.NewEmptySnapshot()}
	fw, err := frameworkruntime.NewFramework(ctx, inTree, profile,
		frameworkruntime.WithSnapshotSharedLister(lister),
		frameworkruntime.WithClientSet(h.ClientSet()),
		frameworkruntime.WithKubeConfig(h.KubeConfig()),
		frameworkruntime.WithInformerFactory(h.SharedInformerFactory()),
		frameworkruntime.WithSharedDRAManager(h.SharedDRAManager()),
		frameworkruntime.WithSharedCSIManager(h.SharedCSIManager()),
		frameworkruntime.WithPodGroupManager(h.PodGroupManager()),
		frameworkruntime.WithEventRecorder(events.NewFakeRecorder(0)),
	)
	if err != nil {
		return nil, fmt.Errorf("profile %s: building its filters for return fit checks: %w", h.ProfileName(), err)
	}
	return &Fit{fw: fw, lister: lister}, nil
}

// Place finds the first node of snap (by name) where pod passes every
// PreFilter and Filter plugin, and assumes pod there in snap, so pods
// placed after it see it. pod is not modified.
func (f *Fit) Place(ctx context.Context, snap *internalcache.Snapshot, pod *v1.Pod) (string, bool) {
	f.lister.s = snap
	p := pod.DeepCopy()
	p.Spec.NodeName = ""
	p.Status.NominatedNodeName = ""
	state := framework.NewCycleState()
	res, st, _ := f.fw.RunPreFilterPlugins(ctx, state, p)
	if !st.IsSuccess() {
		return "", false
	}
	infos, err := snap.NodeInfos().List()
	if err != nil {
		return "", false
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Node().Name < infos[j].Node().Name })
	for _, ni := range infos {
		node := ni.Node()
		if node == nil || (res != nil && !res.AllNodes() && !res.NodeNames.Has(node.Name)) {
			continue
		}
		if !f.fw.RunFilterPlugins(ctx, state, p, ni).IsSuccess() {
			continue
		}
		p.Spec.NodeName = node.Name
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			return "", false
		}
		if err := snap.AssumePod(pi); err != nil {
			return "", false
		}
		return node.Name, true
	}
	return "", false
}

// swappable is the Fit framework's snapshot, swapped for each look (the
// framework keeps the lister it was built with).
type swappable struct{ s *internalcache.Snapshot }

func (l *swappable) NodeInfos() fwk.NodeInfoLister       { return l.s.NodeInfos() }
func (l *swappable) StorageInfos() fwk.StorageInfoLister { return l.s.StorageInfos() }
func (l *swappable) PodGroupStates() fwk.PodGroupStateLister {
	return l.s.PodGroupStates()
}
func (l *swappable) PodGroups() fwk.PodGroupLister { return l.s.PodGroups() }
func (l *swappable) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return l.s.CompositePodGroupStates()
}
func (l *swappable) CompositePodGroups() fwk.CompositePodGroupLister {
	return l.s.CompositePodGroups()
}
