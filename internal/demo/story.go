// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/internal/invariants"
)

// budgets() are the PDBs' maxUnavailable, cycled over the Deployments.
func budgets() []intstr.IntOrString {
	return []intstr.IntOrString{intstr.FromString("25%"), intstr.FromInt32(2), intstr.FromString("10%"), intstr.FromInt32(4)}
}

// result is what the story measured, for the report.
type result struct {
	deployments  []deploymentResult
	gangPods     int
	gangGPUs     int
	claimSeconds float64
	// coldClaimSeconds and coldReturnSeconds are the same claim and
	// return, break-before-make, in the same run.
	coldClaimSeconds  float64
	coldReturnSeconds float64
	gangNodes         []string
	gangLeaves        []string
	leafLowerBound    int
	returnSeconds     float64
	onOverflowEnd     int
	drained           string
	drainedPods       int
	steps             []stepResult
	// violations are what the invariant watcher saw (internal/invariants).
	violations []string
	evictions  map[string]int
}

type deploymentResult struct {
	name           string
	replicas       int
	maxUnavailable string
	allowed        int
}

type stepResult struct {
	name    string
	started time.Duration
	took    time.Duration
}

// The phases availability is measured over: the claim and the return
// with make-before-break (the default), then, for comparison, without.
const (
	phaseClaim      = "claim"
	phaseReturn     = "return"
	phaseColdClaim  = "claim, break-before-make"
	phaseColdReturn = "return, break-before-make"
)

// storySteps is how many steps the story has.
const storySteps = 8

// story plays the steps: a claim and a return make-before-break, then the
// same break-before-make for comparison.
func (d *demo) story(ctx context.Context) error {
	o := d.opts
	// A failed step ends the phase it was in, for the report.
	defer d.obs.setPhase("")
	// Production takes seven GPUs in eight, so the GPUs left free lie where
	// production's placement left them: a gang placement that starts from
	// free GPUs, not from the fabric, spans more leaves than it needs.
	capacity := len(d.cluster.nodes) * o.GPUsPerNode
	perDeployment := capacity * 7 / 8 / o.Deployments
	total := perDeployment * o.Deployments

	// 1. Production fills the cluster.
	if err := d.step(ctx, "production inference fills the cluster", func() error {
		for i := range o.Deployments {
			name := fmt.Sprintf("llm-%c", 'a'+i)
			budget := budgets()[i%len(budgets())]
			if err := d.createDeployment(ctx, name, perDeployment, budget); err != nil {
				return err
			}
			allowed, _ := intstr.GetScaledValueFromIntOrPercent(&budget, perDeployment, true)
			d.result.deployments = append(d.result.deployments, deploymentResult{name: name, replicas: perDeployment, maxUnavailable: budget.String(), allowed: allowed})
		}
		d.say("%d inference Deployments x %d replicas x 1 GPU, each with a PodDisruptionBudget (maxUnavailable %s)", o.Deployments, perDeployment, budgetList(o.Deployments))
		err := d.wait(ctx, "every production replica Ready on a physical GPU", func(s sample) bool {
			return s.production == total && s.productionReady == total
		})
		for _, dep := range d.result.deployments {
			d.obs.track(dep.name, dep.replicas)
		}
		d.obs.recount()
		if err != nil {
			return err
		}
		// From here on every pod, budget and controller change is checked:
		// no budget broken, no research or controller-less pod evicted, no
		// production evicted beyond the overflow room, no gang half bound
		// at rest.
		inv, err := invariants.Start(ctx, d.cluster.client, invariants.Options{
			Namespace: namespace, OverflowGPUs: int64(total), IsOverflowNode: func(n string) bool { return n == overflowNode },
		})
		if err != nil {
			return err
		}
		inv.Arm()
		d.inv = inv
		return nil
	}); err != nil {
		return err
	}

	// 2. A research gang claims most of the cluster.
	gangGPUs := o.GangPods * o.GPUsPerNode
	d.result.gangPods, d.result.gangGPUs = o.GangPods, gangGPUs
	claimStart := time.Now()
	d.obs.setPhase(phaseClaim)
	if err := d.step(ctx, fmt.Sprintf("a %d-GPU research gang claims %d of the %d nodes", gangGPUs, o.GangPods, len(d.cluster.nodes)), func() error {
		return d.createGang(ctx, "pretrain", o.GangPods, o.GPUsPerNode)
	}); err != nil {
		return err
	}

	// 3. Production overflows in PDB-safe waves; the gang runs.
	if err := d.step(ctx, "production moves to the overflow node in PodDisruptionBudget-safe waves", func() error {
		last := -1
		return d.wait(ctx, "the gang running and every production replica Ready again", func(s sample) bool {
			if s.overflowReady/16 != last/16 {
				last = s.overflowReady
				d.say("overflow node: %d production pods Ready on the remote cluster; gang pods running %d/%d", s.overflowReady, s.researchRunning, o.GangPods)
			}
			return s.researchRunning == o.GangPods && s.productionReady == s.productionPods && s.productionPods == total
		})
	}); err != nil {
		return err
	}
	d.result.claimSeconds = time.Since(claimStart).Seconds()
	d.obs.setPhase("")

	// 4. The gang runs inside the fewest leaves.
	if err := d.step(ctx, "the gang runs inside the fewest leaves", func() error {
		nodes, leaves, err := d.gangPlacement(ctx, "pretrain")
		if err != nil {
			return err
		}
		d.result.gangNodes, d.result.gangLeaves = nodes, leaves
		d.result.leafLowerBound = (o.GangPods + o.NodesPerLeaf - 1) / o.NodesPerLeaf
		d.say("research claim done in %.1fs: the gang runs on %d nodes in %d leaves (%s); no placement could use fewer than %d",
			d.result.claimSeconds, len(nodes), len(leaves), strings.Join(leaves, ", "), d.result.leafLowerBound)
		for _, dep := range d.result.deployments {
			a, _ := d.obs.availabilityOf(phaseClaim, dep.name)
			d.say("  %s: at least %d of %d replicas Ready during the claim (PDB allows %d unavailable), %.0f replica-seconds below %d",
				dep.name, a.minReady, dep.replicas, dep.allowed, a.belowSeconds, dep.replicas)
		}
		if len(leaves) > d.result.leafLowerBound {
			return fmt.Errorf("the gang spans %d leaves, more than the %d a placement needs", len(leaves), d.result.leafLowerBound)
		}
		// Production on the overflow node is still a pod of this cluster:
		// its log comes through the apiserver, the overflow node's kubelet
		// API, the remote apiserver and the remote kubelet.
		pod, line, err := d.overflowLog(ctx)
		if err != nil {
			return fmt.Errorf("kubectl logs of a pod on the overflow node: %w", err)
		}
		d.say("kubectl logs %s (on %s): %s", pod, overflowNode, line)
		if o.Slurm != nil {
			if err := d.drain(ctx); err != nil {
				return err
			}
		}
		d.say("training for %s", o.Hold)
		select {
		case <-time.After(o.Hold):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}); err != nil {
		return err
	}

	// 5. The gang ends.
	if err := d.step(ctx, "the gang ends", func() error {
		if err := d.deleteGang(ctx, "pretrain"); err != nil {
			return err
		}
		return d.wait(ctx, "the gang's pods gone", func(s sample) bool { return s.researchPods == 0 })
	}); err != nil {
		return err
	}

	// 6. Production returns.
	returnStart := time.Now()
	d.obs.setPhase(phaseReturn)
	expectPhysical := total
	if d.result.drained != "" {
		expectPhysical = min(total, capacity-o.GPUsPerNode)
	}
	if err := d.step(ctx, "production returns to the physical GPUs", func() error {
		d.say("the return controller moves production back once GPUs have been free for %s, one PDB-safe wave at a time", o.ReturnHysteresis)
		last := -1
		return d.wait(ctx, fmt.Sprintf("%d production replicas Ready on physical GPUs", expectPhysical), func(s sample) bool {
			if s.production/32 != last/32 {
				last = s.production
				d.say("back on physical GPUs: %d of %d", s.production, expectPhysical)
			}
			return s.production == expectPhysical && s.productionReady == total && s.overflowPods == total-expectPhysical
		})
	}); err != nil {
		return err
	}
	d.result.returnSeconds = time.Since(returnStart).Seconds()
	d.obs.setPhase("")
	for _, dep := range d.result.deployments {
		a, _ := d.obs.availabilityOf(phaseReturn, dep.name)
		d.say("  %s: at least %d of %d replicas Ready during the return, %.0f replica-seconds below %d", dep.name, a.minReady, dep.replicas, a.belowSeconds, dep.replicas)
	}
	final := d.obs.take()
	d.result.onOverflowEnd = final.overflowPods
	if d.result.drained != "" {
		for _, n := range d.cluster.nodes {
			if n.slurm == d.result.drained {
				for _, g := range final.gpus[n.name] {
					if g != free {
						d.result.drainedPods++
					}
				}
				d.say("Slurm-drained %s (%s) got %d GPUs of production: pods avoided it", n.name, n.slurm, d.result.drainedPods)
				if d.result.drainedPods > 0 {
					return fmt.Errorf("production was placed on %s although Slurm drained %s", n.name, n.slurm)
				}
			}
		}
		if err := d.resume(); err != nil {
			return err
		}
	}
	if err := d.compare(ctx, total); err != nil {
		return err
	}
	for _, dep := range d.result.deployments {
		if w := d.worst(dep.name); w > dep.allowed {
			return fmt.Errorf("%s had %d replicas unavailable, its PDB allows %d", dep.name, w, dep.allowed)
		}
	}
	return d.checkInvariants()
}

// compare plays the claim and the return again with make-before-break
// off (steps 7 and 8), so the report sets the two side by side, measured
// in one run.
func (d *demo) compare(ctx context.Context, total int) error {
	o := d.opts
	if err := d.step(ctx, "for comparison: the same gang claims again, break-before-make", func() error {
		if err := d.cluster.restartScheduler(ctx, o, false, d.say); err != nil {
			return err
		}
		start := time.Now()
		d.obs.setPhase(phaseColdClaim)
		defer d.obs.setPhase("")
		if err := d.createGang(ctx, "pretrain-2", o.GangPods, o.GPUsPerNode); err != nil {
			return err
		}
		if err := d.wait(ctx, "the gang running and every production replica Ready again", func(s sample) bool {
			return s.researchRunning == o.GangPods && s.productionReady == s.productionPods && s.productionPods == total
		}); err != nil {
			return err
		}
		d.result.coldClaimSeconds = time.Since(start).Seconds()
		d.say("break-before-make claim done in %.1fs; make-before-break took %.1fs", d.result.coldClaimSeconds, d.result.claimSeconds)
		for _, dep := range d.result.deployments {
			a, _ := d.obs.availabilityOf(phaseColdClaim, dep.name)
			d.say("  %s: at least %d of %d replicas Ready, %.0f replica-seconds below %d", dep.name, a.minReady, dep.replicas, a.belowSeconds, dep.replicas)
		}
		return nil
	}); err != nil {
		return err
	}
	return d.step(ctx, "that gang ends; production returns again", func() error {
		if err := d.deleteGang(ctx, "pretrain-2"); err != nil {
			return err
		}
		if err := d.wait(ctx, "the gang's pods gone", func(s sample) bool { return s.researchPods == 0 }); err != nil {
			return err
		}
		start := time.Now()
		d.obs.setPhase(phaseColdReturn)
		defer d.obs.setPhase("")
		if err := d.wait(ctx, fmt.Sprintf("%d production replicas Ready on physical GPUs", total), func(s sample) bool {
			return s.production == total && s.productionReady == total && s.overflowPods == 0
		}); err != nil {
			return err
		}
		d.result.coldReturnSeconds = time.Since(start).Seconds()
		return nil
	})
}

// checkInvariants reports what the invariant watcher saw, and fails the
// demo on any violation.
func (d *demo) checkInvariants() error {
	if d.inv == nil {
		return nil
	}
	d.result.violations = append(d.inv.Violations(), d.inv.Gangs(invariants.GangOf)...)
	d.result.evictions = d.inv.Evictions()
	d.say("invariants, checked at every event: %d violations; evictions %v; at most %d production GPUs on the overflow node or waiting (room %d)",
		len(d.result.violations), d.result.evictions, d.inv.PeakOverflowGPUs(), len(d.cluster.nodes)*d.opts.GPUsPerNode)
	if len(d.result.violations) > 0 {
		return fmt.Errorf("invariants violated: %s", strings.Join(d.result.violations, "; "))
	}
	return nil
}

func budgetList(n int) string {
	var parts []string
	for i := range min(n, len(budgets())) {
		parts = append(parts, budgets()[i].String())
	}
	return strings.Join(parts, ", ")
}

func (d *demo) worst(app string) int {
	d.obs.mu.Lock()
	defer d.obs.mu.Unlock()
	return d.obs.worstUnavailable[app]
}

// createDeployment creates a production inference Deployment with a PDB.
func (d *demo) createDeployment(ctx context.Context, name string, replicas int, budget intstr.IntOrString) error {
	gpu := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("32Gi")}
	lbls := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: v1.PodSpec{
					SchedulerName:                 "sluice-production",
					PriorityClassName:             "production",
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Tolerations:                   []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}},
					Containers: []v1.Container{{
						Name: "server", Image: "vllm/vllm-openai:v0.11.0",
						Args:      []string{"--model", "meta-llama/Llama-3.1-8B-Instruct"},
						Resources: v1.ResourceRequirements{Requests: gpu, Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
					}},
				},
			},
		},
	}
	if _, err := d.cluster.client.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return err
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &budget, Selector: &metav1.LabelSelector{MatchLabels: lbls}},
	}
	_, err := d.cluster.client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, pdb, metav1.CreateOptions{})
	return err
}

// createGang creates a native PodGroup and its pods.
func (d *demo) createGang(ctx context.Context, name string, pods, gpus int) error {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{"sluice.dev/fabric-level": "any", "sluice.dev/fabric-mode": "preferred"}},
		Spec: schedulingv1beta1.PodGroupSpec{
			PriorityClassName: "research",
			SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(pods)}},
		},
	}
	if _, err := d.cluster.client.SchedulingV1beta1().PodGroups(namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating PodGroup %s: %w", name, err)
	}
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	for i := range pods {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{"gang": name}},
			Spec: v1.PodSpec{
				SchedulerName: "sluice-research", PriorityClassName: "research",
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				SchedulingGroup:               &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)},
				Containers: []v1.Container{{
					Name: "trainer", Image: "nvcr.io/nvidia/pytorch:25.01-py3",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q}, Limits: v1.ResourceList{"nvidia.com/gpu": q}},
				}},
			},
		}
		if _, err := d.cluster.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	d.say("PodGroup %s: %d pods x %d GPUs, all or nothing, scheduled by sluice-research", name, pods, gpus)
	return nil
}

func (d *demo) deleteGang(ctx context.Context, name string) error {
	err := d.cluster.client.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "gang=" + name})
	if err != nil {
		return err
	}
	return d.cluster.client.SchedulingV1beta1().PodGroups(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// gangPlacement returns the gang's nodes and their leaves.
func (d *demo) gangPlacement(ctx context.Context, name string) ([]string, []string, error) {
	pods, err := d.cluster.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "gang=" + name})
	if err != nil {
		return nil, nil, err
	}
	leafOf := map[string]string{}
	for _, n := range d.cluster.nodes {
		leafOf[n.name] = n.leaf
	}
	var nodes []string
	leaves := map[string]bool{}
	for _, p := range pods.Items {
		nodes = append(nodes, p.Spec.NodeName)
		leaves[leafOf[p.Spec.NodeName]] = true
	}
	sort.Strings(nodes)
	var ls []string
	for l := range leaves {
		ls = append(ls, l)
	}
	sort.Strings(ls)
	return nodes, ls, nil
}

// drain drains a Slurm node with scontrol, as Slurm's health check would.
func (d *demo) drain(ctx context.Context) error {
	var mapped []nodeInfo
	for _, n := range d.cluster.nodes {
		if n.slurm != "" {
			mapped = append(mapped, n)
		}
	}
	if len(mapped) == 0 {
		return fmt.Errorf("no node maps to a Slurm node")
	}
	target := mapped[min(2, len(mapped)-1)].slurm
	d.say("Slurm drains %s (scontrol update state=drain reason=\"demo: GPU XID 79\"): nothing new may land on its Kubernetes node", target)
	out, err := exec.CommandContext(ctx, "scontrol", "update", "nodename="+target, "state=drain", "reason=demo: GPU XID 79").CombinedOutput()
	if err != nil {
		return fmt.Errorf("scontrol update nodename=%s state=drain: %v: %s", target, err, out)
	}
	d.result.drained = target
	return nil
}

// resume undoes the drain, so the Slurm cluster is left as found.
func (d *demo) resume() error {
	out, err := exec.Command("scontrol", "update", "nodename="+d.result.drained, "state=resume").CombinedOutput()
	if err != nil {
		return fmt.Errorf("scontrol update nodename=%s state=resume: %v: %s", d.result.drained, err, out)
	}
	d.say("Slurm resumes %s", d.result.drained)
	return nil
}

// scontrolAvailable reports whether scontrol can reach Slurm.
func scontrolAvailable() error {
	if os.Getenv("SLURM_CONF") == "" {
		return fmt.Errorf("SLURM_CONF is not set: source the env file hack/slurm-up.sh prints")
	}
	if out, err := exec.Command("scontrol", "ping").CombinedOutput(); err != nil {
		return fmt.Errorf("scontrol ping: %v: %s", err, out)
	}
	return nil
}

// overflowLog reads the log of one production pod on the overflow node, as
// kubectl logs does.
func (d *demo) overflowLog(ctx context.Context) (string, string, error) {
	pods, err := d.cluster.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + overflowNode})
	if err != nil {
		return "", "", err
	}
	for _, p := range pods.Items {
		if !podReady(&p) || p.DeletionTimestamp != nil {
			continue
		}
		data, err := d.cluster.client.CoreV1().Pods(namespace).GetLogs(p.Name, &v1.PodLogOptions{TailLines: ptr.To[int64](1)}).DoRaw(ctx)
		if err != nil {
			return p.Name, "", err
		}
		return p.Name, strings.TrimSpace(string(data)), nil
	}
	return "", "", fmt.Errorf("no Ready pod on %s", overflowNode)
}
