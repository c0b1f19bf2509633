// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/pkg/features"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/utils/clock"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/crdcheck"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/returns"
	"github.com/sluice-sched/sluice/pkg/slurm"
	"github.com/sluice-sched/sluice/pkg/slurmdrain"
	"github.com/sluice-sched/sluice/pkg/slurmhold"
)

// Runtime is one scheduler's sluice: the facts its configuration states
// once (fabric, classes and overflow nodes, Slurm, claims, return) and the
// pieces built from them that every plugin shares (the fabric tracker, the
// Slurm view, gangs of both APIs, the claim engine, the return
// controller). Plugin factories hand it the facts their args state; it
// refuses two different statements of one fact, naming both places.
//
// kube-scheduler builds every plugin of every profile before it asks any
// plugin for its events, and plugins Seal the runtime there: by then every
// stated fact is known, facts nobody stated take their defaults, and the
// shared pieces are built once. A seal that fails (an unreadable
// topology.conf, say) fails the scheduler's start-up. (kube-scheduler asks
// only plugins that can reject pods for their events; the others seal on
// first use, which finds the runtime sealed already.)
type Runtime struct {
	mu     sync.Mutex
	ctx    context.Context
	handle fwk.Handle
	stated stated
	sealed bool
	err    error

	// Built by Seal.
	fabricCfg config.FabricConfig
	tracker   *fabric.Tracker
	classes   *overflow.Classes
	slurmView *slurm.View
	gangs     *gang.Gangs
	claimsCfg config.ClaimsConfig
	returnCfg config.ReturnConfig

	// claimsHandle is the handle of the plugin that runs claims
	// (OverflowPreemption): the claim engine and the return controller
	// use its clients and record Events as its profile.
	claimsHandle fwk.Handle
	store        *claims.Store
	ledger       *disruption.Ledger
	engine       *claims.Engine
	returns      *returns.Controller
	// drains drains Slurm nodes Kubernetes takes away (nil: off).
	drains *slurmdrain.Controller
	// holder holds pods' GPUs in Slurm on shared nodes (nil: off).
	holder *slurmhold.Holder
	// handles are the profiles' framework handles, by profile name (the
	// first plugin of each that declared itself); fits the return
	// controller's fit checks built from them; profiles the scheduler's
	// configuration (Attach).
	handles  map[string]fwk.Handle
	fits     map[string]*returns.Fit
	profiles []schedconfig.KubeSchedulerProfile
	// started: the controllers run. autoStart: they start at the seal
	// (schedulers that are never attached, scheduler_perf's).
	started   bool
	autoStart bool

	// Built on first use, with the handle of the plugin that asked (its
	// profile records the Events).
	reporter *gang.Reporter
}

// stated is every fact stated so far, with where.
type stated struct {
	fabric   statement[config.FabricConfig]
	overflow statement[config.OverflowConfig]
	slurm    statement[config.SlurmConfig]
	claims   statement[config.ClaimsConfig]
	ret      statement[config.ReturnConfig]
}

type statement[T any] struct {
	path  *field.Path
	value *T
}

// state records a statement of a fact, or refuses it when the fact was
// stated differently before.
func state[T any](s *statement[T], what string, path *field.Path, value *T) error {
	if value == nil {
		return nil
	}
	if s.value == nil {
		s.path, s.value = path, value
		return nil
	}
	if apiequality.Semantic.DeepEqual(s.value, value) {
		return nil
	}
	return field.Invalid(path, "(differs)", fmt.Sprintf("states %s differently from %s; state it once, every plugin reads it from there", what, s.path))
}

// New returns an empty runtime; its plugins (Registry, Options) fill it.
func New() *Runtime {
	return &Runtime{handles: map[string]fwk.Handle{}, fits: map[string]*returns.Fit{}}
}

// Declare is called by every plugin factory: it attaches the scheduler (its
// context and a framework handle, for informers and clients) and records
// the facts the plugin's args state, at path (the args' field path).
func (rt *Runtime) Declare(ctx context.Context, h fwk.Handle, path *field.Path, f config.Facts) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sealed {
		return fmt.Errorf("%s: the sluice runtime was sealed before this plugin was built", path)
	}
	if rt.handle == nil {
		rt.ctx, rt.handle = ctx, h
	}
	if h != nil {
		if _, ok := rt.handles[h.ProfileName()]; !ok {
			rt.handles[h.ProfileName()] = h
		}
	}
	for _, err := range []error{
		state(&rt.stated.fabric, "the fabric", path.Child("fabric"), f.Fabric),
		state(&rt.stated.overflow, "the classes and overflow nodes", path.Child("overflow"), f.Overflow),
		state(&rt.stated.slurm, "the Slurm connection", path.Child("slurm"), f.Slurm),
		state(&rt.stated.claims, "the claim engine", path.Child("claims"), f.Claims),
		state(&rt.stated.ret, "the return controller", path.Child("return"), f.Return),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// RunClaims asks for the claim engine and the return controller, started
// when the runtime is sealed, with h's clients and Event recorder
// (OverflowPreemption's factory asks). The first caller's handle is used.
func (rt *Runtime) RunClaims(h fwk.Handle) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.claimsHandle == nil {
		rt.claimsHandle = h
	}
}

// Seal builds the shared pieces from the facts stated (and the defaults of
// the others), once; later calls return the first call's result.
func (rt *Runtime) Seal() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sealed {
		return rt.err
	}
	rt.sealed = true
	rt.err = rt.build()
	return rt.err
}

func (rt *Runtime) build() error {
	if rt.handle == nil {
		return fmt.Errorf("the sluice runtime has no scheduler: no plugin declared itself")
	}
	metrics.Register()
	ctx, h := rt.ctx, rt.handle
	rt.fabricCfg = orDefault(rt.stated.fabric.value, defaultFabric)
	overflowCfg := orDefault(rt.stated.overflow.value, defaultOverflow)
	slurmCfg := orDefault(rt.stated.slurm.value, defaultSlurm)
	rt.claimsCfg = orDefault(rt.stated.claims.value, defaultClaims)
	rt.returnCfg = orDefault(rt.stated.ret.value, defaultReturn)

	source, err := fabricSource(&rt.fabricCfg, slurmCfg.NodeNameLabel)
	if err != nil {
		return fmt.Errorf("%s: %w", orPath(rt.stated.fabric.path, "fabric"), err)
	}
	informers := h.SharedInformerFactory()
	if rt.tracker, err = fabric.NewTracker(source, informers.Core().V1().Nodes().Informer()); err != nil {
		return err
	}
	if rt.classes, err = overflow.ClassesFrom(&overflowCfg, namespaceLabels(informers, &overflowCfg)); err != nil {
		return fmt.Errorf("%s: %w", orPath(rt.stated.overflow.path, "overflow"), err)
	}
	gpu := v1.ResourceName(rt.fabricCfg.GPUResourceName)
	gpus, err := capacity.NewGPUIndex(informers.Core().V1().Nodes().Informer(), informers.Core().V1().Pods().Informer(), gpu)
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, metrics.SetSampler("capacity",
		metrics.Reused(capacitySampler(gpus, rt.classes, rt.tracker, gpu), capacitySampleMaxAge, clock.RealClock{})))
	if slurmCfg.Endpoint != "" {
		var client *slurm.Client
		if rt.slurmView, client, err = startSlurm(ctx, &slurmCfg, v1.ResourceName(rt.fabricCfg.GPUResourceName)); err != nil {
			return fmt.Errorf("%s: %w", rt.stated.slurm.path.Child("endpoint"), err)
		}
		if ts, ok := source.(*slurm.TopologySource); ok {
			ts.FollowNodes(rt.slurmView.Cache())
		}
		// Writes go through Slurm's commands when they are configured,
		// through slurmrestd otherwise.
		var nodes slurm.NodeWriter = client
		var jobs slurm.JobWriter = client
		if slurmCfg.Commands != "" {
			commands := slurm.Commands{Dir: slurmCfg.Commands, Timeout: time.Duration(slurmCfg.RequestTimeoutSeconds) * time.Second}
			nodes, jobs = commands, commands
		}
		if d := slurmCfg.Drain; d != nil && d.Enabled {
			if rt.drains, err = buildDrains(d, nodes, rt.slurmView, h); err != nil {
				return fmt.Errorf("%s.drain: %w", orPath(rt.stated.slurm.path, "slurm"), err)
			}
		}
		if p := slurmCfg.Placeholders; p != nil && p.Enabled {
			// The placeholders' owner in Slurm is this cluster (its
			// kube-system namespace's UID), so that the sweep touches
			// only jobs this sluice submitted, and only its Slurm user's
			// (slurmrestd's user; the commands list only their own).
			system, err := h.ClientSet().CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s.placeholders: reading the cluster's id (namespace kube-system's UID), which owns the placeholder jobs in Slurm: %w",
					orPath(rt.stated.slurm.path, "slurm"), err)
			}
			user := slurmCfg.User
			if slurmCfg.Commands != "" {
				user = "" // the commands' own user
			}
			if rt.holder, err = slurmhold.New(slurmhold.Config{
				Jobs: jobs, View: rt.slurmView, Pods: informers.Core().V1().Pods(), Client: h.ClientSet(), Recorder: h.EventRecorder(),
				Timeout: time.Duration(p.TimeoutSeconds) * time.Second, Resync: time.Duration(p.ResyncSeconds) * time.Second, Partition: p.Partition,
				Nodes: informers.Core().V1().Nodes().Lister(), Owner: string(system.UID), User: user,
			}); err != nil {
				return fmt.Errorf("%s.placeholders: %w", orPath(rt.stated.slurm.path, "slurm"), err)
			}
		}
	}
	if err := checkGangAPIs(klog.FromContext(ctx), h.ClientSet()); err != nil {
		return err
	}
	labels, err := gang.NewPodGroups(ctx, h.ClientSet(), h.KubeConfig())
	if err != nil {
		return err
	}
	// Native PodGroups are read only where kube-scheduler watches them
	// itself: an apiserver without the API would never let the informer
	// sync.
	var native schedulinglisters.PodGroupLister
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		native = informers.Scheduling().V1beta1().PodGroups().Lister()
	}
	members, err := gang.NewMemberIndex(informers.Core().V1().Pods().Informer())
	if err != nil {
		return err
	}
	rt.gangs = gang.NewGangs(labels, native, members, &rt.fabricCfg)
	if rt.claimsHandle != nil {
		if err := rt.buildClaims(rt.claimsHandle); err != nil {
			return err
		}
	}
	if rt.autoStart {
		rt.startLocked()
	}
	return nil
}

// checkGangAPIs says once, at start-up, which gang APIs this scheduler
// reads. With the native gates on, kube-scheduler waits for its native
// PodGroup informer before it schedules anything; on an apiserver that
// does not serve the API it would wait forever, so start-up stops here
// and says what to change. A failed discovery is logged, not fatal.
func checkGangAPIs(logger klog.Logger, client kubernetes.Interface) error {
	gated := utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)
	native, nerr := gang.Serves(client, gang.NativeGroupVersion, "podgroups")
	if gated && nerr == nil && !native {
		return fmt.Errorf("the feature gate %s is on, but the apiserver does not serve %s podgroups: "+
			"start kube-apiserver with --runtime-config=%s=true and the same feature gates, or turn the gates off "+
			"in this scheduler (gangs then use scheduler-plugins PodGroups, %s)",
			features.GenericWorkload, gang.NativeGroupVersion, gang.NativeGroupVersion, v1alpha1.SchemeGroupVersion)
	}
	labels, lerr := gang.Serves(client, v1alpha1.SchemeGroupVersion.String(), v1alpha1.Resource.Resource)
	var nativeSays, labelSays string
	switch {
	case !gated && native:
		nativeSays = fmt.Sprintf("native Workload API off (feature gate %s off); the apiserver serves %s, whose PodGroups this scheduler ignores", features.GenericWorkload, gang.NativeGroupVersion)
	case !gated:
		nativeSays = fmt.Sprintf("native Workload API off (feature gate %s off)", features.GenericWorkload)
	case nerr != nil:
		nativeSays = "native Workload API on; its discovery failed: " + nerr.Error()
	default:
		nativeSays = "native Workload API on (" + gang.NativeGroupVersion + ")"
	}
	switch {
	case lerr != nil:
		labelSays = "discovery failed (looked for again every 30s): " + lerr.Error()
	case labels:
		labelSays = "served (" + v1alpha1.SchemeGroupVersion.String() + ")"
	default:
		labelSays = "not served: their gangs wait until the CRD is installed (looked for every 30s)"
	}
	logger.Info("Gang APIs", "native", nativeSays, "schedulerPluginsPodGroups", labelSays)
	return nil
}

// orPath names where a fact was stated, or its defaults.
func orPath(p *field.Path, fact string) string {
	if p == nil {
		return "the default " + fact
	}
	return p.String()
}

func orDefault[T any](stated *T, def func() T) T {
	if stated != nil {
		return *stated
	}
	return def()
}

func fabricSource(cfg *config.FabricConfig, slurmNameLabel string) (fabric.Source, error) {
	levels := make([]string, len(cfg.Levels))
	keys := make([]string, len(cfg.Levels))
	for i, l := range cfg.Levels {
		levels[i], keys[i] = l.Name, l.NodeLabel
	}
	switch cfg.Source {
	case config.FabricSourceNodeLabels:
		return fabric.NewLabelSource(levels, keys)
	case config.FabricSourceSlurmTopology:
		return slurm.NewTopologySource(cfg.SlurmTopologyFile, slurmNameLabel, levels)
	}
	return nil, fmt.Errorf("fabric source %q is not supported", cfg.Source)
}

// buildDrains builds the controller that drains Slurm nodes Kubernetes
// takes away.
func buildDrains(cfg *config.SlurmDrainConfig, writer slurm.NodeWriter, view *slurm.View, h fwk.Handle) (*slurmdrain.Controller, error) {
	slurmd, err := labels.Parse(cfg.SlurmdPodSelector)
	if err != nil {
		return nil, fmt.Errorf("slurmdPodSelector: %w", err)
	}
	return slurmdrain.New(slurmdrain.Config{
		Informers: h.SharedInformerFactory(), View: view, Writer: writer, SlurmdPods: slurmd, SlurmdNamespaces: sets.New(cfg.SlurmdNamespaces...),
		WritesPerSecond: cfg.WritesPerSecond, Recorder: h.EventRecorder(),
	}), nil
}

func startSlurm(ctx context.Context, cfg *config.SlurmConfig, gpu v1.ResourceName) (*slurm.View, *slurm.Client, error) {
	client, err := slurm.NewClient(slurm.ClientConfig{
		Endpoint: cfg.Endpoint, APIVersion: cfg.APIVersion, User: cfg.User, TokenFile: cfg.TokenFile,
		CAFile: cfg.CAFile, ServerName: cfg.ServerName, InsecureSkipVerify: cfg.InsecureSkipTLSVerify,
		Timeout: time.Duration(cfg.RequestTimeoutSeconds) * time.Second,
	})
	if err != nil {
		return nil, nil, err
	}
	interval := time.Duration(cfg.PollIntervalSeconds) * time.Second
	cache := slurm.NewCache(client, slurm.CacheConfig{Interval: interval})
	view := slurm.NewView(cache, slurm.ViewConfig{
		MaxAge:           time.Duration(cfg.MaxStalenessSeconds) * time.Second,
		FailOpen:         cfg.FailureMode == config.SlurmFailOpen,
		UnhealthyStates:  cfg.UnhealthyStates,
		NodeNameLabel:    cfg.NodeNameLabel,
		SharedNodeLabel:  cfg.SharedNodeLabel,
		ManagedNodeLabel: cfg.ManagedNodeLabel,
		GRESName:         cfg.GRESName,
		GPUResource:      gpu,
	})
	cache.Start(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("endpoint", cfg.Endpoint)), interval)
	return view, client, nil
}

// sealedField reads a field set by Seal; before a successful seal it is
// the zero value.
func sealedField[T any](rt *Runtime, f func() T) T {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return f()
}

// Fabric is the fabric's configuration and its tree tracker.
func (rt *Runtime) Fabric() (*fabric.Tracker, *config.FabricConfig) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.tracker, &rt.fabricCfg
}

// Classes tells research from production and overflow nodes from
// physical ones.
func (rt *Runtime) Classes() *overflow.Classes {
	return sealedField(rt, func() *overflow.Classes { return rt.classes })
}

// SlurmHolder holds pods' GPUs in Slurm, nil when placeholder jobs are
// off.
func (rt *Runtime) SlurmHolder() *slurmhold.Holder {
	return sealedField(rt, func() *slurmhold.Holder { return rt.holder })
}

// Slurm is the Slurm view, nil when Slurm is off.
func (rt *Runtime) Slurm() *slurm.View {
	return sealedField(rt, func() *slurm.View { return rt.slurmView })
}

// External is the Slurm view as what Kubernetes does not see about nodes,
// or nil when Slurm is off (a nil interface, not a nil *slurm.View).
func (rt *Runtime) External() capacity.External {
	if v := rt.Slurm(); v != nil {
		return v
	}
	return nil
}

// Gangs reads gangs of both APIs.
func (rt *Runtime) Gangs() *gang.Gangs {
	return sealedField(rt, func() *gang.Gangs { return rt.gangs })
}

// Reporter writes PodGroup conditions and records gang Events (with the
// recorder of the first plugin that asks).
func (rt *Runtime) Reporter(h fwk.Handle) (*gang.Reporter, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.reporterLocked(h)
}

func (rt *Runtime) reporterLocked(h fwk.Handle) (*gang.Reporter, error) {
	if rt.reporter == nil {
		r, err := gang.NewReporter(rt.ctx, h.ClientSet(), h.KubeConfig(), h.EventRecorder())
		if err != nil {
			return nil, err
		}
		rt.reporter = r
	}
	return rt.reporter, nil
}

// Claims is the store of research claims (nil unless a plugin asked for
// the claim engine with RunClaims before the runtime was sealed).
func (rt *Runtime) Claims() *claims.Store {
	return sealedField(rt, func() *claims.Store { return rt.store })
}

// Ledger is the disruption ledger: which production pods may move, what
// paces them, and what every actor has disrupted.
func (rt *Runtime) Ledger() *disruption.Ledger {
	return sealedField(rt, func() *disruption.Ledger { return rt.ledger })
}

// ClaimsConfig is the claim engine's configuration.
func (rt *Runtime) ClaimsConfig() config.ClaimsConfig {
	return sealedField(rt, func() config.ClaimsConfig { return rt.claimsCfg })
}

// buildClaims builds the claim store, the disruption ledger, the claim engine and
// the return controller (under rt.mu, while sealing); they run once
// StartControllers is called.
func (rt *Runtime) buildClaims(h fwk.Handle) error {
	ctx, informers := rt.ctx, h.SharedInformerFactory()
	dyn, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return fmt.Errorf("research claims: %w", err)
	}
	// An older ResearchClaim CRD would drop what the engine writes: stop
	// here, naming the fix.
	if err := crdcheck.Check(ctx, dyn, crdcheck.ResearchClaims()); err != nil {
		return fmt.Errorf("research claims: %w", err)
	}
	rt.store = claims.NewStore(ctx, dyn, h.ClientSet().Discovery())
	reporter, err := rt.reporterLocked(h)
	if err != nil {
		return fmt.Errorf("research claims: %w", err)
	}
	context.AfterFunc(ctx, metrics.SetSampler("claims", rt.store.Sample(time.Duration(rt.claimsCfg.WaveTimeoutSeconds)*time.Second)))
	rt.ledger, err = disruption.NewLedger(informers, rt.claimsCfg.DefaultMaxUnavailable, h.ClientSet(), h.EventRecorder())
	if err != nil {
		return fmt.Errorf("research claims: %w", err)
	}
	rt.engine, err = claims.NewEngine(claims.Config{
		Client:     h.ClientSet(),
		Conditions: reporter,
		Informers:  informers,
		Store:      rt.store,
		Classes:    rt.classes,
		Ledger:     rt.ledger,
		Recorder:   h.EventRecorder(),
		Activate: func(ctx context.Context, pods []*v1.Pod) {
			byName := make(map[string]*v1.Pod, len(pods))
			for _, p := range pods {
				byName[p.Namespace+"/"+p.Name] = p
			}
			h.Activate(klog.FromContext(ctx), byName)
		},
		RetryBackoff: time.Duration(rt.claimsCfg.RetryBackoffSeconds) * time.Second,
	})
	if err != nil {
		return fmt.Errorf("research claims: %w", err)
	}
	if rt.returnCfg.Enabled {
		var external capacity.External
		if rt.slurmView != nil {
			external = rt.slurmView
		}
		rt.returns = returns.New(returns.Config{
			Return: &rt.returnCfg, Classes: rt.classes, Informers: informers,
			Ledger:   rt.ledger,
			Claimed:  rt.store.NodeClaimed,
			External: external,
			FitFor:   rt.fitFor,
			Recorder: h.EventRecorder(),
		})
	}
	return nil
}

// fitFor is the return controller's fit check for a profile of this
// scheduler, built on first use from the profile's own plugins.
func (rt *Runtime) fitFor(profile string) (*returns.Fit, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if f, ok := rt.fits[profile]; ok {
		return f, f != nil
	}
	h, ok := rt.handles[profile]
	if !ok {
		return nil, false
	}
	f, err := returns.NewFit(rt.ctx, h, rt.pluginConfig(profile))
	if err != nil {
		klog.FromContext(rt.ctx).Error(err, "No return fit check for this profile; its pods are not moved back", "profile", profile)
	}
	rt.fits[profile] = f
	return f, f != nil
}

// pluginConfig is a profile's plugin args: as the scheduler's
// configuration gives them (Attach), or kube-scheduler's defaults.
func (rt *Runtime) pluginConfig(profile string) []schedconfig.PluginConfig {
	for _, p := range rt.profiles {
		if p.SchedulerName == profile {
			return p.PluginConfig
		}
	}
	def, err := latest.Default()
	if err != nil || len(def.Profiles) == 0 {
		return nil
	}
	return def.Profiles[0].PluginConfig
}

// Attach hands the runtime its scheduler's completed configuration, after
// kube-scheduler's Setup and before its Run: the profiles' plugin args (for
// the return controller's fit checks), and its leader election. The claim
// engine, the return controller and Slurm drains run only on the replica
// that leads:
// without leader election they start now; with it, once this replica
// first holds the scheduler's own Lease (kube-scheduler exits when it loses
// it, and its controllers with it).
func (rt *Runtime) Attach(cc *schedulerserverconfig.CompletedConfig) {
	rt.mu.Lock()
	rt.profiles = cc.ComponentConfig.Profiles
	rt.mu.Unlock()
	if cc.LeaderElection == nil {
		rt.StartControllers()
		return
	}
	cc.LeaderElection.Lock = &leadingLock{Interface: cc.LeaderElection.Lock, lead: rt.StartControllers}
}

// StartControllers starts the claim engine, the return controller and
// Slurm drains, once; the runtime must be sealed (it is, after kube-scheduler's Setup).
func (rt *Runtime) StartControllers() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sealed && rt.err == nil {
		rt.startLocked()
	}
}

func (rt *Runtime) startLocked() {
	if rt.started {
		return
	}
	rt.started = true
	if rt.engine != nil {
		go rt.engine.Run(rt.ctx)
	}
	if rt.returns != nil {
		go rt.returns.Run(rt.ctx)
	}
	if rt.drains != nil {
		go rt.drains.Run(rt.ctx)
	}
	if rt.holder != nil {
		go rt.holder.Run(rt.ctx)
	}
}

// leadingLock is the scheduler's leader-election lock, telling the runtime
// when this replica first holds it: the lock is written only by its
// holder, so a write under this replica's identity that succeeds means it
// leads.
type leadingLock struct {
	resourcelock.Interface
	once sync.Once
	lead func()
}

func (l *leadingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.written(err, ler)
	return err
}

func (l *leadingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.written(err, ler)
	return err
}

func (l *leadingLock) written(err error, ler resourcelock.LeaderElectionRecord) {
	if err == nil && ler.HolderIdentity != "" && ler.HolderIdentity == l.Identity() {
		l.once.Do(func() { go l.lead() })
	}
}

// Defaults of facts nobody states: the v1 defaults, converted.

func defaultFabric() config.FabricConfig {
	var in configv1.FabricConfig
	configv1.SetDefaults_FabricConfig(&in)
	var out config.FabricConfig
	_ = configv1.Convert_v1_FabricConfig_To_config_FabricConfig(&in, &out, nil)
	return out
}

func defaultOverflow() config.OverflowConfig {
	var in configv1.OverflowConfig
	configv1.SetDefaults_OverflowConfig(&in)
	var out config.OverflowConfig
	_ = configv1.Convert_v1_OverflowConfig_To_config_OverflowConfig(&in, &out, nil)
	return out
}

func defaultSlurm() config.SlurmConfig {
	var in configv1.SlurmConfig
	configv1.SetDefaults_SlurmConfig(&in)
	var out config.SlurmConfig
	_ = configv1.Convert_v1_SlurmConfig_To_config_SlurmConfig(&in, &out, nil)
	return out
}

func defaultClaims() config.ClaimsConfig {
	var in configv1.ClaimsConfig
	configv1.SetDefaults_ClaimsConfig(&in)
	var out config.ClaimsConfig
	_ = configv1.Convert_v1_ClaimsConfig_To_config_ClaimsConfig(&in, &out, nil)
	return out
}

func defaultReturn() config.ReturnConfig {
	var in configv1.ReturnConfig
	configv1.SetDefaults_ReturnConfig(&in)
	var out config.ReturnConfig
	_ = configv1.Convert_v1_ReturnConfig_To_config_ReturnConfig(&in, &out, nil)
	return out
}

// namespaceLabels reads namespaces' labels from the scheduler's informer,
// for the tenancy policy; nil (no informer) when the policy selects every
// namespace.
func namespaceLabels(factory informers.SharedInformerFactory, cfg *config.OverflowConfig) func(string) (labels.Set, bool) {
	if cfg.ResearchNamespaces == nil && cfg.ProductionNamespaces == nil {
		return nil
	}
	lister := factory.Core().V1().Namespaces().Lister()
	return func(name string) (labels.Set, bool) {
		ns, err := lister.Get(name)
		if err != nil {
			return nil, false
		}
		return ns.Labels, true
	}
}
