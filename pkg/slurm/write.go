// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// NodeWriter drains and resumes Slurm nodes: slurmrestd (a Client, API
// v0.0.39 and later) or scontrol (Commands, for Slurm 22.05, whose API
// cannot update nodes).
type NodeWriter interface {
	// DrainNode drains a node with a reason (a drained node is drained
	// again, with this reason).
	DrainNode(ctx context.Context, name, reason string) error
	// ResumeNode resumes a drained node.
	ResumeNode(ctx context.Context, name string) error
}

var _ NodeWriter = &Client{}

// firstWritingVersion is the oldest slurmrestd API that updates nodes
// (POST /slurm/v0.0.39/node/{name}, Slurm 23.02); 22.05's v0.0.37 and
// v0.0.38 answer 405.
const firstWritingVersion = "v0.0.39"

// DrainNode drains a node through slurmrestd: POST .../node/{name} with
// {"state": ["DRAIN"], "reason": reason}.
func (c *Client) DrainNode(ctx context.Context, name, reason string) error {
	return c.updateNode(ctx, name, nodeUpdate{State: []string{"DRAIN"}, Reason: reason})
}

// ResumeNode resumes a node through slurmrestd: POST .../node/{name} with
// {"state": ["RESUME"]}. Slurm refuses to resume a node that is not drained
// or down (HTTP 500, error 2028).
func (c *Client) ResumeNode(ctx context.Context, name string) error {
	return c.updateNode(ctx, name, nodeUpdate{State: []string{"RESUME"}})
}

// nodeUpdate is the body of a node update (update_node_msg, v0.0.39+).
type nodeUpdate struct {
	State  []string `json:"state"`
	Reason string   `json:"reason,omitempty"`
}

func (c *Client) updateNode(ctx context.Context, name string, u nodeUpdate) error {
	version, err := c.writingVersion(ctx, "update nodes")
	if err != nil {
		return err
	}
	body, err := json.Marshal(u)
	if err != nil {
		return &RequestError{Kind: ErrKindConfig, Err: err}
	}
	// A 200 may still carry errors: call reads them.
	return c.call(ctx, http.MethodPost, "/slurm/"+version+"/node/"+url.PathEscape(name), body, nil)
}

// versionLess compares API versions v0.0.NN by number.
func versionLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// Commands writes through Slurm's client commands in Dir (scontrol),
// which must reach slurmctld (slurm.conf, or SLURM_CONF, and munge in
// their environment).
type Commands struct {
	// Dir holds the commands.
	Dir string
	// Timeout bounds one command (5 s when zero).
	Timeout time.Duration
}

var _ NodeWriter = Commands{}

// run runs one command with its arguments as they are (never through a
// shell) and returns its standard output.
func (c Commands) run(ctx context.Context, name string, args ...string) (string, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.Dir, name), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		kind := ErrKindServer
		if ctx.Err() != nil {
			kind = ErrKindTimeout
		}
		return string(out), &RequestError{Kind: kind, Err: fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))}
	}
	return string(out), nil
}

// DrainNode runs scontrol update nodename=<name> state=DRAIN reason=<reason>.
func (c Commands) DrainNode(ctx context.Context, name, reason string) error {
	_, err := c.run(ctx, "scontrol", "update", "nodename="+name, "state=DRAIN", "reason="+reason)
	return err
}

// ResumeNode runs scontrol update nodename=<name> state=RESUME.
func (c Commands) ResumeNode(ctx context.Context, name string) error {
	_, err := c.run(ctx, "scontrol", "update", "nodename="+name, "state=RESUME")
	return err
}

// writingVersion is the API version in use, when it can do what is asked.
func (c *Client) writingVersion(ctx context.Context, what string) (string, error) {
	version := c.Version()
	if version == "" {
		v, err := c.Discover(ctx)
		if err != nil {
			return "", err
		}
		version = v
	}
	if versionLess(version, firstWritingVersion) {
		return "", &RequestError{Kind: ErrKindConfig, Err: fmt.Errorf("slurmrestd API %s cannot %s (%s and later can): write through Slurm's commands (slurm.commands)", version, what, firstWritingVersion)}
	}
	return version, nil
}

// call performs a request and decodes a 2xx answer into out (when not
// nil); an answer with errors[] is an error.
func (c *Client) call(ctx context.Context, method, path string, body []byte, out any) error {
	status, answer, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if err := statusError(method, path, status, answer); err != nil {
		return err
	}
	var env struct {
		Errors []responseError `json:"errors"`
	}
	if json.Unmarshal(answer, &env) == nil && len(env.Errors) > 0 {
		return &RequestError{Kind: ErrKindServer, Err: fmt.Errorf("slurmrestd %s %s: %s", method, path, joinErrors(env.Errors))}
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("slurmrestd %s %s: %w", method, path, err)}
		}
	}
	return nil
}
