// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
)

// Scenario is a mixed research/production timeline, written in YAML:
//
//	name: research claims the cluster
//	cluster: {spines: 2, leavesPerSpine: 2, nodesPerLeaf: 4, gpusPerNode: 8, overflowGPUs: 512}
//	events:
//	- at: 0s
//	  deployment: {name: llm, replicas: 64, gpus: 1, maxUnavailable: "25%"}
//	- at: 20s
//	  gang: {name: pretrain, pods: 16, gpus: 8, level: leaf, mode: preferred}
//	- at: 60s
//	  deleteGang: pretrain
//	end: 90s
//	pluginArgs:
//	  OverflowPreemption: {return: {hysteresisSeconds: 10}}
//
// Times are real seconds from the start of the run. PluginArgs, when set,
// is merged into the args of the named plugins of the sluice configuration
// (see registry.MergePluginArgs): a scenario of a minute or two can
// shorten the return controller's timers that way.
type Scenario struct {
	Name       string                    `json:"name"`
	Cluster    ScenarioCluster           `json:"cluster"`
	Events     []Event                   `json:"events"`
	End        metav1.Duration           `json:"end"`
	PluginArgs map[string]map[string]any `json:"pluginArgs,omitempty"`
}

// ScenarioCluster is a regular fabric plus one overflow node.
type ScenarioCluster struct {
	Blocks         int `json:"blocks,omitempty"`
	Spines         int `json:"spines"`
	LeavesPerSpine int `json:"leavesPerSpine"`
	NodesPerLeaf   int `json:"nodesPerLeaf"`
	GPUsPerNode    int `json:"gpusPerNode"`
	OverflowGPUs   int `json:"overflowGPUs"`
}

// Event is one thing that happens at a time; exactly one field besides At.
type Event struct {
	At         metav1.Duration  `json:"at"`
	Deployment *ScenarioService `json:"deployment,omitempty"`
	Gang       *ScenarioGang    `json:"gang,omitempty"`
	DeleteGang string           `json:"deleteGang,omitempty"`
	Scale      *ScenarioScale   `json:"scale,omitempty"`
}

// ScenarioService is a production Deployment with a PodDisruptionBudget.
type ScenarioService struct {
	Name           string             `json:"name"`
	Replicas       int32              `json:"replicas"`
	GPUs           int                `json:"gpus"`
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable"`
}

// ScenarioGang is a research gang (native PodGroup).
type ScenarioGang struct {
	Name  string `json:"name"`
	Pods  int    `json:"pods"`
	GPUs  int    `json:"gpus"`
	Level string `json:"level,omitempty"`
	Mode  string `json:"mode,omitempty"`
}

// ScenarioScale changes a Deployment's replicas.
type ScenarioScale struct {
	Name     string `json:"name"`
	Replicas int32  `json:"replicas"`
}

// LoadScenario reads a scenario file; errors name the file and field.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return s, nil
}

func (s *Scenario) validate() error {
	c := s.Cluster
	if c.Spines <= 0 || c.LeavesPerSpine <= 0 || c.NodesPerLeaf <= 0 || c.GPUsPerNode <= 0 {
		return fmt.Errorf("cluster: spines, leavesPerSpine, nodesPerLeaf and gpusPerNode must be positive")
	}
	for i, e := range s.Events {
		n := 0
		for _, set := range []bool{e.Deployment != nil, e.Gang != nil, e.DeleteGang != "", e.Scale != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("events[%d]: want exactly one of deployment, gang, deleteGang, scale", i)
		}
		if g := e.Gang; g != nil && (g.Pods <= 0 || g.GPUs <= 0 || g.Name == "") {
			return fmt.Errorf("events[%d].gang: name, pods and gpus are required", i)
		}
		if d := e.Deployment; d != nil && (d.Replicas <= 0 || d.Name == "") {
			return fmt.Errorf("events[%d].deployment: name and replicas are required", i)
		}
	}
	if s.End.Duration <= 0 {
		return fmt.Errorf("end: must be positive")
	}
	return nil
}

// Sample is the cluster at one moment of a scenario.
type Sample struct {
	T                  time.Duration
	ProductionPhysical int // production GPUs on physical nodes
	ProductionOverflow int // production GPUs on the overflow node
	Research           int // research GPUs
}

// ScenarioResult is what a scenario run measured.
type ScenarioResult struct {
	Name string
	// Evictions by reason ("preemption", "return"), from the events sluice
	// records on the pods it moves.
	Evictions map[string]int
	// OverflowGPUHours is production GPUs on the overflow node integrated
	// over time.
	OverflowGPUHours float64
	// GangRunning is, per gang, the time from its submission to all its
	// pods bound.
	GangRunning map[string]time.Duration
	// GangLeaves is, per gang, the leaf switches it spans once running;
	// GangLowerBound the fewest that could hold it (every node's GPUs
	// count: a claim may move production anywhere).
	GangLeaves, GangLowerBound map[string]int
	Samples                    []Sample
}

const overflowNodeName = "overflow"

// RunScenario plays a scenario in real time on an environment with
// controllers (see EnvOptions.Controllers), sampling every interval.
func RunScenario(ctx context.Context, env *Env, s *Scenario, interval time.Duration, progress func(done, total int)) (ScenarioResult, error) {
	c := s.Cluster
	nodes := Fabric(max(c.Blocks, 1), c.Spines, c.LeavesPerSpine, c.NodesPerLeaf, c.GPUsPerNode)
	objs := make([]*v1.Node, 0, len(nodes)+1)
	for _, n := range nodes {
		objs = append(objs, n.Node())
	}
	vk := NodeSpec{Name: overflowNodeName, GPUs: c.OverflowGPUs, MilliCPU: 10_000_000, MemoryMiB: 100 << 20,
		Labels: map[string]string{"type": "virtual-kubelet"}}.Node()
	vk.Spec.Taints = []v1.Taint{{Key: "virtual-kubelet.io/provider", Value: "sluice", Effect: v1.TaintEffectNoSchedule}}
	vk.Status.Capacity[v1.ResourcePods] = resource.MustParse("5000")
	vk.Status.Allocatable[v1.ResourcePods] = resource.MustParse("5000")
	objs = append(objs, vk)
	if err := env.CreateNodes(ctx, objs); err != nil {
		return ScenarioResult{}, err
	}
	res := ScenarioResult{Name: s.Name, Evictions: map[string]int{}, GangRunning: map[string]time.Duration{},
		GangLeaves: map[string]int{}, GangLowerBound: map[string]int{}}
	tree, _, err := treeOf(nodes)
	if err != nil {
		return res, err
	}
	whole := map[string]int{}
	for _, n := range nodes {
		whole[n.Name] = n.GPUs
	}
	events := append([]Event(nil), s.Events...)
	sort.SliceStable(events, func(i, j int) bool { return events[i].At.Duration < events[j].At.Duration })
	start := time.Now()
	submitted := map[string]time.Duration{}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	next := 0
	for {
		elapsed := time.Since(start)
		for next < len(events) && events[next].At.Duration <= elapsed {
			if err := env.apply(ctx, events[next]); err != nil {
				return res, err
			}
			if g := events[next].Gang; g != nil {
				submitted[g.Name] = elapsed
				res.GangLowerBound[g.Name], _ = boundsFor(tree, whole, GangJob{Pods: g.Pods, GPUsPerPod: g.GPUs})
			}
			next++
		}
		sample, bound, err := env.sample(elapsed)
		if err != nil {
			return res, err
		}
		if n := len(res.Samples); n > 0 {
			dt := (sample.T - res.Samples[n-1].T).Hours()
			res.OverflowGPUHours += float64(res.Samples[n-1].ProductionOverflow) * dt
		}
		res.Samples = append(res.Samples, sample)
		for name, at := range submitted {
			if _, done := res.GangRunning[name]; !done && bound[name] {
				res.GangRunning[name] = elapsed - at
				if res.GangLeaves[name], err = env.gangLeaves(tree, name); err != nil {
					return res, err
				}
			}
		}
		if progress != nil {
			progress(int(elapsed/time.Second), int(s.End.Duration/time.Second))
		}
		if elapsed >= s.End.Duration {
			break
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	evs, err := env.Client.CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	for _, e := range evs.Items {
		switch e.Reason {
		case "MovedToOverflow":
			res.Evictions["preemption"] += int(max(e.Count, 1))
		case "ReturnedToPhysical":
			res.Evictions["return"] += int(max(e.Count, 1))
		}
	}
	return res, nil
}

// apply performs one scenario event.
func (e *Env) apply(ctx context.Context, ev Event) error {
	switch {
	case ev.Deployment != nil:
		d := ev.Deployment
		pod := PodSpec{Name: "x", GPUs: d.GPUs}.Pod(e.Policy)
		pod.Spec.Tolerations = []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}}
		labels := map[string]string{"app": d.Name, "sim": "true"}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: d.Name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(d.Replicas),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name}},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
			},
		}
		if _, err := e.Client.AppsV1().Deployments(Namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			return err
		}
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: d.Name},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &d.MaxUnavailable,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name}}},
		}
		_, err := e.Client.PolicyV1().PodDisruptionBudgets(Namespace).Create(ctx, pdb, metav1.CreateOptions{})
		return err
	case ev.Gang != nil:
		g := ev.Gang
		job := GangJob{Name: g.Name, Pods: g.Pods, GPUsPerPod: g.GPUs}
		annotations := map[string]string{}
		if g.Level != "" {
			annotations[gang.FabricLevelAnnotation] = g.Level
		}
		if g.Mode != "" {
			annotations[gang.FabricModeAnnotation] = g.Mode
		}
		_, err := e.submitGang(ctx, job, annotations)
		return err
	case ev.DeleteGang != "":
		pods, err := e.Pods(Namespace)
		if err != nil {
			return err
		}
		var names []string
		for _, p := range pods {
			if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName == ev.DeleteGang {
				names = append(names, p.Name)
			}
		}
		if err := e.DeletePods(ctx, Namespace, names); err != nil {
			return err
		}
		return e.Client.SchedulingV1beta1().PodGroups(Namespace).Delete(ctx, ev.DeleteGang, metav1.DeleteOptions{})
	case ev.Scale != nil:
		d, err := e.Client.AppsV1().Deployments(Namespace).Get(ctx, ev.Scale.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(ev.Scale.Replicas)
		_, err = e.Client.AppsV1().Deployments(Namespace).Update(ctx, d, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// sample counts GPUs by class and place, and which gangs are fully bound.
// gangLeaves is the number of leaves a gang's bound pods span.
func (e *Env) gangLeaves(tree *fabric.Tree, gang string) (int, error) {
	pods, err := e.Pods(Namespace)
	if err != nil {
		return 0, err
	}
	var idx []int
	for _, p := range pods {
		if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName == gang {
			if i, ok := tree.NodeIndex(p.Spec.NodeName); ok {
				idx = append(idx, i)
			}
		}
	}
	return tree.Span(idx, 1), nil
}

func (e *Env) sample(t time.Duration) (Sample, map[string]bool, error) {
	pods, err := e.Pods(Namespace)
	if err != nil {
		return Sample{}, nil, err
	}
	s := Sample{T: t}
	members, bound := map[string]int{}, map[string]int{}
	for _, p := range pods {
		q := p.Spec.Containers[0].Resources.Requests[GPU]
		gpus := int(q.Value())
		g := ""
		if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
			g = *sg.PodGroupName
			members[g]++
		}
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		switch {
		case strings.EqualFold(p.Spec.PriorityClassName, "research"):
			s.Research += gpus
			bound[g]++
		case p.Spec.NodeName == overflowNodeName:
			s.ProductionOverflow += gpus
		default:
			s.ProductionPhysical += gpus
		}
	}
	done := map[string]bool{}
	for g, n := range members {
		done[g] = bound[g] == n
	}
	return s, done, nil
}
