// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// APIVersion and Kind head a configuration file.
const (
	APIVersion = "overflow.sluice.dev/v1alpha1"
	Kind       = "OverflowNodeConfiguration"
)

// Provider types.
const (
	TypeKubernetes = "kubernetes"
	TypeHTTP       = "http"
)

// Config is sluice-overflow-node's configuration file:
//
//	apiVersion: overflow.sluice.dev/v1alpha1
//	kind: OverflowNodeConfiguration
//	nodeName: sluice-overflow
//	providers:
//	- name: burst-east
//	  type: kubernetes
//	  priority: 0
//	  pricePerGPUHour: 2.10
//	  quota: {nvidia.com/gpu: "64"}
//	  kubernetes: {kubeconfig: /etc/sluice/burst-east/kubeconfig, namespace: sluice-overflow}
//	- name: gpu-cloud
//	  type: http
//	  priority: 1
//	  http: {url: https://api.gpu-cloud.example/sluice, tokenFile: /etc/sluice/gpu-cloud/token}
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// NodeName is the node this process registers (default sluice-overflow).
	NodeName string `json:"nodeName,omitempty"`
	// Labels are added to the node's labels (type=virtual-kubelet is
	// always set).
	Labels map[string]string `json:"labels,omitempty"`
	// MaxPods is the node's pod capacity (default 5000).
	MaxPods *int32 `json:"maxPods,omitempty"`
	// GPUResourceName is the GPU resource whose use at each provider is
	// metered (GPU-seconds, and cost at the provider's pricePerGPUHour;
	// default nvidia.com/gpu).
	GPUResourceName string `json:"gpuResourceName,omitempty"`
	// Durations are whole seconds, in fields named for it, as in the
	// scheduler's configuration.
	//
	// ReconcileIntervalSeconds is how often providers are listed and
	// statuses translated (default 5).
	ReconcileIntervalSeconds *int64 `json:"reconcileIntervalSeconds,omitempty"`
	// RequestTimeoutSeconds bounds every call to a provider (default 10).
	RequestTimeoutSeconds *int64 `json:"requestTimeoutSeconds,omitempty"`
	// ProviderFailureTimeoutSeconds is how long a provider's listing may
	// fail before the provider is taken as gone: the pods it runs are
	// evicted as their disruption budgets allow, so their controllers
	// replace them a budget at a time (a pod no budget paces is failed;
	// default 120). A provider that lists but fails its health or capacity
	// call only takes no new work: the pods whose workloads it lists go on
	// as their workloads are.
	ProviderFailureTimeoutSeconds *int64 `json:"providerFailureTimeoutSeconds,omitempty"`
	// DispatchTimeoutSeconds is how long a pod bound to the node may go
	// without any provider starting it (every provider down, full or
	// refusing) before it is marked Failed, so its controller replaces it
	// and the replacement is scheduled afresh (default 120). A pod no
	// provider can run as written is failed at once.
	DispatchTimeoutSeconds *int64 `json:"dispatchTimeoutSeconds,omitempty"`
	// WarmTTLSeconds is how long a warm instance (started for a victim of
	// a make-before-break claim) may stay unadopted, from its creation at
	// the provider, before it is deleted (default 900). Keep it above the
	// scheduler's claims.warmTimeoutSeconds.
	WarmTTLSeconds *int64 `json:"warmTTLSeconds,omitempty"`
	// Providers, in no particular order: dispatch orders them by
	// priority, then price, then name.
	Providers []ProviderConfig `json:"providers"`
	// KubeletAPI serves the part of the kubelet API that the apiserver
	// proxies `kubectl logs` (and exec, refused) to. Without it the node
	// publishes no kubelet endpoint and the apiserver has nowhere to ask.
	KubeletAPI *KubeletAPI `json:"kubeletAPI,omitempty"`
	// LeaderElection lets several replicas serve the node: one leads and
	// runs it, the others stand by to take it over.
	LeaderElection LeaderElection `json:"leaderElection,omitempty"`
}

// LeaderElection is how replicas of one node elect the one that runs it,
// through a Lease in the home cluster. A standby takes the node over at
// most leaseDurationSeconds after the leader stopped renewing, well within
// the 50 s after which the node lifecycle controller would mark the node
// NotReady; the new leader renews the node's own Lease first.
type LeaderElection struct {
	// LeaderElect: default true. Off, the process runs the node at once:
	// run one replica only.
	LeaderElect *bool `json:"leaderElect,omitempty"`
	// ResourceNamespace is the Lease's namespace (default sluice-system;
	// the chart sets its release's).
	ResourceNamespace string `json:"resourceNamespace,omitempty"`
	// ResourceName is the Lease's name (default sluice-overflow-node-
	// followed by nodeName).
	ResourceName string `json:"resourceName,omitempty"`
	// LeaseDurationSeconds is how long a standby waits, after the last
	// renewal, before it takes the node over (default 15, at most 30).
	LeaseDurationSeconds *int64 `json:"leaseDurationSeconds,omitempty"`
	// RenewDeadlineSeconds is how long the leader retries renewing before
	// it gives the node up and exits (default 10).
	RenewDeadlineSeconds *int64 `json:"renewDeadlineSeconds,omitempty"`
	// RetryPeriodSeconds is how often replicas try to acquire or renew
	// (default 2).
	RetryPeriodSeconds *int64 `json:"retryPeriodSeconds,omitempty"`
}

// KubeletAPI is the node's kubelet endpoint: https only; a client must
// present a certificate signed by ClientCAFile (the apiserver's
// --kubelet-client-certificate) and be allowed nodes/proxy on this node
// (a SubjectAccessReview, as the kubelet's webhook authorization asks).
type KubeletAPI struct {
	// Address is the IP the apiserver reaches the node at, published as
	// the node's InternalIP (the binary's --node-ip sets it, e.g. to the
	// pod's IP). The server listens on it.
	Address string `json:"address"`
	// Port is published as the node's kubelet endpoint (default 10250).
	Port int32 `json:"port,omitempty"`
	// CertFile and KeyFile are the serving certificate; without them the
	// node makes a self-signed one at start-up (the apiserver checks it
	// only with --kubelet-certificate-authority).
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// ClientCAFile verifies client certificates (required).
	ClientCAFile string `json:"clientCAFile"`
}

// ProviderConfig is one provider.
type ProviderConfig struct {
	// Name identifies the provider in events, metrics and pod conditions
	// (a DNS label).
	Name string `json:"name"`
	// Type is kubernetes or http.
	Type string `json:"type"`
	// Priority orders dispatch: lower first (default 0).
	Priority int32 `json:"priority,omitempty"`
	// PricePerGPUHour breaks ties between equal priorities: cheaper first;
	// sluice_overflow_node_cost_total counts GPU-hours run here at it (in
	// whatever currency it is stated).
	PricePerGPUHour float64 `json:"pricePerGPUHour,omitempty"`
	// Quota caps what the provider reports, per resource.
	Quota v1.ResourceList `json:"quota,omitempty"`
	// Namespaces are those whose pods may run here, and so whose Secrets
	// may go here (the scheduler reads them from the node's offer); empty:
	// every namespace the scheduler's tenancy policy lets be production.
	Namespaces []string `json:"namespaces,omitempty"`

	Kubernetes *KubernetesProvider `json:"kubernetes,omitempty"`
	HTTP       *HTTPProvider       `json:"http,omitempty"`
}

// KubernetesProvider is a second cluster.
type KubernetesProvider struct {
	// Kubeconfig is the path of a kubeconfig for the remote cluster.
	Kubeconfig string `json:"kubeconfig"`
	// Namespace is where the remote pods are created (it must exist).
	Namespace string `json:"namespace"`
	// Secrets: pods that read home Secrets (env, envFrom, volumes) may
	// run here; each Secret is copied into Namespace, owned by the remote
	// pod, and kept up to date. Default true; false keeps Secrets in the
	// home cluster, and such pods are never moved to this provider.
	Secrets *bool `json:"secrets,omitempty"`
	// ConfigMaps: the same for ConfigMaps. Default true.
	ConfigMaps *bool `json:"configMaps,omitempty"`
}

// HTTPProvider is a provider speaking the HTTP contract.
type HTTPProvider struct {
	URL       string `json:"url"`
	TokenFile string `json:"tokenFile,omitempty"`
	CAFile    string `json:"caFile,omitempty"`
	// Secrets and ConfigMaps: as for the kubernetes provider (default
	// true), and only ever over https.
	Secrets    *bool `json:"secrets,omitempty"`
	ConfigMaps *bool `json:"configMaps,omitempty"`
}

// Defaults.
const (
	DefaultNodeName               = "sluice-overflow"
	DefaultGPUResourceName        = "nvidia.com/gpu"
	DefaultMaxPods                = 5000
	DefaultReconcileInterval      = 5 * time.Second
	DefaultRequestTimeout         = 10 * time.Second
	DefaultProviderFailureTimeout = 2 * time.Minute
	DefaultDispatchTimeout        = 2 * time.Minute
	DefaultWarmTTL                = 15 * time.Minute
	DefaultKubeletPort            = 10250
	DefaultLeaseNamespace         = "sluice-system"
	DefaultLeaseDuration          = 15 * time.Second
	DefaultRenewDeadline          = 10 * time.Second
	DefaultRetryPeriod            = 2 * time.Second
	// MaxLeaseDuration keeps a takeover, with the new leader's start, well
	// within kube-controller-manager's default node-monitor-grace-period
	// (50 s).
	MaxLeaseDuration = 30 * time.Second
)

// LoadOption changes a configuration after it is read, before it is
// defaulted and validated.
type LoadOption func(*Config)

// WithNodeIP sets kubeletAPI.address (the binary's --node-ip, e.g. the
// pod's IP from the downward API); empty changes nothing.
func WithNodeIP(ip string) LoadOption {
	return func(c *Config) {
		if ip != "" && c.KubeletAPI != nil {
			c.KubeletAPI.Address = ip
		}
	}
}

// LoadConfig reads, defaults and validates a configuration file. Unknown
// fields are errors; every error names the field path.
func LoadConfig(path string, opts ...LoadOption) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Durations were Go durations before they were whole seconds: say
	// what a field is called now rather than only that it is unknown.
	var top map[string]any
	if err := json.Unmarshal(js, &top); err == nil {
		var errs []error
		renamed := renamedFields()
		for _, old := range slices.Sorted(maps.Keys(renamed)) {
			if v, ok := top[old]; ok {
				errs = append(errs, fmt.Errorf("%s: %v: renamed %s, in whole seconds (one duration style with the scheduler's configuration)", old, v, renamed[old]))
			}
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("%s: %w", path, errors.Join(errs...))
		}
	}
	// Case-sensitive and strict: "nodename" is an unknown field, not
	// nodeName.
	var cfg Config
	strict, err := sjson.UnmarshalStrict(js, &cfg, sjson.DisallowUnknownFields, sjson.DisallowDuplicateFields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("%s: %w", path, errors.Join(strict...))
	}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.Default()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", path, errs.ToAggregate())
	}
	return &cfg, nil
}

// Default fills in the defaults.
func (c *Config) Default() {
	if c.NodeName == "" {
		c.NodeName = DefaultNodeName
	}
	if c.GPUResourceName == "" {
		c.GPUResourceName = DefaultGPUResourceName
	}
	if c.MaxPods == nil {
		n := int32(DefaultMaxPods)
		c.MaxPods = &n
	}
	if c.KubeletAPI != nil && c.KubeletAPI.Port == 0 {
		c.KubeletAPI.Port = DefaultKubeletPort
	}
	for i := range c.Providers {
		if k := c.Providers[i].Kubernetes; k != nil {
			if k.Secrets == nil {
				k.Secrets = ptr.To(true)
			}
			if k.ConfigMaps == nil {
				k.ConfigMaps = ptr.To(true)
			}
		}
		if h := c.Providers[i].HTTP; h != nil {
			if h.Secrets == nil {
				h.Secrets = ptr.To(true)
			}
			if h.ConfigMaps == nil {
				h.ConfigMaps = ptr.To(true)
			}
		}
	}
	le := &c.LeaderElection
	if le.LeaderElect == nil {
		le.LeaderElect = ptr.To(true)
	}
	if le.ResourceNamespace == "" {
		le.ResourceNamespace = DefaultLeaseNamespace
	}
	if le.ResourceName == "" {
		le.ResourceName = "sluice-overflow-node-" + c.NodeName
	}
	for _, d := range []struct {
		field **int64
		value time.Duration
	}{{&c.ReconcileIntervalSeconds, DefaultReconcileInterval}, {&c.RequestTimeoutSeconds, DefaultRequestTimeout},
		{&c.ProviderFailureTimeoutSeconds, DefaultProviderFailureTimeout}, {&c.DispatchTimeoutSeconds, DefaultDispatchTimeout}, {&c.WarmTTLSeconds, DefaultWarmTTL},
		{&le.LeaseDurationSeconds, DefaultLeaseDuration}, {&le.RenewDeadlineSeconds, DefaultRenewDeadline}, {&le.RetryPeriodSeconds, DefaultRetryPeriod}} {
		if *d.field == nil {
			*d.field = ptr.To(int64(d.value / time.Second))
		}
	}
}

// ReconcileInterval is reconcileIntervalSeconds (after Default).
func (c *Config) ReconcileInterval() time.Duration { return seconds(c.ReconcileIntervalSeconds) }

// RequestTimeout is requestTimeoutSeconds.
func (c *Config) RequestTimeout() time.Duration { return seconds(c.RequestTimeoutSeconds) }

// ProviderFailureTimeout is providerFailureTimeoutSeconds.
func (c *Config) ProviderFailureTimeout() time.Duration {
	return seconds(c.ProviderFailureTimeoutSeconds)
}

// DispatchTimeout is dispatchTimeoutSeconds.
func (c *Config) DispatchTimeout() time.Duration { return seconds(c.DispatchTimeoutSeconds) }

// WarmTTL is warmTTLSeconds.
func (c *Config) WarmTTL() time.Duration { return seconds(c.WarmTTLSeconds) }

func seconds(s *int64) time.Duration { return time.Duration(ptr.Deref(s, 0)) * time.Second }

// renamed are the duration fields of earlier versions, which took Go
// durations ("5s"), and what they are called now.
func renamedFields() map[string]string {
	return map[string]string{"reconcileInterval": "reconcileIntervalSeconds", "requestTimeout": "requestTimeoutSeconds",
		"providerFailureTimeout": "providerFailureTimeoutSeconds", "dispatchTimeout": "dispatchTimeoutSeconds", "warmTTL": "warmTTLSeconds"}
}

// Validate checks a defaulted configuration.
func (c *Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	// The node name is also a label value on remote workloads.
	for _, msg := range validation.IsDNS1123Label(c.NodeName) {
		errs = append(errs, field.Invalid(field.NewPath("nodeName"), c.NodeName, msg))
	}
	for k, v := range c.Labels {
		p := field.NewPath("labels").Key(k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p, v, msg))
		}
	}
	if *c.MaxPods <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxPods"), *c.MaxPods, "must be positive"))
	}
	for _, name := range slices.Sorted(maps.Values(renamedFields())) {
		d := map[string]*int64{"reconcileIntervalSeconds": c.ReconcileIntervalSeconds, "requestTimeoutSeconds": c.RequestTimeoutSeconds,
			"providerFailureTimeoutSeconds": c.ProviderFailureTimeoutSeconds, "dispatchTimeoutSeconds": c.DispatchTimeoutSeconds, "warmTTLSeconds": c.WarmTTLSeconds}[name]
		if ptr.Deref(d, 0) <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), ptr.Deref(d, 0), "must be a positive number of seconds"))
		}
	}
	providers := field.NewPath("providers")
	if len(c.Providers) == 0 {
		errs = append(errs, field.Required(providers, "at least one provider"))
	}
	names := sets.New[string]()
	for i := range c.Providers {
		errs = append(errs, c.Providers[i].validate(providers.Index(i), names)...)
	}
	if k := c.KubeletAPI; k != nil {
		errs = append(errs, k.validate(field.NewPath("kubeletAPI"))...)
	}
	errs = append(errs, c.LeaderElection.validate(field.NewPath("leaderElection"))...)
	return errs
}

func (le *LeaderElection) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(le.ResourceNamespace) {
		errs = append(errs, field.Invalid(path.Child("resourceNamespace"), le.ResourceNamespace, msg))
	}
	for _, msg := range validation.IsDNS1123Subdomain(le.ResourceName) {
		errs = append(errs, field.Invalid(path.Child("resourceName"), le.ResourceName, msg))
	}
	lease, renew, retry := ptr.Deref(le.LeaseDurationSeconds, 0), ptr.Deref(le.RenewDeadlineSeconds, 0), ptr.Deref(le.RetryPeriodSeconds, 0)
	switch {
	case retry <= 0:
		errs = append(errs, field.Invalid(path.Child("retryPeriodSeconds"), retry, "must be a positive number of seconds"))
	case float64(renew) <= leaderelection.JitterFactor*float64(retry):
		errs = append(errs, field.Invalid(path.Child("renewDeadlineSeconds"), renew,
			fmt.Sprintf("must be greater than %.1f times retryPeriodSeconds", leaderelection.JitterFactor)))
	case lease <= renew:
		errs = append(errs, field.Invalid(path.Child("leaseDurationSeconds"), lease, "must be greater than renewDeadlineSeconds"))
	case time.Duration(lease)*time.Second > MaxLeaseDuration:
		errs = append(errs, field.Invalid(path.Child("leaseDurationSeconds"), lease,
			fmt.Sprintf("must be at most %d: a standby takes over only after it, and the node lifecycle controller marks the node NotReady 50 s after its last heartbeat", int64(MaxLeaseDuration/time.Second))))
	}
	return errs
}

func (k *KubeletAPI) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ip, err := netip.ParseAddr(k.Address); err != nil || ip.IsUnspecified() {
		errs = append(errs, field.Invalid(path.Child("address"), k.Address, "must be the IP address the apiserver reaches the node at (or pass --node-ip)"))
	}
	if k.Port < 1 || k.Port > 65535 {
		errs = append(errs, field.Invalid(path.Child("port"), k.Port, "must be between 1 and 65535"))
	}
	if (k.CertFile == "") != (k.KeyFile == "") {
		errs = append(errs, field.Required(path.Child("keyFile"), "certFile and keyFile go together"))
	} else if k.CertFile != "" {
		errs = append(errs, readable(path.Child("certFile"), k.CertFile)...)
		errs = append(errs, readable(path.Child("keyFile"), k.KeyFile)...)
	}
	errs = append(errs, readable(path.Child("clientCAFile"), k.ClientCAFile)...)
	return errs
}

func (p *ProviderConfig) validate(path *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(p.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), p.Name, msg))
	}
	if names.Has(p.Name) {
		errs = append(errs, field.Duplicate(path.Child("name"), p.Name))
	}
	names.Insert(p.Name)
	if p.PricePerGPUHour < 0 {
		errs = append(errs, field.Invalid(path.Child("pricePerGPUHour"), p.PricePerGPUHour, "must not be negative"))
	}
	for name, q := range p.Quota {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("quota").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	for i, ns := range p.Namespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(path.Child("namespaces").Index(i), ns, msg))
		}
	}
	switch p.Type {
	case TypeKubernetes:
		if p.HTTP != nil {
			errs = append(errs, field.Forbidden(path.Child("http"), "only for type http"))
		}
		k := path.Child("kubernetes")
		if p.Kubernetes == nil {
			return append(errs, field.Required(k, "the remote cluster for type kubernetes"))
		}
		errs = append(errs, readable(k.Child("kubeconfig"), p.Kubernetes.Kubeconfig)...)
		for _, msg := range validation.IsDNS1123Label(p.Kubernetes.Namespace) {
			errs = append(errs, field.Invalid(k.Child("namespace"), p.Kubernetes.Namespace, msg))
		}
	case TypeHTTP:
		if p.Kubernetes != nil {
			errs = append(errs, field.Forbidden(path.Child("kubernetes"), "only for type kubernetes"))
		}
		h := path.Child("http")
		if p.HTTP == nil {
			return append(errs, field.Required(h, "the provider's URL for type http"))
		}
		if u, err := url.Parse(p.HTTP.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(h.Child("url"), p.HTTP.URL, "want http(s)://host[:port][/path]"))
		}
		if p.HTTP.TokenFile != "" {
			errs = append(errs, readable(h.Child("tokenFile"), p.HTTP.TokenFile)...)
			if u, err := url.Parse(p.HTTP.URL); err == nil && u.Scheme != "https" {
				errs = append(errs, field.Forbidden(h.Child("tokenFile"), "a bearer token is sent only over https; url is "+u.Scheme))
			}
		}
		if p.HTTP.CAFile != "" {
			errs = append(errs, readable(h.Child("caFile"), p.HTTP.CAFile)...)
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), p.Type, []string{TypeKubernetes, TypeHTTP}))
	}
	return errs
}

// readable checks that a file can be opened; its content is not echoed.
func readable(path *field.Path, file string) field.ErrorList {
	if strings.TrimSpace(file) == "" {
		return field.ErrorList{field.Required(path, "a file path")}
	}
	f, err := os.Open(file)
	if err != nil {
		return field.ErrorList{field.Invalid(path, file, err.Error())}
	}
	_ = f.Close()
	return nil
}
