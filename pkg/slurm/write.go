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
	"strings"
	"time"
)

// NodeWriter drains and resumes Slurm nodes: slurmrestd (a Client, API
// v0.0.39 and later) or scontrol (Scontrol, for Slurm 22.05, whose API
// cannot update nodes).
type NodeWriter interface {
	// DrainNode drains a node with a reason (a drained node is drained
	// again, with this reason).
	DrainNode(ctx context.Context, name, reason string) error
	// ResumeNode resumes a drained node.
	ResumeNode(ctx context.Context, name string) error
}

var (
	_ NodeWriter = &Client{}
	_ NodeWriter = Scontrol{}
)

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
	version := c.Version()
	if version == "" {
		v, err := c.Discover(ctx)
		if err != nil {
			return err
		}
		version = v
	}
	if versionLess(version, firstWritingVersion) {
		return &RequestError{Kind: ErrKindConfig, Err: fmt.Errorf("slurmrestd API %s cannot update nodes (%s and later can): write through scontrol (slurm.drain.scontrol)", version, firstWritingVersion)}
	}
	body, err := json.Marshal(u)
	if err != nil {
		return &RequestError{Kind: ErrKindConfig, Err: err}
	}
	path := "/slurm/" + version + "/node/" + url.PathEscape(name)
	status, answer, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if err := statusError(http.MethodPost, path, status, answer); err != nil {
		return err
	}
	// A 200 may still carry errors.
	var env struct {
		Errors []responseError `json:"errors"`
	}
	if json.Unmarshal(answer, &env) == nil && len(env.Errors) > 0 {
		return &RequestError{Kind: ErrKindServer, Err: fmt.Errorf("slurmrestd POST %s: %s", path, joinErrors(env.Errors))}
	}
	return nil
}

// versionLess compares API versions v0.0.NN by number.
func versionLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// Scontrol writes through the scontrol command, which must reach slurmctld
// (slurm.conf, or SLURM_CONF, and munge or SLURM_JWT in its environment).
type Scontrol struct {
	// Path of scontrol.
	Path string
	// Timeout bounds one command (5 s when zero).
	Timeout time.Duration
}

// DrainNode runs scontrol update nodename=<name> state=DRAIN reason=<reason>.
func (s Scontrol) DrainNode(ctx context.Context, name, reason string) error {
	return s.update(ctx, "nodename="+name, "state=DRAIN", "reason="+reason)
}

// ResumeNode runs scontrol update nodename=<name> state=RESUME.
func (s Scontrol) ResumeNode(ctx context.Context, name string) error {
	return s.update(ctx, "nodename="+name, "state=RESUME")
}

func (s Scontrol) update(ctx context.Context, args ...string) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Arguments go to scontrol as they are, never through a shell.
	out, err := exec.CommandContext(ctx, s.Path, append([]string{"update"}, args...)...).CombinedOutput()
	if err != nil {
		kind := ErrKindServer
		if ctx.Err() != nil {
			kind = ErrKindTimeout
		}
		return &RequestError{Kind: kind, Err: fmt.Errorf("%s update %s: %v: %s", s.Path, strings.Join(args, " "), err, strings.TrimSpace(string(out)))}
	}
	return nil
}
