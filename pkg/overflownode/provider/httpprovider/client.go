// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package httpprovider

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// Options configure a client.
type Options struct {
	// URL is the provider's base URL, http or https.
	URL string
	// TokenFile holds a bearer token; it is read on every request, so a
	// rotated token is used at once, and never logged.
	TokenFile string
	// CAFile verifies the provider's certificate (system roots if empty).
	CAFile string
	// Node is the overflow node's name, sent with every listing.
	Node string
	// Secrets and ConfigMaps: pods reading them may run here (over https
	// only), their data sent with the workload.
	Secrets, ConfigMaps bool
}

// Client talks to one HTTP provider.
type Client struct {
	base  *url.URL
	token string
	node  string
	http  *http.Client
	// tls: the provider is reached over https, so Secrets may be sent.
	tls                 bool
	secrets, configMaps bool
}

var _ provider.Provider = &Client{}

// maxBody bounds what is read from a provider.
const maxBody = 32 << 20

// New checks the options and builds a client.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http(s)://host[:port][/path]", o.URL)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s: no PEM certificate in it", o.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if o.TokenFile != "" {
		if u.Scheme != "https" {
			return nil, fmt.Errorf("tokenFile: a bearer token is sent only over https, and url is %s", u.Scheme)
		}
		if _, err := os.Stat(o.TokenFile); err != nil {
			return nil, fmt.Errorf("tokenFile: %w", err)
		}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	// No redirects: the contract has none, and following one could
	// replay a PUT carrying Secrets to another (plain http) address.
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: u, token: o.TokenFile, node: o.Node, http: &http.Client{Transport: transport, CheckRedirect: noRedirects},
		tls: u.Scheme == "https", secrets: o.Secrets, configMaps: o.ConfigMaps}, nil
}

// Create puts the workload.
func (c *Client) Create(ctx context.Context, id string, pod *v1.Pod, refs provider.Refs) error {
	return c.put(ctx, id, pod, refs, nil)
}

// put sends PUT /v1/workloads/{id} with the headers given.
func (c *Client) put(ctx context.Context, id string, pod *v1.Pod, refs provider.Refs, hdr http.Header) error {
	if !refs.Empty() && !c.tls {
		// Carries says so too; this is the last guard.
		return fmt.Errorf("%w: Secrets and ConfigMaps are sent only over https", provider.ErrUnsupported)
	}
	req, err := Request(id, c.node, pod, c.Carries(), refs)
	if err != nil {
		return err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	err = c.doWith(ctx, http.MethodPut, "/v1/workloads/"+url.PathEscape(id), nil, body, nil, hdr)
	var se *StatusError
	if errors.As(err, &se) && repeatsAny(se.full, sensitive(req)) {
		se.Message = notShown
	}
	return err
}

// sensitive are the values of a request a provider's message must not
// repeat: its Secrets' and ConfigMaps' data and its literal environment.
func sensitive(req *CreateRequest) [][]byte {
	var out [][]byte
	for _, objs := range [][]Object{req.Secrets, req.ConfigMaps} {
		for _, o := range objs {
			for _, v := range o.Data {
				out = append(out, v)
			}
		}
	}
	for _, cs := range [][]Container{req.InitContainers, req.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.Value != "" {
					out = append(out, []byte(e.Value))
				}
			}
		}
	}
	return out
}

// repeatsAny reports whether msg holds any of values (of at least 4
// bytes), as sent or base64-encoded (as JSON carries them), or any window
// bytes of them.
func repeatsAny(msg string, values [][]byte) bool {
	for _, v := range values {
		if len(v) < 4 {
			continue
		}
		for _, form := range []string{string(v), base64.StdEncoding.EncodeToString(v)} {
			if strings.Contains(msg, form) || repeats(msg, []byte(form)) {
				return true
			}
		}
	}
	return false
}

// Adopt puts the workload's pod: PUT /v1/workloads/{id}/pod.
func (c *Client) Adopt(ctx context.Context, id string, pod provider.PodRef) error {
	body, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPut, "/v1/workloads/"+url.PathEscape(id)+"/pod", nil, body, nil)
}

// Delete deletes the workload.
func (c *Client) Delete(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "/v1/workloads/"+url.PathEscape(id), nil, nil, nil)
	if errors.Is(err, provider.ErrNotFound) {
		return nil
	}
	return err
}

// Get reads one workload.
func (c *Client) Get(ctx context.Context, id string) (*provider.Workload, error) {
	var w provider.Workload
	if err := c.do(ctx, http.MethodGet, "/v1/workloads/"+url.PathEscape(id), nil, nil, &w); err != nil {
		return nil, err
	}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("provider answered with an invalid workload: %w", err)
	}
	return &w, nil
}

// List lists this node's workloads; invalid items fail the listing, so a
// provider bug is never mistaken for vanished workloads.
func (c *Client) List(ctx context.Context) ([]provider.Workload, error) {
	var list WorkloadList
	if err := c.do(ctx, http.MethodGet, "/v1/workloads", url.Values{"node": {c.node}}, nil, &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if err := list.Items[i].Validate(); err != nil {
			return nil, fmt.Errorf("provider listed an invalid workload (item %d): %w", i, err)
		}
	}
	return list.Items, nil
}

// Capacity reads the capacity.
func (c *Client) Capacity(ctx context.Context) (v1.ResourceList, error) {
	var capacity Capacity
	if err := c.do(ctx, http.MethodGet, "/v1/capacity", url.Values{"node": {c.node}}, nil, &capacity); err != nil {
		return nil, err
	}
	out := v1.ResourceList{}
	for name, value := range capacity.Resources {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("capacity %s=%q: %w", name, value, err)
		}
		out[v1.ResourceName(name)] = q
	}
	return out, nil
}

var _ provider.UsageReader = &Client{}

// Usage reads what the node's workloads use. A provider that does not
// serve /v1/usage (404, 501) measures nothing: an error wrapping
// provider.ErrUnsupported. Any invalid item fails the answer, so a
// provider bug is never shown as a measure.
func (c *Client) Usage(ctx context.Context) ([]provider.Usage, error) {
	var list UsageList
	err := c.do(ctx, http.MethodGet, "/v1/usage", url.Values{"node": {c.node}}, nil, &list)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, fmt.Errorf("%w: %v", provider.ErrUnsupported, err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]provider.Usage, 0, len(list.Items))
	for i, item := range list.Items {
		u, err := item.parse()
		if err != nil {
			return nil, fmt.Errorf("provider answered an invalid usage (item %d): %w", i, err)
		}
		out = append(out, u)
	}
	return out, nil
}

func (w WorkloadUsage) parse() (provider.Usage, error) {
	u := provider.Usage{ID: w.ID, Time: w.Timestamp}
	if w.ID == "" || w.Timestamp.IsZero() {
		return u, fmt.Errorf("id and timestamp are required")
	}
	for _, c := range w.Containers {
		if c.Name == "" {
			return u, fmt.Errorf("workload %s: a container without a name", w.ID)
		}
		cpu, err := resource.ParseQuantity(c.CPU)
		if err != nil || cpu.Sign() < 0 {
			return u, fmt.Errorf("workload %s container %s: cpu %q: want a quantity of at least 0", w.ID, c.Name, c.CPU)
		}
		mem, err := resource.ParseQuantity(c.Memory)
		if err != nil || mem.Sign() < 0 {
			return u, fmt.Errorf("workload %s container %s: memory %q: want a quantity of at least 0", w.ID, c.Name, c.Memory)
		}
		u.Containers = append(u.Containers, provider.ContainerUsage{Name: c.Name, CPU: cpu, Memory: mem})
	}
	return u, nil
}

// Carries is what the HTTP contract carries: containers, their literal
// environment, ports, resources and emptyDir volumes; over https also the
// Secrets and ConfigMaps they read (env, envFrom, volumes).
func (c *Client) Carries() offer.Carries {
	out := offer.Carries{Volumes: []string{"emptyDir"}}
	if c.tls && c.secrets {
		out.Secrets, out.Volumes = true, append(out.Volumes, "secret")
	}
	if c.tls && c.configMaps {
		out.ConfigMaps, out.Volumes = true, append(out.Volumes, "configMap")
	}
	return out
}

// UpdateRefs puts the workload again with the current Secrets and
// ConfigMaps, only if it still exists: "If-Match: *", which a provider
// answers with 412 for an id it does not have (a vanished workload is not
// run again). The GET first keeps that true of a provider that ignores
// the header, but for the moment between the two.
func (c *Client) UpdateRefs(ctx context.Context, id string, pod *v1.Pod, refs provider.Refs) error {
	if _, err := c.Get(ctx, id); err != nil {
		return err
	}
	return c.put(ctx, id, pod, refs, http.Header{"If-Match": {"*"}})
}

// Health reads the health.
func (c *Client) Health(ctx context.Context) error {
	var h Health
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, nil, &h); err != nil {
		return err
	}
	if !h.Healthy {
		if h.Message == "" {
			h.Message = "provider reports itself unhealthy"
		}
		return errors.New(h.Message)
	}
	return nil
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Method, Path string
	Code         int
	// Message is the provider's, cut (see answer); full is all of it,
	// never shown, to check it against what the request carried.
	Message string
	full    string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Code, e.Message)
}

// Unwrap maps 404 (and 412, the answer to "If-Match: *" for an id the
// provider does not have) to provider.ErrNotFound, and 422 and 501 to
// provider.ErrUnsupported.
func (e *StatusError) Unwrap() error {
	switch e.Code {
	case http.StatusNotFound, http.StatusPreconditionFailed:
		return provider.ErrNotFound
	case http.StatusUnprocessableEntity, http.StatusNotImplemented:
		return provider.ErrUnsupported
	}
	return nil
}

// send sends one request and returns the answer when it is a 2xx.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body []byte, accept string, hdr http.Header) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		token, err := os.ReadFile(c.token)
		if err != nil {
			return nil, fmt.Errorf("reading the token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	full := answer(data)
	return nil, &StatusError{Method: method, Path: path, Code: resp.StatusCode, Message: cut(full), full: full}
}

// maxMessage bounds a provider's error message as the node repeats it (in
// Events, pod status and logs).
const maxMessage = 200

// notShown stands for a provider's message that repeats the request.
const notShown = "(the provider's message repeats the request, so it is not shown)"

// answer is what is said of a provider's error answer: the message of the
// contract's {"error": ...}, and nothing of an answer in any other form
// (a framework's default page may repeat the request).
func answer(data []byte) string {
	var e Error
	if json.Unmarshal(data, &e) != nil || strings.TrimSpace(e.Error) == "" {
		return "(no error message in the contract's form)"
	}
	return strings.TrimSpace(e.Error)
}

// cut shortens a provider's message to maxMessage bytes.
func cut(msg string) string {
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "..."
	}
	return msg
}

// window is the length of the pieces of a request a message may not
// repeat.
const window = 12

// repeats reports whether msg holds any window bytes of sent (a value
// shorter than window is looked for whole, by repeatsAny).
func repeats(msg string, sent []byte) bool {
	if len(sent) < window || len(msg) < window {
		return false
	}
	pieces := make(map[string]bool, len(msg))
	for i := 0; i+window <= len(msg); i++ {
		pieces[msg[i:i+window]] = true
	}
	for i := 0; i+window <= len(sent); i++ {
		if pieces[string(sent[i:i+window])] {
			return true
		}
	}
	return false
}

// Logs streams GET /v1/workloads/{id}/logs (text/plain).
func (c *Client) Logs(ctx context.Context, id, container string, o provider.LogOptions) (io.ReadCloser, error) {
	q := url.Values{"container": {container}}
	if o.Tail > 0 {
		q.Set("tailLines", strconv.Itoa(o.Tail))
	}
	if o.LimitBytes > 0 {
		q.Set("limitBytes", strconv.Itoa(o.LimitBytes))
	}
	if !o.Since.IsZero() {
		q.Set("sinceTime", o.Since.UTC().Format(time.RFC3339))
	}
	for name, on := range map[string]bool{"follow": o.Follow, "timestamps": o.Timestamps, "previous": o.Previous} {
		if on {
			q.Set(name, "true")
		}
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/workloads/"+url.PathEscape(id)+"/logs", q, nil, "text/plain", nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	return c.doWith(ctx, method, path, query, body, out, nil)
}

func (c *Client) doWith(ctx context.Context, method, path string, query url.Values, body []byte, out any, hdr http.Header) error {
	resp, err := c.send(ctx, method, path, query, body, "application/json", hdr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if out == nil || len(data) == 0 && resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

// Request builds the create request for pod: only what carries covers
// (containers, literal environment, ports, resources, emptyDir volumes,
// and, when carried, the Secrets and ConfigMaps in refs that the pod
// reads); anything else fails with provider.ErrUnsupported naming the
// field.
func Request(id, node string, pod *v1.Pod, carries offer.Carries, refs provider.Refs) (*CreateRequest, error) {
	p, err := provider.Portable(pod, carries)
	if err != nil {
		return nil, err
	}
	req := &CreateRequest{
		ID: id, Node: node,
		Pod:           provider.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Labels:        pod.Labels,
		RestartPolicy: string(pod.Spec.RestartPolicy),
	}
	if req.RestartPolicy == "" {
		req.RestartPolicy = string(v1.RestartPolicyAlways)
	}
	for _, name := range sortedKeys(refs.Secrets) {
		req.Secrets = append(req.Secrets, Object{Name: name, Data: refs.Secrets[name].Data})
	}
	for _, ref := range pod.Spec.ImagePullSecrets {
		if refs.Secrets[ref.Name] != nil {
			req.ImagePullSecrets = append(req.ImagePullSecrets, ref.Name)
		}
	}
	for _, name := range sortedKeys(refs.ConfigMaps) {
		c := refs.ConfigMaps[name]
		data := make(map[string][]byte, len(c.Data)+len(c.BinaryData))
		for k, v := range c.Data {
			data[k] = []byte(v)
		}
		for k, v := range c.BinaryData {
			data[k] = v
		}
		req.ConfigMaps = append(req.ConfigMaps, Object{Name: name, Data: data})
	}
	for i, vol := range p.Volumes {
		out := Volume{Name: vol.Name}
		switch {
		case vol.EmptyDir != nil:
			out.EmptyDir = &EmptyDir{}
			if l := vol.EmptyDir.SizeLimit; l != nil {
				out.EmptyDir.SizeLimit = l.String()
			}
		case vol.Secret != nil:
			out.Secret = &ObjectSource{Name: vol.Secret.SecretName, Items: items(vol.Secret.Items), Optional: ptr.Deref(vol.Secret.Optional, false)}
		case vol.ConfigMap != nil:
			out.ConfigMap = &ObjectSource{Name: vol.ConfigMap.Name, Items: items(vol.ConfigMap.Items), Optional: ptr.Deref(vol.ConfigMap.Optional, false)}
		default:
			return nil, fmt.Errorf("%w: spec.volumes[%d] (%s): %s volumes cannot be carried over HTTP", provider.ErrUnsupported, i, vol.Name, offer.VolumeType(vol))
		}
		req.Volumes = append(req.Volumes, out)
	}
	for _, set := range []struct {
		path string
		in   []v1.Container
		out  *[]Container
	}{{"spec.containers", p.Containers, &req.Containers}, {"spec.initContainers", p.InitContainers, &req.InitContainers}} {
		for i, c := range set.in {
			out := Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args,
				Resources: Resources{Requests: quantities(c.Resources.Requests), Limits: quantities(c.Resources.Limits)}}
			for _, m := range c.VolumeMounts {
				if m.SubPathExpr != "" || m.MountPropagation != nil {
					return nil, fmt.Errorf("%w: %s[%d] (%s): volume mount %s: subPathExpr and mountPropagation cannot be carried over HTTP", provider.ErrUnsupported, set.path, i, c.Name, m.Name)
				}
				out.VolumeMounts = append(out.VolumeMounts, VolumeMount{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly, SubPath: m.SubPath})
			}
			for _, from := range c.EnvFrom {
				e := EnvFrom{Prefix: from.Prefix}
				switch {
				case from.SecretRef != nil:
					e.Secret = &ObjectRef{Name: from.SecretRef.Name, Optional: ptr.Deref(from.SecretRef.Optional, false)}
				case from.ConfigMapRef != nil:
					e.ConfigMap = &ObjectRef{Name: from.ConfigMapRef.Name, Optional: ptr.Deref(from.ConfigMapRef.Optional, false)}
				default:
					return nil, fmt.Errorf("%w: %s[%d] (%s): envFrom without a Secret or ConfigMap cannot be carried over HTTP", provider.ErrUnsupported, set.path, i, c.Name)
				}
				out.EnvFrom = append(out.EnvFrom, e)
			}
			for _, e := range c.Env {
				env := EnvVar{Name: e.Name, Value: e.Value}
				switch from := e.ValueFrom; {
				case from == nil:
				case from.SecretKeyRef != nil:
					env.ValueFrom = &EnvSource{Secret: &KeyRef{Name: from.SecretKeyRef.Name, Key: from.SecretKeyRef.Key, Optional: ptr.Deref(from.SecretKeyRef.Optional, false)}}
				case from.ConfigMapKeyRef != nil:
					env.ValueFrom = &EnvSource{ConfigMap: &KeyRef{Name: from.ConfigMapKeyRef.Name, Key: from.ConfigMapKeyRef.Key, Optional: ptr.Deref(from.ConfigMapKeyRef.Optional, false)}}
				default:
					return nil, fmt.Errorf("%w: %s[%d] (%s): env %s is not a literal value, a Secret or a ConfigMap", provider.ErrUnsupported, set.path, i, c.Name, e.Name)
				}
				out.Env = append(out.Env, env)
			}
			for _, p := range c.Ports {
				out.Ports = append(out.Ports, Port{Name: p.Name, ContainerPort: p.ContainerPort, Protocol: string(p.Protocol)})
			}
			*set.out = append(*set.out, out)
		}
	}
	return req, nil
}

func quantities(l v1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

func items(in []v1.KeyToPath) []KeyToPath {
	var out []KeyToPath
	for _, it := range in {
		out = append(out, KeyToPath{Key: it.Key, Path: it.Path})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
