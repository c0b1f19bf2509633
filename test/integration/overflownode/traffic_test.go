// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/internal/localcluster"
	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider/kube"
	"github.com/sluice-sched/sluice/test/harness"
	"github.com/sluice-sched/sluice/test/providerserver"
)

var kubeletAdminOnce sync.Once

// allowKubeletClient lets the apiservers' kubelet client certificate use
// the kubelet API (nodes/proxy), as kubeadm binds it.
func allowKubeletClient(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	kubeletAdminOnce.Do(func() {
		if err := localcluster.AllowKubeletClient(context.Background(), cp.Client); err != nil {
			t.Fatal(err)
		}
	})
}

// kubeletAPI is a kubelet endpoint for an overflow node on a free
// loopback port.
func kubeletAPI(t *testing.T) *overflownode.KubeletAPI {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return &overflownode.KubeletAPI{Address: "127.0.0.1", Port: int32(port), ClientCAFile: harness.KubeletClientCA(t)}
}

// startNodeProcess runs the sluice-overflow-node binary with cfg, as the
// node's ServiceAccount, and waits for its node to be Ready.
func startNodeProcess(t *testing.T, cp *harness.ControlPlane, cfg *overflownode.Config, args ...string) *harness.Process {
	t.Helper()
	nodeConfig(t, cp) // the shipped RBAC
	p := runNodeBinary(t, cp, cfg, cfg.NodeName, args...)
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, fmt.Errorf("sluice-overflow-node exited")
		default:
		}
		node, err := cp.Client.CoreV1().Nodes().Get(context.Background(), cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, nil
			}
		}
		return false, nil
	}, func() string { return "overflow node " + cfg.NodeName + " Ready" })
	return p
}

// startHTTPNodeWithKubeletAPI runs the node binary as name (deleted at
// the end) with one HTTP provider at url, "cloud", and a kubelet API on a
// loopback port, whose address it takes from --node-ip, as the shipped
// Deployment passes the pod's IP.
func startHTTPNodeWithKubeletAPI(t *testing.T, cp *harness.ControlPlane, name, url string) *overflownode.KubeletAPI {
	t.Helper()
	deleteNodeAtEnd(t, cp, name)
	api := kubeletAPI(t)
	cfg := &overflownode.Config{APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: name,
		ReconcileIntervalSeconds: ptr.To[int64](1),
		Providers:                []overflownode.ProviderConfig{{Name: "cloud", Type: overflownode.TypeHTTP, HTTP: &overflownode.HTTPProvider{URL: url}}},
		KubeletAPI:               &overflownode.KubeletAPI{Port: api.Port, ClientCAFile: api.ClientCAFile},
	}
	startNodeProcess(t, cp, cfg, "--node-ip="+api.Address)
	return api
}

// runNodeBinary starts the sluice-overflow-node binary, as process
// name, with cfg (written to a file) and args, as the node's
// ServiceAccount (whose RBAC the caller applied).
func runNodeBinary(t *testing.T, cp *harness.ControlPlane, cfg *overflownode.Config, name string, args ...string) *harness.Process {
	t.Helper()
	dir := t.TempDir()
	kubeconfig, err := cp.KubeconfigAs(dir, "system:serviceaccount:sluice-system:sluice-overflow-node",
		"system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "overflow-node.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--config=" + file, "--kubeconfig=" + kubeconfig, "--metrics-bind-address=", "--v=2"}, args...)
	return harness.StartProcess(t, name, harness.Binary(t, "sluice-overflow-node"), args...)
}

// webDeployment is a Deployment of a server on port bound to node, and a
// Service over it on port 80.
func webDeployment(t *testing.T, cp *harness.ControlPlane, ns, name, node string, replicas, port int32) {
	t.Helper()
	d := harness.InferenceDeployment(ns, name, replicas, 1)
	spec := &d.Spec.Template.Spec
	spec.NodeName = node
	spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	spec.Containers[0].Name = "web"
	spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: v1.ProtocolTCP}}
	harness.CreateDeployment(t, cp, d, nil)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: v1.ProtocolTCP}}},
	}
	if _, err := cp.Client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// endpointsWatch follows a Service's EndpointSlices and checks, at every
// change, that each ready endpoint is an address some remote workload
// serves at that moment (live).
type endpointsWatch struct {
	mu         sync.Mutex
	ready      map[string]int32 // ready address -> port
	violations harness.Violations
}

func watchEndpoints(t *testing.T, cp *harness.ControlPlane, ns, service string, live func(addr string) bool) *endpointsWatch {
	t.Helper()
	w := &endpointsWatch{ready: map[string]int32{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cp.Client, 0, informers.WithNamespace(ns))
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	recompute := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.ready = map[string]int32{}
		for _, obj := range inf.GetStore().List() {
			es := obj.(*discoveryv1.EndpointSlice)
			if es.Labels[discoveryv1.LabelServiceName] != service {
				continue
			}
			var port int32
			for _, p := range es.Ports {
				if p.Port != nil {
					port = *p.Port
				}
			}
			for _, ep := range es.Endpoints {
				if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
					continue
				}
				for _, a := range ep.Addresses {
					w.ready[a] = port
					if !live(a) {
						w.violations.Addf("EndpointSlice %s lists %s as ready, but no remote workload serves there", es.Name, a)
					}
				}
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { recompute() }, UpdateFunc: func(_, _ any) { recompute() }, DeleteFunc: func(any) { recompute() },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

func (w *endpointsWatch) readyAddresses() map[string]int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int32{}
	for a, p := range w.ready {
		out[a] = p
	}
	return out
}

// podLogs reads a pod's log through the home apiserver's pod log
// endpoint, as kubectl logs does; an error is the apiserver's message.
// (client-go's GetLogs hides it: it does not decode a Status on this
// text endpoint.)
func podLogs(t *testing.T, cp *harness.ControlPlane, ns, pod string, opts *v1.PodLogOptions) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rt, err := rest.TransportFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"container": {opts.Container}}
	if opts.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*opts.TailLines, 10))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.Config.Host+"/api/v1/namespaces/"+ns+"/pods/"+pod+"/log?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		var st metav1.Status
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, st.Message)
		}
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	return string(data), nil
}

// TestTrafficAndLogsOverHTTPProvider: the real overflow node binary runs
// a Service's pod at an HTTP provider whose workload listens on an address
// of this machine (EndpointSlices refuse loopback ones). The EndpointSlice
// lists exactly the address the workload reports (ready only once it
// serves), a request to it reaches the instance, the apiserver's pod log
// endpoint returns the remote lines (tail and follow), exec is refused
// with the reason, the node's kubelet API refuses a client that may not
// use it, and a workload that stops serving leaves the EndpointSlice.
func TestTrafficAndLogsOverHTTPProvider(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	allowKubeletClient(t, cp)
	hosts, err := providerserver.HostAddresses()
	if err != nil || len(hosts) == 0 {
		t.Fatalf("this machine has no global unicast IPv4 address for the provider's workload to listen on (%v)", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "8"}, StartDelay: time.Second,
		Serve: true, ServeAddresses: hosts[:1]})
	defer srv.Close()
	name := "ovf-web-" + harness.NewNameSuffix()
	api := startHTTPNodeWithKubeletAPI(t, cp, name, srv.URL)

	live := func(addr string) bool {
		for _, id := range srv.IDs() {
			if a, ok := srv.Address(id); ok && a == addr {
				return true
			}
		}
		return false
	}
	eps := watchEndpoints(t, cp, ns, "web", live)
	webDeployment(t, cp, ns, "web", name, 1, port)

	var p v1.Pod
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		pods := homePods(t, cp, ns, "web")
		if len(pods) != 1 || !ready(&pods[0]) {
			return false, nil
		}
		p = pods[0]
		return len(eps.readyAddresses()) == 1, nil
	}, func() string {
		return fmt.Sprintf("the web pod Ready and in the EndpointSlice: %s; ready endpoints %v", describe(homePods(t, cp, ns, "web")), eps.readyAddresses())
	})
	id := provider.IDFor(p.UID)
	addr, ok := srv.Address(id)
	if !ok || p.Status.PodIP != addr || len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != addr {
		t.Errorf("pod %s: podIP %q podIPs %v, want the workload's address %q", p.Name, p.Status.PodIP, p.Status.PodIPs, addr)
	}
	if p.Status.HostIP != api.Address {
		t.Errorf("pod %s: hostIP %q, want the node's %s", p.Name, p.Status.HostIP, api.Address)
	}
	addresses := eps.readyAddresses()
	if got, listed := addresses[addr]; !listed || got != port {
		t.Fatalf("EndpointSlice: %s listed %v on port %d, want listed on %d (ready: %v)", addr, listed, got, port, addresses)
	}
	// The Service's traffic reaches this very instance.
	resp, err := http.Get("http://" + net.JoinHostPort(addr, strconv.Itoa(int(port))) + "/predict")
	if err != nil {
		t.Fatalf("request to %s: %v", addr, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("%s serves %s/%s", id, ns, p.Name); !strings.Contains(string(body), want) {
		t.Errorf("request to %s answered %q, want %q", addr, body, want)
	}

	// kubectl logs: the remote lines, through the apiserver and the node.
	logs, err := podLogs(t, cp, ns, p.Name, &v1.PodLogOptions{Container: "web"})
	if err != nil {
		t.Fatalf("logs of %s: %v", p.Name, err)
	}
	if !strings.Contains(logs, "container web started from registry.k8s.io/pause") || !strings.Contains(logs, "GET /predict from") {
		t.Errorf("logs of %s = %q, want the start and the request lines", p.Name, logs)
	}
	last, err := podLogs(t, cp, ns, p.Name, &v1.PodLogOptions{Container: "web", TailLines: ptr.To[int64](1)})
	if err != nil || strings.Count(last, "\n") != 1 || !strings.Contains(last, "GET /predict") {
		t.Errorf("logs --tail=1 of %s = %q (%v), want the request line only", p.Name, last, err)
	}
	if _, err := podLogs(t, cp, ns, p.Name, &v1.PodLogOptions{Container: "nope"}); err == nil || !strings.Contains(err.Error(), "container nope is not valid") {
		t.Errorf("logs of an unknown container: %v, want it named", err)
	}
	followLogs(t, cp, ns, p.Name, func() { srv.Log(id, "web", "loaded model weights") }, "loaded model weights")

	// exec is refused, saying why.
	if err := execIn(t, cp, ns, p.Name); err == nil || !strings.Contains(err.Error(), "exec is not supported on overflow node") {
		t.Errorf("exec in %s: %v, want a refusal naming the overflow node", p.Name, err)
	}

	// The kubelet API itself: only an authorized client certificate.
	url := fmt.Sprintf("https://%s/containerLogs/%s/%s/web", net.JoinHostPort(api.Address, strconv.Itoa(int(api.Port))), ns, p.Name)
	get := func(certs ...tls.Certificate) (int, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}} //nolint:gosec // the node's self-signed certificate
		resp, err := c.Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(harness.KubeletClientCert(t, "intruder")); err != nil || code != http.StatusForbidden {
		t.Errorf("kubelet API as an unauthorized user: %d %v, want 403", code, err)
	}
	if code, err := get(harness.KubeletClientCert(t, harness.KubeletClientUser)); err != nil || code != http.StatusOK {
		t.Errorf("kubelet API as the apiserver: %d %v, want 200", code, err)
	}
	if code, err := get(); err == nil {
		t.Errorf("kubelet API without a client certificate answered %d, want the TLS handshake refused", code)
	}

	// A workload that stops serving leaves the EndpointSlice.
	srv.Fail(id, "out of memory")
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		_, listed := eps.readyAddresses()[addr]
		return !listed, nil
	}, func() string {
		return fmt.Sprintf("%s (%s) out of the ready endpoints: %v", p.Name, addr, eps.readyAddresses())
	})
	eps.violations.Check(t)
}

// followLogs follows a pod's log through the apiserver, calls write, and
// waits for want to arrive on the open stream.
func followLogs(t *testing.T, cp *harness.ControlPlane, ns, pod string, write func(), want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := cp.Client.CoreV1().Pods(ns).GetLogs(pod, &v1.PodLogOptions{Container: "web", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatalf("logs -f of %s: %v", pod, err)
	}
	defer stream.Close()
	lines := bufio.NewScanner(stream)
	written := false
	var seen []string
	for lines.Scan() {
		seen = append(seen, lines.Text())
		if strings.Contains(lines.Text(), want) {
			return
		}
		if !written && strings.Contains(lines.Text(), "GET /predict") {
			// The history is there: now a new line.
			write()
			written = true
		}
	}
	t.Errorf("logs -f of %s ended (%v) without %q; lines: %q", pod, lines.Err(), want, seen)
}

// execIn runs `kubectl exec` in a pod's web container, through the
// apiserver.
func execIn(t *testing.T, cp *harness.ControlPlane, ns, pod string) error {
	t.Helper()
	req := cp.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Container: "web", Command: []string{"true"}, Stdout: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(cp.Config, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
}

// TestTrafficAndLogsOverKubernetesProvider: a Service's pod runs as a
// remote pod in the second cluster. Its home EndpointSlice lists the
// remote pod's IP (ready once the remote pod is), and its log is the
// remote pod's, read through both apiservers and the remote kubelet.
func TestTrafficAndLogsOverKubernetesProvider(t *testing.T) {
	cp, rcp := harness.Shared(t), remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	allowKubeletClient(t, cp)
	name := "ovf-kweb-" + harness.NewNameSuffix()
	deleteNodeAtEnd(t, cp, name)
	api := kubeletAPI(t)
	startNodeWith(t, cp, name, func(c *overflownode.Config) { c.KubeletAPI = api }, kubeProvider(rcp, "burst", 0))

	// Called on the watch's goroutine: no t.Fatal there.
	live := func(addr string) bool {
		list, err := rcp.Client.CoreV1().Pods(remoteNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: kube.LabelNode + "=" + name})
		if err != nil {
			return false
		}
		for _, rp := range list.Items {
			if rp.Status.PodIP == addr && ready(&rp) {
				return true
			}
		}
		return false
	}
	eps := watchEndpoints(t, cp, ns, "web", live)
	webDeployment(t, cp, ns, "web", name, 1, 8080)

	var pod v1.Pod
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		pods := homePods(t, cp, ns, "web")
		if len(pods) != 1 || !ready(&pods[0]) {
			return false, nil
		}
		pod = pods[0]
		_, listed := eps.readyAddresses()[pod.Status.PodIP]
		return listed, nil
	}, func() string {
		return fmt.Sprintf("the web pod Ready and in the EndpointSlice: %s; ready endpoints %v", describe(homePods(t, cp, ns, "web")), eps.readyAddresses())
	})
	id := provider.IDFor(pod.UID)
	var remoteIP string
	for _, rp := range remotePods(t, rcp, name) {
		if rp.Name == id {
			remoteIP = rp.Status.PodIP
		}
	}
	if remoteIP == "" || pod.Status.PodIP != remoteIP {
		t.Errorf("home pod IP %q, want the remote pod's %q", pod.Status.PodIP, remoteIP)
	}
	logs, err := podLogs(t, cp, ns, pod.Name, &v1.PodLogOptions{Container: "web"})
	if want := fmt.Sprintf("nodesim: container web of pod %s/%s started", remoteNamespace, id); err != nil || !strings.Contains(logs, want) {
		t.Errorf("logs of %s = %q (%v), want the remote pod's line %q", pod.Name, logs, err, want)
	}
	eps.violations.Check(t)
}
