// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/internal/kcm"
	"github.com/sluice-sched/sluice/test/harness"
	"github.com/sluice-sched/sluice/test/providerserver"
)

// metricsServerUser is the user of the kubelet client certificate the
// test's metrics-server presents to nodes.
const metricsServerUser = "sluice-test-metrics-server"

// startMetricsServer runs the real metrics-server (hack/metrics-server) as a
// process, registered behind the apiserver's aggregator as
// v1beta1.metrics.k8s.io (an ExternalName Service to its loopback port),
// scraping kubelets every 10 s with a client certificate allowed only
// nodes/metrics and nodes/stats, as its shipped ClusterRole is; it
// returns once the metrics API answers. Everything is removed at the end.
func startMetricsServer(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	bin := harness.Tool(t, "metrics-server")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: metricsServerUser},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/metrics", "nodes/stats"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: metricsServerUser},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsServerUser},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: metricsServerUser}}}
	// Each cluster-scoped object is removed at the end, whatever fails
	// after it (an APIService left pointing at nothing stalls namespace
	// deletion in the tests after this one).
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{}) })
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}) })
	certFile, keyFile := harness.KubeletClientCertFiles(t, metricsServerUser)
	port := freePort(t)
	dir := t.TempDir()
	harness.StartProcess(t, "metrics-server", bin,
		"--secure-port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--cert-dir="+dir,
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--kubelet-client-certificate="+certFile, "--kubelet-client-key="+keyFile,
		// The overflow node's serving certificate is self-signed.
		"--kubelet-insecure-tls", "--kubelet-use-node-status-port", "--kubelet-preferred-address-types=InternalIP",
		"--metric-resolution=10s", "--kubelet-request-timeout=5s", "--v=2")

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sluice-test-metrics-server"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "127.0.0.1",
			Ports: []v1.ServicePort{{Name: "https", Port: int32(port)}}}}
	if _, err := cp.Client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}) })
	apiServices := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{"group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"service": map[string]any{"namespace": svc.Namespace, "name": svc.Name, "port": int64(port)}},
	}}
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	if _, err := dyn.Resource(apiServices).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dyn.Resource(apiServices).Delete(ctx, "v1beta1.metrics.k8s.io", metav1.DeleteOptions{}) })
	mc := metricsclient.NewForConfigOrDie(cp.Config)
	var lastErr error
	harness.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		_, lastErr = mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		return lastErr == nil, nil
	}, func() string { return fmt.Sprintf("the metrics API served through the aggregator (last: %v)", lastErr) })
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestResourceMetricsReachKubectlTopAndTheHPA: overflowed pods are
// visible to autoscaling. The real overflow node binary runs a
// Deployment's pods at an HTTP provider; the real metrics-server scrapes
// the node's kubelet API (/metrics/resource, authorized as nodes/metrics,
// not nodes/proxy); the resource metrics API (what kubectl top reads)
// serves the provider's measure; and the real HPA controller scales the
// Deployment on CPU. While the provider measures nothing, the node serves
// no usage for its pods (none, not zero).
func TestResourceMetricsReachKubectlTopAndTheHPA(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "8", "cpu": "32", "memory": "256Gi"}, StartDelay: time.Second})
	defer srv.Close()
	name := "ovf-top-" + harness.NewNameSuffix()
	api := startHTTPNodeWithKubeletAPI(t, cp, name, srv.URL)
	startMetricsServer(t, cp)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := kcm.Start(ctx, cp.Config, kcm.Set{Autoscaling: true}); err != nil {
		t.Fatal(err)
	}

	d := harness.InferenceDeployment(ns, "web", 2, 1)
	spec := &d.Spec.Template.Spec
	spec.NodeName = name
	spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")
	spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse("1Gi")
	harness.CreateDeployment(t, cp, d, nil)
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return readyOn(t, cp, ns, "web", name) == 2, nil
	}, func() string { return "2 web pods Ready on " + name + ": " + describe(homePods(t, cp, ns, "web")) })
	pods := homePods(t, cp, ns, "web")

	// The kubelet API as metrics-server calls it: nodes/metrics, not
	// nodes/proxy.
	base := "https://" + net.JoinHostPort(api.Address, strconv.Itoa(int(api.Port)))
	get := func(path string, user string) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, //nolint:gosec // the node's self-signed certificate
			Certificates: []tls.Certificate{harness.KubeletClientCert(t, user)}}}}
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s as %s: %v", path, user, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get("/metrics/resource", metricsServerUser)
	if code != http.StatusOK {
		t.Fatalf("/metrics/resource as metrics-server: %d %s", code, body)
	}
	// None, not zero: the provider measures nothing yet.
	if strings.Contains(body, "container_cpu_usage_seconds_total{") || strings.Contains(body, "node_cpu_usage_seconds_total") {
		t.Errorf("/metrics/resource served usage before the provider measured any:\n%s", body)
	}
	if code, body := get("/stats/summary", metricsServerUser); code != http.StatusOK || !strings.Contains(body, pods[0].Name) || strings.Contains(body, "usageNanoCores") {
		t.Errorf("/stats/summary as metrics-server: %d %s, want the pods listed without usage", code, body)
	}
	if code, _ := get("/containerLogs/"+ns+"/"+pods[0].Name+"/"+spec.Containers[0].Name, metricsServerUser); code != http.StatusForbidden {
		t.Errorf("/containerLogs as metrics-server (nodes/metrics and nodes/stats only): %d, want 403", code)
	}
	if code, _ := get("/metrics/resource", "intruder"); code != http.StatusForbidden {
		t.Errorf("/metrics/resource as an unauthorized user: %d, want 403", code)
	}

	// kubectl top: the provider's measure, through metrics-server and the
	// aggregator.
	srv.SetUsage("900m", "200Mi")
	mc := metricsclient.NewForConfigOrDie(cp.Config)
	var top string
	harness.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		list, err := mc.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			top = err.Error()
			return false, nil
		}
		top = ""
		ok := 0
		for _, pm := range list.Items {
			for _, c := range pm.Containers {
				cpu, mem := c.Usage[v1.ResourceCPU], c.Usage[v1.ResourceMemory]
				top += fmt.Sprintf("%s/%s cpu=%s memory=%s; ", pm.Name, c.Name, cpu.String(), mem.String())
				if m := cpu.MilliValue(); m >= 850 && m <= 950 && mem.Value() == 200<<20 {
					ok++
				}
			}
		}
		return ok >= 2, nil
	}, func() string { return "kubectl top shows both web pods at 900m and 200Mi: " + top })
	// And as kubectl itself prints it.
	out, err := exec.Command(harness.Tool(t, "kubectl"), "--kubeconfig="+cp.Kubeconfig, "top", "pod", "-n", ns, "-l", "app=web", "--no-headers").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl top pod: %v\n%s", err, out)
	}
	for _, p := range pods {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(p.Name) + `\s+(8[5-9]\d|9[0-4]\d)m\s+200Mi\s*$`).Match(out) {
			t.Errorf("kubectl top pod: want %s at about 900m and 200Mi:\n%s", p.Name, out)
		}
	}
	top = strings.TrimSpace(string(out))

	// kubectl top node: the node's measured containers (its CPU counter
	// starts with the second measure).
	var nodeTop string
	harness.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		nm, err := mc.MetricsV1beta1().NodeMetricses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			nodeTop = err.Error()
			return false, nil
		}
		cpu, mem := nm.Usage[v1.ResourceCPU], nm.Usage[v1.ResourceMemory]
		nodeTop = fmt.Sprintf("cpu=%s memory=%s", cpu.String(), mem.String())
		return cpu.MilliValue() >= 1700 && cpu.MilliValue() <= 1900 && mem.Value() == 400<<20, nil
	}, func() string { return "kubectl top node " + name + " shows 1800m and 400Mi: " + nodeTop })

	// The HPA scales on it: 90% of the request against a 50% target.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 4,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: v1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		}}
	if _, err := cp.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(context.Background(), hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var status string
	harness.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := cp.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status = fmt.Sprintf("desired %d current %d metrics %+v conditions %+v", got.Status.DesiredReplicas, got.Status.CurrentReplicas, got.Status.CurrentMetrics, got.Status.Conditions)
		return got.Status.DesiredReplicas == 4, nil
	}, func() string { return "the HPA wants 4 replicas: " + status })
	harness.Eventually(t, 90*time.Second, func(context.Context) (bool, error) {
		return readyOn(t, cp, ns, "web", name) == 4, nil
	}, func() string { return "4 web pods Ready on " + name + ": " + describe(homePods(t, cp, ns, "web")) })
	got, err := cp.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Status.CurrentMetrics; len(m) != 1 || m[0].Resource == nil || m[0].Resource.Current.AverageUtilization == nil ||
		*m[0].Resource.Current.AverageUtilization < 80 || *m[0].Resource.Current.AverageUtilization > 100 {
		t.Errorf("HPA current metrics %+v, want CPU at about 90%% of the request", m)
	}
	t.Logf("kubectl top pod: %s; kubectl top node: %s; HPA: %s", top, nodeTop, status)
}
