// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package httpprovider

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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
}

// Client talks to one HTTP provider.
type Client struct {
	base  *url.URL
	token string
	node  string
	http  *http.Client
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
		if _, err := os.Stat(o.TokenFile); err != nil {
			return nil, fmt.Errorf("tokenFile: %w", err)
		}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, token: o.TokenFile, node: o.Node, http: &http.Client{Transport: transport}}, nil
}

// Create puts the workload.
func (c *Client) Create(ctx context.Context, id string, pod *v1.Pod) error {
	req, err := Request(id, c.node, pod)
	if err != nil {
		return err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPut, "/v1/workloads/"+url.PathEscape(id), nil, body, nil)
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

// Carries is what the HTTP contract carries: containers, their literal
// environment, ports and resources; no volumes, Secrets or ConfigMaps.
func (c *Client) Carries() offer.Carries { return offer.Carries{} }

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
	Message      string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Code, e.Message)
}

// Unwrap maps 404 to provider.ErrNotFound and 422 to
// provider.ErrUnsupported.
func (e *StatusError) Unwrap() error {
	switch e.Code {
	case http.StatusNotFound:
		return provider.ErrNotFound
	case http.StatusUnprocessableEntity:
		return provider.ErrUnsupported
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		token, err := os.ReadFile(c.token)
		if err != nil {
			return fmt.Errorf("reading the token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e Error
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
		return &StatusError{Method: method, Path: path, Code: resp.StatusCode, Message: msg}
	}
	if out == nil || len(data) == 0 && resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

// Request builds the create request for pod: only what the contract can
// carry (containers, literal environment, ports, resources); anything else
// fails with provider.ErrUnsupported naming the field.
func Request(id, node string, pod *v1.Pod) (*CreateRequest, error) {
	p, err := provider.Portable(pod, offer.Carries{})
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
	for _, set := range []struct {
		path string
		in   []v1.Container
		out  *[]Container
	}{{"spec.containers", p.Containers, &req.Containers}, {"spec.initContainers", p.InitContainers, &req.InitContainers}} {
		for i, c := range set.in {
			if len(c.VolumeMounts) > 0 {
				return nil, fmt.Errorf("%w: %s[%d] (%s): volume mounts cannot be carried over HTTP", provider.ErrUnsupported, set.path, i, c.Name)
			}
			out := Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args,
				Resources: Resources{Requests: quantities(c.Resources.Requests), Limits: quantities(c.Resources.Limits)}}
			for _, e := range c.Env {
				if e.ValueFrom != nil {
					return nil, fmt.Errorf("%w: %s[%d] (%s): env %s is not a literal value", provider.ErrUnsupported, set.path, i, c.Name, e.Name)
				}
				out.Env = append(out.Env, EnvVar{Name: e.Name, Value: e.Value})
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
