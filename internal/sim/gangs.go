// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-sched/sluice/pkg/fabric"
)

// GangJob is a training job: a gang of pods that all start together.
type GangJob struct {
	Name       string
	Pods       int
	GPUsPerPod int
	Submit     time.Duration
	Duration   time.Duration
	// TopologyKey, when set, replaces the policy's topology constraint
	// (the node label of the lowest level that can hold the gang).
	TopologyKey string
}

// GangOutcome is where a gang went.
type GangOutcome struct {
	Name       string
	Pods       int
	GPUsPerPod int
	Placed     bool
	// Leaves and Nodes are the leaf switches and nodes the gang spans;
	// LowerBound and LowerBoundNodes the fewest any placement could have
	// used with the free capacity at the time it was placed.
	Leaves, LowerBound, Nodes, LowerBoundNodes int
	// Waited is the simulated time from submission to placement; Ran is
	// how long it ran once placed.
	Waited, Ran time.Duration
}

// GangResult is one policy's run of a gang workload.
type GangResult struct {
	Policy   string
	Gangs    []GangOutcome
	Duration time.Duration
	// GPUs is the cluster's; Makespan the simulated time until the last
	// job ended (what utilisation is measured over).
	GPUs     int
	Makespan time.Duration
	// Undecided counts the times the scheduler gave no outcome for a
	// waiting gang within a minute after room was freed (it was taken as
	// not placed then).
	Undecided int
}

// GangSummary sums up a gang run.
type GangSummary struct {
	Gangs, Placed int
	// AtLowerBound counts placed gangs on no more leaves than the lower
	// bound; AtNodeBound on no more nodes than theirs.
	AtLowerBound, AtNodeBound int
	// MeanExtraLeaves and MeanExtraNodes are the mean spans over the bounds.
	MeanExtraLeaves, MeanExtraNodes float64
	// MeanWait is the mean simulated wait of placed gangs.
	MeanWait time.Duration
	// GPUSeconds is the GPU time the placed gangs ran.
	GPUSeconds float64
}

// Utilisation is the share of the cluster's GPU time over the makespan
// that s's gangs ran (0 when unknown).
func (r GangResult) Utilisation(s GangSummary) float64 {
	if r.GPUs == 0 || r.Makespan <= 0 {
		return 0
	}
	return s.GPUSeconds / (float64(r.GPUs) * r.Makespan.Seconds())
}

// Summary sums up the run.
func (r GangResult) Summary() GangSummary { return summarize(r.Gangs) }

// SizeSummary sums up the gangs of one size class.
type SizeSummary struct {
	// Size is "1 pod" (a single pod meets every bound by construction)
	// or a range of the gang's GPUs, e.g. "9-32 GPUs".
	Size string
	GangSummary
}

// sizeClass is a class of multi-pod gangs, by their GPUs.
type sizeClass struct {
	upTo int
	name string
}

// sizeClasses are the classes of multi-pod gangs, smallest first.
func sizeClasses() []sizeClass {
	return []sizeClass{{8, "2-8 GPUs"}, {32, "9-32 GPUs"}, {128, "33-128 GPUs"}, {1 << 30, "over 128 GPUs"}}
}

// BySize sums up the run by gang size: single-pod gangs apart, multi-pod
// gangs by their GPUs; classes with no gang are left out.
func (r GangResult) BySize() []SizeSummary {
	sizes := sizeClasses()
	classes := make([][]GangOutcome, len(sizes)+1)
	for _, g := range r.Gangs {
		k := 0
		if g.Pods > 1 {
			for k = 1; g.Pods*g.GPUsPerPod > sizes[k-1].upTo; k++ {
			}
		}
		classes[k] = append(classes[k], g)
	}
	var out []SizeSummary
	for k, gangs := range classes {
		if len(gangs) == 0 {
			continue
		}
		name := "1 pod"
		if k > 0 {
			name = sizes[k-1].name
		}
		out = append(out, SizeSummary{Size: name, GangSummary: summarize(gangs)})
	}
	return out
}

func summarize(gangs []GangOutcome) GangSummary {
	s := GangSummary{Gangs: len(gangs)}
	extraLeaves, extraNodes := 0, 0
	var wait time.Duration
	for _, g := range gangs {
		if !g.Placed {
			continue
		}
		s.Placed++
		if g.Leaves <= g.LowerBound {
			s.AtLowerBound++
		}
		if g.Nodes <= g.LowerBoundNodes {
			s.AtNodeBound++
		}
		extraLeaves += max(g.Leaves-g.LowerBound, 0)
		extraNodes += max(g.Nodes-g.LowerBoundNodes, 0)
		wait += g.Waited
		s.GPUSeconds += float64(g.Pods*g.GPUsPerPod) * g.Ran.Seconds()
	}
	if s.Placed > 0 {
		s.MeanExtraLeaves = float64(extraLeaves) / float64(s.Placed)
		s.MeanExtraNodes = float64(extraNodes) / float64(s.Placed)
		s.MeanWait = wait / time.Duration(s.Placed)
	}
	return s
}

type runningJob struct {
	end  time.Duration
	pods []string
}

// RunGangs replays jobs first-in first-out in simulated time: at each
// submission, jobs that have ended by then leave; a gang that does not fit
// waits (and blocks the queue) while running jobs end in order, until it
// fits or nothing is left to end. Every gang is a native PodGroup (the
// policy may add upstream's topology constraint); where it lands is read
// from the pods' nodes.
func RunGangs(ctx context.Context, env *Env, nodes []NodeSpec, jobs []GangJob, progress func(done, total int)) (GangResult, error) {
	start := time.Now()
	if err := createSpecs(ctx, env, nodes); err != nil {
		return GangResult{}, err
	}
	tree, byName, err := treeOf(nodes)
	if err != nil {
		return GangResult{}, err
	}
	res := GangResult{Policy: env.Policy.Name}
	for _, n := range nodes {
		res.GPUs += n.GPUs
	}
	var running []runningJob
	now := time.Duration(0)
	for i, job := range jobs {
		now = max(now, job.Submit)
		sort.Slice(running, func(a, b int) bool { return running[a].end < running[b].end })
		for len(running) > 0 && running[0].end <= now {
			if err := env.finish(ctx, running[0].pods); err != nil {
				return res, err
			}
			running = running[1:]
		}
		lb, lbNodes, err := env.lowerBound(tree, byName, job)
		if err != nil {
			return res, err
		}
		pods, err := env.submitGang(ctx, job, nil)
		if err != nil {
			return res, err
		}
		out := GangOutcome{Name: job.Name, Pods: job.Pods, GPUsPerPod: job.GPUsPerPod, LowerBound: lb, LowerBoundNodes: lbNodes}
		decided, err := env.Wait(ctx, pods, time.Minute, false)
		if err != nil {
			return res, fmt.Errorf("gang %s: %w", job.Name, err)
		}
		placed := allBound(decided)
		submitted := now
		for !placed && len(running) > 0 {
			now = max(now, running[0].end)
			// The scheduler's next outcome for the gang must show as a
			// change of its pods: their PodScheduled condition goes
			// before room frees (a status change the scheduler does not
			// retry on).
			if err := env.clearScheduled(ctx, pods); err != nil {
				return res, err
			}
			if err := env.finish(ctx, running[0].pods); err != nil {
				return res, err
			}
			running = running[1:]
			if out.LowerBound, out.LowerBoundNodes, err = env.lowerBound(tree, byName, job); err != nil {
				return res, err
			}
			if out.LowerBound == 0 {
				// Too few free GPUs anywhere: no policy can place it, so
				// there is no decision to wait for; the next job ends.
				continue
			}
			if decided, err = env.Wait(ctx, pods, time.Minute, false); err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				res.Undecided++
			}
			placed = len(decided) == len(pods) && allBound(decided)
		}
		names := make([]string, len(pods))
		for j, p := range pods {
			names[j] = p.Name
		}
		if placed {
			out.Placed, out.Waited = true, now-submitted
			var idx []int
			for _, o := range decided {
				if k, ok := tree.NodeIndex(o.Node); ok {
					idx = append(idx, k)
				}
			}
			out.Leaves, out.Nodes = tree.Span(idx, 1), tree.Span(idx, fabric.NodeLevel)
			out.Ran = job.Duration
			running = append(running, runningJob{end: now + job.Duration, pods: names})
		} else if err := env.finish(ctx, names); err != nil {
			return res, err
		}
		res.Gangs = append(res.Gangs, out)
		if progress != nil {
			progress(i+1, len(jobs))
		}
	}
	res.Makespan = now
	for _, r := range running {
		res.Makespan = max(res.Makespan, r.end)
	}
	res.Duration = time.Since(start)
	return res, nil
}

// clearScheduled removes the PodScheduled condition of pods still pending.
func (e *Env) clearScheduled(ctx context.Context, pods []*v1.Pod) error {
	for _, p := range pods {
		for range 3 { // a conflict with the scheduler's own update: again
			cur, err := e.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			keep := cur.Status.Conditions[:0]
			for _, c := range cur.Status.Conditions {
				if c.Type != v1.PodScheduled {
					keep = append(keep, c)
				}
			}
			if cur.Spec.NodeName != "" || len(keep) == len(cur.Status.Conditions) {
				break
			}
			cur.Status.Conditions = keep
			if _, err = e.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil {
				break
			} else if !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	return nil
}

func allBound(decided map[string]Outcome) bool {
	for _, o := range decided {
		if o.Node == "" {
			return false
		}
	}
	return true
}

// submitGang creates a job's PodGroup (with annotations, and the policy's
// topology constraint if it has one) and its pods.
func (e *Env) submitGang(ctx context.Context, job GangJob, annotations map[string]string) ([]*v1.Pod, error) {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: job.Name, Annotations: annotations},
		Spec: schedulingv1beta1.PodGroupSpec{
			PriorityClassName: "research",
			SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(job.Pods)}},
		},
	}
	if key := e.Policy.TopologyKey; key != "" {
		if job.TopologyKey != "" {
			key = job.TopologyKey
		}
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}},
		}
	}
	if _, err := e.Client.SchedulingV1beta1().PodGroups(Namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating PodGroup %s: %w", job.Name, err)
	}
	return e.createGangPods(ctx, job)
}

// createGangPods creates a job's pods, members of its PodGroup.
func (e *Env) createGangPods(ctx context.Context, job GangJob) ([]*v1.Pod, error) {
	var pods []*v1.Pod
	for i := 0; i < job.Pods; i++ {
		p := PodSpec{Name: fmt.Sprintf("%s-%d", job.Name, i), GPUs: job.GPUsPerPod, MilliCPU: 1000, MemoryMiB: 1024, Research: true, Gang: job.Name}.Pod(e.Policy)
		if _, err := e.Client.CoreV1().Pods(Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating pod %s: %w", p.Name, err)
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// finish deletes a job's pods and waits until the watch has seen them go.
func (e *Env) finish(ctx context.Context, pods []string) error {
	if err := e.DeletePods(ctx, Namespace, pods); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		changed := e.changes()
		left := 0
		for _, p := range pods {
			if _, err := e.pods.Pods(Namespace).Get(p); err == nil {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("pods of a finished job still exist after a minute")
}

// treeOf builds the fabric tree of node specs.
func treeOf(nodes []NodeSpec) (*fabric.Tree, map[string]NodeSpec, error) {
	fn := make([]fabric.Node, len(nodes))
	byName := make(map[string]NodeSpec, len(nodes))
	for i, n := range nodes {
		fn[i] = fabric.Node{Name: n.Name, Switches: []string{n.Leaf, n.Spine, n.Block}}
		byName[n.Name] = n
	}
	tree, err := fabric.Build([]string{"leaf", "spine", "block"}, fn)
	return tree, byName, err
}

// lowerBound is the fewest leaves and nodes any placement of the job could
// use now.
func (e *Env) lowerBound(tree *fabric.Tree, nodes map[string]NodeSpec, job GangJob) (int, int, error) {
	pods, err := e.Pods(Namespace)
	if err != nil {
		return 0, 0, err
	}
	free := map[string]int{}
	for name, n := range nodes {
		free[name] = n.GPUs
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		q := p.Spec.Containers[0].Resources.Requests[GPU]
		free[p.Spec.NodeName] -= int(q.Value())
	}
	leaves, nodesLB := boundsFor(tree, free, job)
	return leaves, nodesLB, nil
}

// boundsFor is the fewest leaves and nodes whose free GPUs (by node name)
// hold the job's pods.
func boundsFor(tree *fabric.Tree, free map[string]int, job GangJob) (leaves, nodes int) {
	slots := make([]int, tree.NumNodes())
	for name, f := range free {
		if i, ok := tree.NodeIndex(name); ok && job.GPUsPerPod > 0 {
			slots[i] = max(f, 0) / job.GPUsPerPod
		}
	}
	o := tree.Overlay(slots)
	leaves, _ = o.LowerBound(job.Pods, 1)
	nodes, _ = o.LowerBound(job.Pods, fabric.NodeLevel)
	return leaves, nodes
}
