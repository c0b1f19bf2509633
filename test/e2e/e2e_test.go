// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package e2e runs sluice's story on real clusters: `make e2e`
// (hack/e2e/run.sh) brings up "home" and "remote" (hack/e2e/cluster.sh), a
// real kubelet on containerd and runc each, and runs this package against
// them. Run by hand only with both up (E2E_KEEP=1 make e2e leaves them so).
package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	nodeutil "k8s.io/kubernetes/pkg/controller/util/node"
)

const (
	gpu          = v1.ResourceName("nvidia.com/gpu")
	nodeGPUs     = 8
	overflowNode = "sluice-overflow"
	release      = "sluice"
	releaseNS    = "sluice-system"
	servingNS    = "serving"
	researchNS   = "research"
	remoteNS     = "sluice-overflow"
	appImage     = "local/sluice-e2e-app:e2e"
	// 6 replicas of 1 GPU: a claim of the whole node moves all 6, one
	// at a time (the budget), so it lasts long enough to be disrupted.
	webReplicas = 6
	webGPUs     = 1
	// webMinAvailable is the PodDisruptionBudget's floor of web.
	webMinAvailable = webReplicas - 1
)

var (
	researchClaims = schema.GroupVersionResource{Group: "claims.sluice.dev", Version: "v1alpha1", Resource: "researchclaims"}
	podGroups      = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
)

// cluster is one of the two clusters the run brought up.
type cluster struct {
	name       string
	kubeconfig string
	client     kubernetes.Interface
	dynamic    dynamic.Interface
}

func connect(t *testing.T, name, env string) *cluster {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Fatalf("%s is not set: this package runs against the clusters `make e2e` brings up (hack/e2e/run.sh)", env)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return &cluster{name: name, kubeconfig: path,
		client: kubernetes.NewForConfigOrDie(cfg), dynamic: dynamic.NewForConfigOrDie(cfg)}
}

// TestStory: production serves through a Service on home's real node; a
// research gang claims the node's GPUs; production moves to the overflow
// node, whose kubernetes provider runs it on the remote cluster, and keeps
// answering; the gang ends and production returns. Twice: the first claim
// loses its leading scheduler pod midway, the second runs through a helm
// upgrade that replaces every pod of the release. Throughout, every
// request to the Service is answered and its ready endpoints never fall
// below the PodDisruptionBudget's floor.
func TestStory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	home := connect(t, "home", "E2E_HOME_KUBECONFIG")
	remote := connect(t, "remote", "E2E_REMOTE_KUBECONFIG")
	helm, tag := os.Getenv("E2E_HELM"), os.Getenv("E2E_IMAGE_TAG")
	if helm == "" || tag == "" {
		t.Fatal("E2E_HELM and E2E_IMAGE_TAG must be set (hack/e2e/run.sh sets them)")
	}
	start := time.Now()
	step := func(format string, args ...any) {
		t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	for _, c := range []*cluster{home, remote} {
		advertiseGPUs(ctx, t, c)
	}
	prepareRemote(ctx, t, remote)
	step("both nodes advertise %d GPUs; the remote cluster lets sluice-overflow-provider run pods in %s", nodeGPUs, remoteNS)

	installChart(ctx, t, home, remote, helm, tag)
	step("helm install --wait: the scheduler and the overflow node run as pods from their images")
	waitFor(ctx, t, "the overflow node Ready", func() (bool, error) {
		n, err := home.client.CoreV1().Nodes().Get(ctx, overflowNode, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && nodeReady(n), err
	})
	step("node %s Ready", overflowNode)

	serviceIP := deployWeb(ctx, t, home)
	waitReady(ctx, t, home, servingNS, "app=web", webReplicas, "home")
	step("web: %d pods Ready on node home, Service %s", webReplicas, serviceIP)

	// kube-proxy programs the new Service a moment after its pods are
	// Ready; the watch starts once it answers.
	waitFor(ctx, t, "the Service answering", func() (bool, error) {
		_, err := get(ctx, &http.Client{Timeout: 2 * time.Second}, "http://"+serviceIP+"/")
		return err == nil, nil
	})
	// The invariants, watched from here to the end.
	probe := startProber(ctx, t, "http://"+serviceIP+"/", start)
	floor := watchReadyEndpoints(ctx, t, home, servingNS, "web", start)
	waitFor(ctx, t, "answers from node home", func() (bool, error) { return probe.answeredSince("node home", start), nil })

	// Round 1: the leading scheduler's pod is deleted mid-claim.
	claimAndReturn(ctx, t, step, home, remote, probe, "gang-1", func(leader string) func() {
		if err := home.client.CoreV1().Pods(releaseNS).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting the leader %s: %v", leader, err)
		}
		step("deleting the leading scheduler pod %s mid-claim", leader)
		return func() {}
	})
	// Round 2: helm upgrade mid-claim rolls both Deployments (a new
	// --v), so every scheduler and overflow-node pod is replaced while the
	// claim runs.
	claimAndReturn(ctx, t, step, home, remote, probe, "gang-2", func(string) func() {
		step("helm upgrade mid-claim")
		upgraded := make(chan error, 1)
		go func() { upgraded <- upgradeChart(ctx, home, helm) }()
		return func() {
			if err := <-upgraded; err != nil {
				t.Fatal(err)
			}
			step("helm upgrade --wait done: every scheduler and overflow-node pod replaced")
		}
	})

	requests, failures := probe.stop()
	fewest, history := floor.stop()
	step("%d requests to the Service, %d failed; ready endpoints never below %d (floor %d)", requests, len(failures), fewest, webMinAvailable)
	if len(failures) > 0 {
		t.Errorf("%d of %d requests to the Service failed:\n%s\nits ready endpoints:\n%s", len(failures), requests,
			strings.Join(failures, "\n"), strings.Join(history, "\n"))
	}
	if fewest < webMinAvailable {
		t.Errorf("the Service's ready endpoints fell to %d, below the PodDisruptionBudget's %d", fewest, webMinAvailable)
	}
	if requests < 100 {
		t.Errorf("only %d requests were made: the prober did not watch the story", requests)
	}
}

// claimAndReturn plays one claim: gang (2 pods x 4 GPUs, the whole node)
// claims; at the first eviction, disrupt is given the leading scheduler
// pod and starts to disrupt it (returning a func that waits for the
// disruption to end). Once that pod is gone the gang must still be
// pending, and it must be placed by a leader that took the Lease after.
// Production moves to the overflow node and is served from the remote
// cluster; the gang ends and production returns home.
func claimAndReturn(ctx context.Context, t *testing.T, step func(string, ...any), home, remote *cluster, probe *prober, gang string, disrupt func(leader string) func()) {
	t.Helper()
	createGang(ctx, t, home, gang)
	step("%s: research gang (2 pods x %d GPUs) created", gang, nodeGPUs/2)
	var claim *unstructured.Unstructured
	waitFor(ctx, t, gang+": a ResearchClaim with an eviction", func() (bool, error) {
		list, err := home.dynamic.Resource(researchClaims).Namespace(researchNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if strings.HasPrefix(list.Items[i].GetName(), "rc-research-"+gang+"--") {
				claim = &list.Items[i]
				evicted, _, _ := unstructured.NestedSlice(claim.Object, "status", "evicted")
				return len(evicted) > 0, nil
			}
		}
		return false, nil
	})
	phase, _, _ := unstructured.NestedString(claim.Object, "status", "phase")
	step("%s: claim %s, phase %s, first victim evicted", gang, claim.GetName(), phase)

	leader := leaderPod(ctx, t, home)
	disrupted := time.Now()
	finished := disrupt(leader)
	// The leader is hit once its pod is terminating: the gang must still
	// wait then.
	waitFor(ctx, t, "the disrupted leader "+leader+" terminating", func() (bool, error) {
		p, err := home.client.CoreV1().Pods(releaseNS).Get(ctx, leader, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil), nil
	})
	gangStillPending(ctx, t, home, gang)
	step("%s: leader %s terminating, the gang still pending", gang, leader)
	finished()

	waitReady(ctx, t, home, researchNS, "gang="+gang, 2, "home")
	finisher, acquired := leaderPod(ctx, t, home), leaseAcquired(ctx, t, home)
	if finisher == leader || acquired.Before(disrupted.Add(-time.Second)) {
		t.Fatalf("%s: the Lease is held by %s, acquired at %s; the disruption of %s began at %s", gang, finisher, acquired, leader, disrupted)
	}
	pods, err := home.client.CoreV1().Pods(researchNS).List(ctx, metav1.ListOptions{LabelSelector: "gang=" + gang})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.LastTransitionTime.Time.Before(acquired.Truncate(time.Second)) {
				t.Fatalf("%s: %s was scheduled at %s, before %s took the Lease (%s)", gang, p.Name, c.LastTransitionTime, finisher, acquired)
			}
		}
	}
	step("%s: gang Running on node home, placed by %s, which took the Lease after %s was disrupted", gang, finisher, leader)
	moved := time.Now()
	waitReady(ctx, t, home, servingNS, "app=web", webReplicas, overflowNode)
	waitFor(ctx, t, "answers from the overflow node", func() (bool, error) { return probe.answeredSince("node "+overflowNode, moved), nil })
	served := servedRemotely(ctx, t, home, remote)
	step("web: %d pods on %s, their addresses those of pods running on the remote cluster (%s); the Service answers from them", webReplicas, overflowNode, served)
	checkLogs(ctx, t, home)

	// The gang ends; production returns.
	if err := home.client.CoreV1().Pods(researchNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "gang=" + gang}); err != nil {
		t.Fatal(err)
	}
	step("%s deleted", gang)
	waitReady(ctx, t, home, servingNS, "app=web", webReplicas, "home")
	returned := time.Now()
	waitFor(ctx, t, "answers from node home", func() (bool, error) { return probe.answeredSince("node home", returned), nil })
	waitFor(ctx, t, "the remote cluster emptied", func() (bool, error) {
		pods, err := remote.client.CoreV1().Pods(remoteNS).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
	step("web: %d pods back on node home; nothing left on the remote cluster", webReplicas)
}

// upgradeChart runs helm upgrade on the release with one value changed
// in each Deployment's pod template (both binaries' --v) and waits until
// every pod of both was replaced. It runs beside the test's goroutine, so
// it returns its failure.
func upgradeChart(ctx context.Context, home *cluster, helm string) error {
	before := map[string]bool{}
	pods, err := home.client.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		before[p.Name] = true
	}
	chart := filepath.Join("..", "..", "charts", "sluice")
	cmd := exec.CommandContext(ctx, helm, "--kubeconfig", home.kubeconfig, "upgrade", release, chart,
		"-n", releaseNS, "--reuse-values", "--set", "scheduler.verbosity=3", "--set", "overflowNode.verbosity=3",
		"--wait", "--timeout", "5m")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm upgrade: %v\n%s", err, out)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		pods, err := home.client.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if before[p.Name] || !podutil.IsPodReady(&p) {
				return false, nil
			}
		}
		return len(pods.Items) == len(before), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for every pod of the release to be replaced: %v", err)
	}
	return nil
}

// advertiseGPUs gives the real node nodeGPUs extended GPUs, as a device
// plugin would (the kubelet keeps extended resources it did not set).
func advertiseGPUs(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"capacity":{%q:"%d"}}}`, gpu, nodeGPUs)
	if _, err := c.client.CoreV1().Nodes().PatchStatus(ctx, c.name, []byte(patch)); err != nil {
		t.Fatalf("%s: advertising GPUs: %v", c.name, err)
	}
	waitFor(ctx, t, c.name+": GPUs allocatable", func() (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable[gpu]
		return q.Value() == nodeGPUs, nil
	})
}

// prepareRemote makes the provider's namespace and identity on the remote
// cluster, with the access the chart's values document and no more.
func prepareRemote(ctx context.Context, t *testing.T, remote *cluster) {
	t.Helper()
	const user = "sluice-overflow-provider"
	mustCreate(t, "namespace", func() error {
		_, err := remote.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: remoteNS}}, metav1.CreateOptions{})
		return err
	})
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	mustCreate(t, "role", func() error {
		_, err := remote.client.RbacV1().Roles(remoteNS).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods", "secrets", "configmaps"}, Verbs: all},
				{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, "rolebinding", func() error {
		_, err := remote.client.RbacV1().RoleBindings(remoteNS).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, "clusterrole", func() error {
		_, err := remote.client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, "clusterrolebinding", func() error {
		_, err := remote.client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}, metav1.CreateOptions{})
		return err
	})
}

// providerKubeconfig is the remote cluster's kubeconfig for the overflow
// node: its own certificate (hack/e2e/cluster.sh), the data inline.
func providerKubeconfig(t *testing.T, remote *cluster) []byte {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(remote.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	pki := filepath.Join(filepath.Dir(remote.kubeconfig), "pki")
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(pki, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	server := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster].Server
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["remote"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: read("ca.crt")}
	cfg.AuthInfos["provider"] = &clientcmdapi.AuthInfo{ClientCertificateData: read("overflow-provider.crt"), ClientKeyData: read("overflow-provider.key")}
	cfg.Contexts["remote"] = &clientcmdapi.Context{Cluster: "remote", AuthInfo: "provider"}
	cfg.CurrentContext = "remote"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// installChart installs charts/sluice with the locally built images, the
// overflow node on, its one provider the remote cluster. The return's
// timers are shortened (hysteresis 20 s, waves 5 s apart) so the run ends
// in minutes; everything else is the chart's default.
func installChart(ctx context.Context, t *testing.T, home, remote *cluster, helm, tag string) {
	t.Helper()
	for _, ns := range []*v1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}},
		{ObjectMeta: metav1.ObjectMeta{Name: servingNS, Labels: map[string]string{"sluice.dev/production": "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: researchNS, Labels: map[string]string{"sluice.dev/research": "true"}}},
	} {
		mustCreate(t, "namespace "+ns.Name, func() error {
			_, err := home.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		})
	}
	mustCreate(t, "providers secret", func() error {
		_, err := home.client.CoreV1().Secrets(releaseNS).Create(ctx, &v1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "sluice-overflow-providers"},
			Data:       map[string][]byte{"remote-kubeconfig": providerKubeconfig(t, remote)},
		}, metav1.CreateOptions{})
		return err
	})
	values := fmt.Sprintf(`image: {registry: local, tag: %q, pullPolicy: Never}
scheduler:
  resources: {requests: {cpu: 100m, memory: 128Mi}}
config:
  return: {hysteresisSeconds: 20, minWaveIntervalSeconds: 5}
overflowNode:
  enabled: true
  resources: {requests: {cpu: 50m, memory: 64Mi}}
  config:
    providers:
    - name: remote
      type: kubernetes
      priority: 0
      pricePerGPUHour: 2.5
      kubernetes:
        kubeconfig: /etc/sluice/providers/remote-kubeconfig
        namespace: %s
`, tag, remoteNS)
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join("..", "..", "charts", "sluice")
	cmd := exec.CommandContext(ctx, helm, "--kubeconfig", home.kubeconfig, "install", release, chart,
		"-n", releaseNS, "-f", file, "--wait", "--timeout", "5m")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
}

// deployWeb runs production: the run's HTTP server, webReplicas of
// webGPUs, a PodDisruptionBudget of 1, behind a Service.
func deployWeb(ctx context.Context, t *testing.T, home *cluster) string {
	t.Helper()
	labels := map[string]string{"app": "web"}
	replicas := int32(webReplicas)
	grace := int64(20)
	fieldEnv := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	mustCreate(t, "deployment web", func() error {
		_, err := home.client.AppsV1().Deployments(servingNS).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: v1.PodSpec{
						SchedulerName:                 "sluice-production",
						PriorityClassName:             "production",
						TerminationGracePeriodSeconds: &grace,
						AutomountServiceAccountToken:  new(bool),
						Tolerations:                   []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}},
						Containers: []v1.Container{{
							Name:            "web",
							Image:           appImage,
							ImagePullPolicy: v1.PullNever,
							Args:            []string{"-listen", ":8080", "-drain", "10s"},
							Env:             []v1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("NODE_NAME", "spec.nodeName")},
							Ports:           []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
							ReadinessProbe: &v1.Probe{
								ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
								PeriodSeconds: 1,
							},
							Resources: v1.ResourceRequirements{
								Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("16Mi"), gpu: *resource.NewQuantity(webGPUs, resource.DecimalSI)},
								Limits:   v1.ResourceList{gpu: *resource.NewQuantity(webGPUs, resource.DecimalSI)},
							},
						}},
					},
				},
			},
		}, metav1.CreateOptions{})
		return err
	})
	maxUnavailable := intstr.FromInt32(webReplicas - webMinAvailable)
	mustCreate(t, "pdb web", func() error {
		_, err := home.client.PolicyV1().PodDisruptionBudgets(servingNS).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
		}, metav1.CreateOptions{})
		return err
	})
	var svc *v1.Service
	mustCreate(t, "service web", func() error {
		var err error
		svc, err = home.client.CoreV1().Services(servingNS).Create(ctx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       v1.ServiceSpec{Selector: labels, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}},
		}, metav1.CreateOptions{})
		return err
	})
	return svc.Spec.ClusterIP
}

// createGang asks for the whole node: a PodGroup of two pods of 4 GPUs.
func createGang(ctx context.Context, t *testing.T, home *cluster, name string) {
	t.Helper()
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": researchNS},
		"spec":     map[string]any{"minMember": int64(2)},
	}}
	mustCreate(t, "podgroup", func() error {
		_, err := home.dynamic.Resource(podGroups).Namespace(researchNS).Create(ctx, pg, metav1.CreateOptions{})
		return err
	})
	for i := range 2 {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i),
				Labels: map[string]string{"gang": name, "scheduling.x-k8s.io/pod-group": name}},
			Spec: v1.PodSpec{
				SchedulerName:                "sluice-research",
				PriorityClassName:            "research",
				AutomountServiceAccountToken: new(bool),
				Containers: []v1.Container{{
					Name: "train", Image: appImage, ImagePullPolicy: v1.PullNever,
					Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), gpu: *resource.NewQuantity(nodeGPUs/2, resource.DecimalSI)},
						Limits:   v1.ResourceList{gpu: *resource.NewQuantity(nodeGPUs/2, resource.DecimalSI)},
					},
				}},
			},
		}
		mustCreate(t, pod.Name, func() error {
			_, err := home.client.CoreV1().Pods(researchNS).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
	}
}

// gangStillPending fails the test when the gang was already placed: the
// leader was then deleted after the claim, not during it.
func gangStillPending(ctx context.Context, t *testing.T, home *cluster, gang string) {
	t.Helper()
	pods, err := home.client.CoreV1().Pods(researchNS).List(ctx, metav1.ListOptions{LabelSelector: "gang=" + gang})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			t.Fatalf("gang pod %s was bound to %s before the leader was deleted: the claim was over", p.Name, p.Spec.NodeName)
		}
	}
}

// leaderPod is the scheduler pod holding the Lease.
func leaderPod(ctx context.Context, t *testing.T, home *cluster) string {
	t.Helper()
	var holder string
	waitFor(ctx, t, "a scheduler leader", func() (bool, error) {
		lease, err := home.client.CoordinationV1().Leases(releaseNS).Get(ctx, "sluice-scheduler", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, err
		}
		name, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		if _, err := home.client.CoreV1().Pods(releaseNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, nil // a deleted holder, not yet replaced
		}
		holder = name
		return true, nil
	})
	return holder
}

// servedRemotely checks that every web pod's address is that of a Running
// pod on the remote cluster, so the Service's endpoints are containers
// there.
func servedRemotely(ctx context.Context, t *testing.T, home, remote *cluster) string {
	t.Helper()
	pods, err := home.client.CoreV1().Pods(servingNS).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	remotePods, err := remote.client.CoreV1().Pods(remoteNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]string{}
	for _, p := range remotePods.Items {
		if p.Status.Phase == v1.PodRunning && p.Spec.NodeName == remote.name {
			running[p.Status.PodIP] = p.Name
		}
	}
	var ips []string
	for _, p := range pods.Items {
		if running[p.Status.PodIP] == "" {
			t.Fatalf("web pod %s on %s has address %q, which no Running pod on the remote cluster has (%v)", p.Name, p.Spec.NodeName, p.Status.PodIP, running)
		}
		ips = append(ips, p.Status.PodIP)
	}
	return strings.Join(ips, ", ")
}

// leaseAcquired is when the scheduler's Lease was last acquired.
func leaseAcquired(ctx context.Context, t *testing.T, home *cluster) time.Time {
	t.Helper()
	lease, err := home.client.CoordinationV1().Leases(releaseNS).Get(ctx, "sluice-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.AcquireTime == nil {
		t.Fatalf("the scheduler's Lease: %v (%+v)", err, lease)
	}
	return lease.Spec.AcquireTime.Time
}

// checkLogs reads a moved pod's log through the apiserver, which proxies
// to the overflow node's kubelet API, which asks the provider.
func checkLogs(ctx context.Context, t *testing.T, home *cluster) {
	t.Helper()
	pods, err := home.client.CoreV1().Pods(servingNS).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("listing web: %v", err)
	}
	data, err := home.client.CoreV1().Pods(servingNS).GetLogs(pods.Items[0].Name, &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("kubectl logs of %s on %s: %v", pods.Items[0].Name, pods.Items[0].Spec.NodeName, err)
	}
	if !strings.Contains(string(data), "app: serving") {
		t.Fatalf("the log of %s, read through the overflow node, is %q", pods.Items[0].Name, data)
	}
}

// waitReady waits for n pods matching selector, each Ready on node.
func waitReady(ctx context.Context, t *testing.T, c *cluster, ns, selector string, n int, node string) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("%d pods %s Ready on %s", n, selector, node), func() (bool, error) {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Spec.NodeName == node && podutil.IsPodReady(p) {
				ready++
			}
		}
		return ready == n && len(pods.Items) == n, nil
	})
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

func mustCreate(t *testing.T, what string, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatalf("creating %s: %v", what, err)
	}
}

func nodeReady(n *v1.Node) bool {
	_, ready := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady)
	return ready != nil && ready.Status == v1.ConditionTrue
}

// prober asks the Service every 50 ms from this machine (through
// kube-proxy's rules) and records every failure and who answered.
type prober struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	requests int
	failures []string
	answers  map[string]time.Time // the last time each answer came
}

func startProber(ctx context.Context, t *testing.T, url string, start time.Time) *prober {
	ctx, cancel := context.WithCancel(ctx)
	p := &prober{cancel: cancel, done: make(chan struct{}), answers: map[string]time.Time{}}
	client := &http.Client{Timeout: 2 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			answer, err := get(ctx, client, url)
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.requests++
			if err != nil {
				p.failures = append(p.failures, fmt.Sprintf("[%6.1fs] %v", time.Since(start).Seconds(), err))
			} else {
				p.answers[answer] = time.Now()
			}
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

func get(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// answeredSince says whether an answer ending in suffix (a node) came
// after since.
func (p *prober) answeredSince(suffix string, since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, last := range p.answers {
		if strings.HasSuffix(a, suffix) && last.After(since) {
			return true
		}
	}
	return false
}

func (p *prober) stop() (int, []string) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.failures
}

// endpointFloor watches a Service's EndpointSlices and keeps the fewest
// ready endpoints seen at any event, and each change of the ready set.
type endpointFloor struct {
	factory informers.SharedInformerFactory
	stopCh  chan struct{}
	once    sync.Once
	mu      sync.Mutex
	stopped bool
	synced  bool
	slices  map[string]*discoveryv1.EndpointSlice
	min     int
	last    string
	history []string // each change of the ready addresses
}

func watchReadyEndpoints(ctx context.Context, t *testing.T, c *cluster, ns, service string, start time.Time) *endpointFloor {
	t.Helper()
	f := &endpointFloor{stopCh: make(chan struct{}), slices: map[string]*discoveryv1.EndpointSlice{}, min: -1}
	f.factory = informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	informer := f.factory.Discovery().V1().EndpointSlices().Informer()
	update := func(obj any, deleted bool) {
		slice, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
			if slice, ok = tomb.Obj.(*discoveryv1.EndpointSlice); !isTomb || !ok {
				return
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.stopped {
			return
		}
		if deleted {
			delete(f.slices, slice.Name)
		} else {
			f.slices[slice.Name] = slice
		}
		if f.synced {
			f.count(start)
		}
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { update(obj, false) },
		UpdateFunc: func(_, obj any) { update(obj, false) },
		DeleteFunc: func(obj any) { update(obj, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.factory.Start(f.stopCh)
	// Counted from when this handler has seen every initial slice.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("the EndpointSlice watch did not sync")
	}
	f.mu.Lock()
	f.synced = true
	f.count(start)
	f.mu.Unlock()
	t.Cleanup(func() { f.stop() })
	return f
}

// count records the ready endpoints now; f.mu is held.
func (f *endpointFloor) count(start time.Time) {
	ready := map[types.UID]bool{}
	var addresses []string
	for _, s := range f.slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready && e.TargetRef != nil {
				ready[e.TargetRef.UID] = true
				addresses = append(addresses, e.Addresses...)
			}
		}
	}
	slices.Sort(addresses)
	now := strings.Join(addresses, " ")
	if f.min < 0 || len(ready) < f.min {
		f.min = len(ready)
	}
	if now != f.last {
		f.last = now
		f.history = append(f.history, fmt.Sprintf("[%6.1fs] %d ready: %s", time.Since(start).Seconds(), len(ready), now))
	}
}

// stop ends the watch and returns the fewest ready endpoints seen and the
// history of the ready set.
func (f *endpointFloor) stop() (int, []string) {
	f.once.Do(func() {
		f.mu.Lock()
		f.stopped = true
		f.mu.Unlock()
		close(f.stopCh)
		f.factory.Shutdown()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.min, slices.Clone(f.history)
}
