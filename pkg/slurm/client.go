// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// SupportedVersions are the slurmrestd API versions sluice reads, newest
// first. v0.0.36 is left out on purpose: it has no state flags, so a
// drained node looks idle.
func SupportedVersions() []string {
	return []string{
		"v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38", "v0.0.37",
	}
}

// ClientConfig says how to reach slurmrestd.
type ClientConfig struct {
	// Endpoint is https://host:port (JWT auth) or
	// unix:///path/to/slurmrestd.sock (local auth: no token). Plain http
	// is refused: the token would cross the network in the clear.
	Endpoint string
	// APIVersion, e.g. "v0.0.38"; empty means discover it from
	// /openapi/v3 (the newest version both sides speak).
	APIVersion string
	// User is sent as X-SLURM-USER-NAME with the token.
	User string
	// TokenFile holds the JWT sent as X-SLURM-USER-TOKEN. It is read again
	// whenever it changes, so rotating tokens need no restart; its content
	// is never logged.
	TokenFile string
	// CAFile verifies an https endpoint (system roots when empty).
	CAFile string
	// ServerName overrides the name checked in the server certificate.
	ServerName string
	// InsecureSkipVerify disables certificate checks (tests only).
	InsecureSkipVerify bool
	// Timeout bounds every request.
	Timeout time.Duration
}

// Client talks to slurmrestd.
type Client struct {
	cfg     ClientConfig
	http    *http.Client
	baseURL string

	mu      sync.Mutex
	version string
	token   tokenCache
	// noUpdateTime: this slurmrestd refuses update_time as unix seconds
	// (24.11's v0.0.40 and v0.0.41 take only a date in slurmctld's own
	// time zone, which sluice does not know), so every poll asks for
	// every node instead of failing first.
	noUpdateTime bool
}

type tokenCache struct {
	modTime time.Time
	size    int64
	value   string
}

// Error kinds of failed requests, as reported in metrics and events.
const (
	ErrKindUnreachable = "unreachable"
	ErrKindTimeout     = "timeout"
	ErrKindAuth        = "auth"
	ErrKindServer      = "server"
	ErrKindGarbage     = "garbage"
	ErrKindConfig      = "config"
)

// RequestError is a failed request, with a kind for metrics.
type RequestError struct {
	Kind string
	Err  error
}

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// Kind returns the kind of a client error.
func Kind(err error) string {
	var re *RequestError
	if errors.As(err, &re) {
		return re.Kind
	}
	return ErrKindUnreachable
}

// NewClient validates cfg and builds a client. It does not contact
// slurmrestd.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.APIVersion != "" && !slices.Contains(SupportedVersions(), cfg.APIVersion) {
		return nil, fmt.Errorf("slurmrestd API version %q is not supported; supported: %s", cfg.APIVersion, strings.Join(SupportedVersions(), ", "))
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("slurmrestd endpoint %q: want https://host:port or unix:///path", cfg.Endpoint)
	}
	transport := &http.Transport{
		MaxIdleConns:        4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: cfg.Timeout,
	}
	c := &Client{cfg: cfg, version: cfg.APIVersion}
	switch u.Scheme {
	case "http":
		return nil, fmt.Errorf("slurmrestd endpoint %q: the token is never sent over plain http; use https://host:port (slurmrestd behind TLS) or unix:///path (local auth)", cfg.Endpoint)
	case "https":
		if u.Host == "" {
			return nil, fmt.Errorf("slurmrestd endpoint %q has no host", cfg.Endpoint)
		}
		c.baseURL = strings.TrimSuffix("https://"+u.Host+u.Path, "/")
		tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.ServerName, InsecureSkipVerify: cfg.InsecureSkipVerify}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("slurmrestd CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("slurmrestd CA file %s: no certificate found", cfg.CAFile)
			}
			tlsCfg.RootCAs = pool
		}
		transport.TLSClientConfig = tlsCfg
	case "unix":
		path := u.Path
		if path == "" {
			path = u.Opaque
		}
		if path == "" {
			return nil, fmt.Errorf("slurmrestd endpoint %q has no socket path", cfg.Endpoint)
		}
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.baseURL = "http://localhost"
	default:
		return nil, fmt.Errorf("slurmrestd endpoint %q: scheme %q is not https or unix", cfg.Endpoint, u.Scheme)
	}
	if u.Scheme != "unix" && cfg.TokenFile == "" {
		return nil, fmt.Errorf("slurmrestd endpoint %q needs a token file (JWT auth); only unix sockets use local auth", cfg.Endpoint)
	}
	// No redirects: the token header would go with them, to whatever
	// host (plain http included) the answer names.
	noRedirects := func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("slurmrestd redirected to %s: redirects are not followed (the token would go with them)", req.URL.Host)
	}
	c.http = &http.Client{Transport: transport, Timeout: cfg.Timeout, CheckRedirect: noRedirects}
	return c, nil
}

// Version returns the API version in use ("" before discovery).
func (c *Client) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// readToken returns the token, reading the file again when it changed.
func (c *Client) readToken() (string, error) {
	if c.cfg.TokenFile == "" {
		return "", nil
	}
	st, err := os.Stat(c.cfg.TokenFile)
	if err != nil {
		return "", &RequestError{Kind: ErrKindConfig, Err: fmt.Errorf("slurmrestd token file: %w", err)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token.value != "" && st.ModTime().Equal(c.token.modTime) && st.Size() == c.token.size {
		return c.token.value, nil
	}
	data, err := os.ReadFile(c.cfg.TokenFile)
	if err != nil {
		return "", &RequestError{Kind: ErrKindConfig, Err: fmt.Errorf("slurmrestd token file: %w", err)}
	}
	token := strings.TrimSpace(string(data))
	token = strings.TrimPrefix(token, "SLURM_JWT=")
	if token == "" {
		return "", &RequestError{Kind: ErrKindConfig, Err: fmt.Errorf("slurmrestd token file %s is empty", c.cfg.TokenFile)}
	}
	c.token = tokenCache{modTime: st.ModTime(), size: st.Size(), value: token}
	return token, nil
}

// get performs a GET and returns status and body (at most 64 MiB).
func (c *Client) get(ctx context.Context, path string) (int, []byte, error) {
	return c.do(ctx, http.MethodGet, path, nil)
}

// do performs a request, with a JSON body when body is not nil, and
// returns status and answer (at most 64 MiB).
func (c *Client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, reader)
	if err != nil {
		return 0, nil, &RequestError{Kind: ErrKindConfig, Err: err}
	}
	token, err := c.readToken()
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("X-SLURM-USER-TOKEN", token)
		if c.cfg.User != "" {
			req.Header.Set("X-SLURM-USER-NAME", c.cfg.User)
		}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		kind := ErrKindUnreachable
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			kind = ErrKindTimeout
		}
		return 0, nil, &RequestError{Kind: kind, Err: fmt.Errorf("slurmrestd %s %s: %w", method, path, err)}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, nil, &RequestError{Kind: ErrKindUnreachable, Err: fmt.Errorf("slurmrestd %s %s: reading body: %w", method, path, err)}
	}
	return resp.StatusCode, answer, nil
}

// versionInPath finds /slurm/v0.0.NN/ in an OpenAPI path.
var versionInPath = regexp.MustCompile(`^/slurm/(v0\.0\.\d+)/nodes/?$`)

// Discover asks /openapi/v3 which versions slurmrestd serves and picks the
// newest one sluice supports.
func (c *Client) Discover(ctx context.Context) (string, error) {
	status, body, err := c.get(ctx, "/openapi/v3")
	if err != nil {
		return "", err
	}
	if err := statusError(http.MethodGet, "/openapi/v3", status, body); err != nil {
		return "", err
	}
	var doc struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("slurmrestd /openapi/v3 is not an OpenAPI document: %w", err)}
	}
	served := map[string]bool{}
	for p := range doc.Paths {
		if m := versionInPath.FindStringSubmatch(p); m != nil {
			served[m[1]] = true
		}
	}
	for _, v := range SupportedVersions() {
		if served[v] {
			c.mu.Lock()
			c.version = v
			c.mu.Unlock()
			return v, nil
		}
	}
	var list []string
	for v := range served {
		list = append(list, v)
	}
	slices.Sort(list)
	return "", &RequestError{Kind: ErrKindConfig, Err: fmt.Errorf("slurmrestd serves node API versions %v, none of which sluice supports (%s)", list, strings.Join(SupportedVersions(), ", "))}
}

// errRetryFull marks a changed-since request that slurmrestd could not
// answer; the caller asks again for everything. (slurmrestd 22.05 answers
// some update_time requests with HTTP 500 "Unspecified error".)
var errRetryFull = errors.New("changed-since request failed")

// refusesUnixTime reports an answer refusing update_time as a number
// (an error at #/update_time/, 9202 in 24.11's v0.0.40 and v0.0.41).
func refusesUnixTime(body []byte) bool {
	var env struct {
		Errors []responseError `json:"errors"`
	}
	if json.Unmarshal(body, &env) != nil {
		return false
	}
	for _, e := range env.Errors {
		if strings.HasPrefix(e.Source, "#/update_time") {
			return true
		}
	}
	return false
}

// NodesResult is the answer of a Nodes call.
type NodesResult struct {
	// NotModified: nothing changed since the update time asked for.
	NotModified bool
	Nodes       []Node
	// LastUpdate is slurmctld's time of the data (v0.0.40+), or 0.
	LastUpdate int64
	// Warnings are problems with single nodes or slurmrestd warnings.
	Warnings []string
}

// Nodes lists all nodes. With updateTime > 0 it asks only for a change
// since then: a NotModified result means the previous list still holds.
// When something changed, slurmrestd returns every node.
func (c *Client) Nodes(ctx context.Context, updateTime int64) (NodesResult, error) {
	version := c.Version()
	if version == "" {
		v, err := c.Discover(ctx)
		if err != nil {
			return NodesResult{}, err
		}
		version = v
	}
	path := "/slurm/" + version + "/nodes"
	if version >= "v0.0.40" {
		path += "/"
	}
	c.mu.Lock()
	if c.noUpdateTime {
		updateTime = 0
	}
	c.mu.Unlock()
	if updateTime > 0 {
		path += "?update_time=" + strconv.FormatInt(updateTime, 10)
	}
	status, body, err := c.get(ctx, path)
	if err != nil {
		return NodesResult{}, err
	}
	if status == http.StatusNotModified && updateTime > 0 {
		return NodesResult{NotModified: true}, nil
	}
	if status >= 500 && updateTime > 0 {
		// 22.05's "Unspecified error" and every version's "Unable to
		// query partitions" (a node changed, no partition did) mean
		// "ask again for everything"; a refused timestamp means so for
		// good.
		if refusesUnixTime(body) {
			c.mu.Lock()
			c.noUpdateTime = true
			c.mu.Unlock()
			klog.FromContext(ctx).Info("slurmrestd refuses update_time in unix seconds; every poll reads every node", "apiVersion", version)
		}
		return NodesResult{}, errRetryFull
	}
	if err := statusError(http.MethodGet, path, status, body); err != nil {
		return NodesResult{}, err
	}
	nodes, lastUpdate, warnings, err := decodeNodes(body)
	if err != nil {
		return NodesResult{}, &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("slurmrestd GET %s: %w", path, err)}
	}
	return NodesResult{Nodes: nodes, LastUpdate: lastUpdate, Warnings: warnings}, nil
}

// ControllerTime is slurmctld's clock now, in unix seconds, as its
// diagnostics report it (req_time): the clock node changes are recorded
// by, for APIs whose node answers do not carry it (v0.0.38, v0.0.39).
func (c *Client) ControllerTime(ctx context.Context) (int64, error) {
	version := c.Version()
	if version == "" {
		v, err := c.Discover(ctx)
		if err != nil {
			return 0, err
		}
		version = v
	}
	path := "/slurm/" + version + "/diag"
	status, body, err := c.get(ctx, path)
	if err != nil {
		return 0, err
	}
	if err := statusError(http.MethodGet, path, status, body); err != nil {
		return 0, err
	}
	var diag struct {
		Statistics struct {
			ReqTime flexNumber `json:"req_time"`
		} `json:"statistics"`
	}
	if err := json.Unmarshal(body, &diag); err != nil || diag.Statistics.ReqTime <= 0 {
		return 0, &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("slurmrestd GET %s: no statistics.req_time (%v)", path, err)}
	}
	return int64(diag.Statistics.ReqTime), nil
}

// statusError turns a non-2xx answer into an error that says what
// slurmrestd said (its "errors" list, or the start of the body).
func statusError(method, path string, status int, body []byte) error {
	if status >= 200 && status < 300 {
		return nil
	}
	detail := strings.TrimSpace(string(body))
	var env struct {
		Errors []responseError `json:"errors"`
	}
	if json.Unmarshal(body, &env) == nil && len(env.Errors) > 0 {
		detail = joinErrors(env.Errors)
	} else if len(detail) > 200 {
		detail = detail[:200] + "..."
	}
	kind := ErrKindServer
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNetworkAuthenticationRequired:
		// 24.11 answers a wrong token with 511.
		kind = ErrKindAuth
		detail += " (check the token file and user)"
	case status < 500:
		kind = ErrKindConfig
	}
	switch {
	case bytes.Contains(bytes.ToLower(body), []byte("authentication")):
		kind = ErrKindAuth
	case status == http.StatusInternalServerError && strings.Contains(detail, "Unspecified error"):
		// slurmrestd 22.05 answers an invalid or expired token this way.
		detail += " (slurmrestd 22.05 reports an invalid or expired token like this; check the token file)"
	}
	return &RequestError{Kind: kind, Err: fmt.Errorf("slurmrestd %s %s: HTTP %d: %s", method, path, status, detail)}
}
