// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// JobWriter submits, reads and cancels the placeholder jobs that hold pods'
// GPUs in Slurm: slurmrestd (a Client, API v0.0.39 and later, which can pin
// a job to a node) or sbatch, scontrol, squeue and scancel (Commands, for
// Slurm 22.05).
type JobWriter interface {
	// SubmitPlaceholder submits a job that holds GPUs on one node until
	// it is cancelled, and returns its id.
	SubmitPlaceholder(ctx context.Context, p Placeholder) (string, error)
	// Job reads one job; nil (and no error) when Slurm does not know it
	// (any more).
	Job(ctx context.Context, id string) (*Job, error)
	// Jobs lists the jobs whose name starts with prefix.
	Jobs(ctx context.Context, prefix string) ([]Job, error)
	// CancelJob cancels a job; a job Slurm does not know is not an error.
	CancelJob(ctx context.Context, id string) error
}

var (
	_ JobWriter = &Client{}
	_ JobWriter = Commands{}
)

// Placeholder is a job that holds GPUs on a node.
type Placeholder struct {
	// Name and Comment of the job (they say whose GPUs it holds).
	Name, Comment string
	// Node the job must run on, Partition it goes to (empty: Slurm's
	// default).
	Node, Partition string
	// GRES that counts GPUs, and how many the job holds.
	GRES string
	GPUs int64
}

// placeholderScript is what a placeholder job runs: nothing, until it is
// cancelled.
const placeholderScript = "#!/bin/sh\nexec sleep infinity\n"

// Job is what sluice reads of a Slurm job.
type Job struct {
	ID, Name string
	// State is the base state (RUNNING, PENDING, CANCELLED...).
	State string
	// Reason Slurm gives for the state (Resources, Priority, None...).
	Reason string
	// Nodes the job runs on (a hostlist).
	Nodes string
	// GRES are the job's GRES with the indices Slurm gave them
	// ("gpu:4(IDX:4-7)"); empty before it runs.
	GRES []string
	// User submitted it; Comment is its comment (empty when not read).
	User, Comment string
}

// Running reports whether the job runs.
func (j *Job) Running() bool { return j.State == "RUNNING" }

// Ended reports whether the job has ended (it holds nothing any more).
func (j *Job) Ended() bool {
	switch j.State {
	case "PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT":
		return false
	}
	return true
}

// Indexes are the indices of the job's gres as Slurm writes them ("4-7",
// "0,2"), read from its GRES ("gpu:4(IDX:4-7)", "gpu:h100:2(IDX:0-1)").
func (j *Job) Indexes(gres string) string {
	for _, d := range j.GRES {
		entries, _ := ParseGRES(d)
		for _, g := range entries {
			if g.Name == gres && g.Indexes != "" {
				return g.Indexes
			}
		}
	}
	return ""
}

// SubmitPlaceholder submits through slurmrestd: POST .../job/submit.
// current_working_directory and a non-empty environment are required by
// slurmrestd (else error 2063, 2019).
func (c *Client) SubmitPlaceholder(ctx context.Context, p Placeholder) (string, error) {
	version, err := c.writingVersion(ctx, "pin a job to a node")
	if err != nil {
		return "", err
	}
	type jobDesc struct {
		Name          string   `json:"name"`
		Comment       string   `json:"comment,omitempty"`
		Partition     string   `json:"partition,omitempty"`
		Script        string   `json:"script"`
		RequiredNodes []string `json:"required_nodes"`
		TRESPerNode   string   `json:"tres_per_node"`
		CWD           string   `json:"current_working_directory"`
		Environment   []string `json:"environment"`
		StdOut        string   `json:"standard_output"`
	}
	body, err := json.Marshal(struct {
		Job jobDesc `json:"job"`
	}{jobDesc{
		Name: p.Name, Comment: p.Comment, Partition: p.Partition, Script: placeholderScript,
		RequiredNodes: []string{p.Node}, TRESPerNode: fmt.Sprintf("gres/%s:%d", p.GRES, p.GPUs),
		CWD: "/tmp", Environment: []string{"PATH=/usr/bin:/bin"}, StdOut: "/dev/null",
	}})
	if err != nil {
		return "", &RequestError{Kind: ErrKindConfig, Err: err}
	}
	var out struct {
		JobID flexNumber `json:"job_id"`
	}
	if err := c.call(ctx, http.MethodPost, "/slurm/"+version+"/job/submit", body, &out); err != nil {
		return "", err
	}
	if out.JobID <= 0 {
		return "", &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("slurmrestd job submit: no job_id in the answer")}
	}
	return strconv.FormatInt(int64(out.JobID), 10), nil
}

// rawJob is the part of a job in GET .../job/{id} and .../jobs that sluice
// reads.
type rawJob struct {
	JobID       flexNumber      `json:"job_id"`
	Name        string          `json:"name"`
	JobState    json.RawMessage `json:"job_state"`
	StateReason string          `json:"state_reason"`
	Nodes       string          `json:"nodes"`
	GRESDetail  []string        `json:"gres_detail"`
	UserName    string          `json:"user_name"`
	Comment     json.RawMessage `json:"comment"`
}

func (r *rawJob) job() (Job, error) {
	words, err := stateWords(r.JobState)
	if err != nil {
		return Job{}, fmt.Errorf("job %d: job_state: %w", r.JobID, err)
	}
	j := Job{ID: strconv.FormatInt(int64(r.JobID), 10), Name: r.Name, Reason: r.StateReason, Nodes: r.Nodes, GRES: r.GRESDetail, User: r.UserName}
	// A string in every version read; anything else is no comment.
	_ = json.Unmarshal(r.Comment, &j.Comment)
	if len(words) > 0 {
		// The base state comes first; flags (COMPLETING...) follow.
		j.State = strings.ToUpper(words[0])
	}
	return j, nil
}

type jobsResponse struct {
	Jobs []rawJob `json:"jobs"`
}

// Job reads one job: GET .../job/{id}. slurmrestd answers an unknown job
// with an error (error 2017, "Invalid job id specified").
func (c *Client) Job(ctx context.Context, id string) (*Job, error) {
	version, err := c.writingVersion(ctx, "read jobs")
	if err != nil {
		return nil, err
	}
	var resp jobsResponse
	path := "/slurm/" + version + "/job/" + url.PathEscape(id)
	if err := c.call(ctx, http.MethodGet, path, nil, &resp); err != nil {
		if unknownJob(err) {
			return nil, nil
		}
		return nil, err
	}
	for i := range resp.Jobs {
		j, err := resp.Jobs[i].job()
		if err != nil {
			return nil, &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("slurmrestd GET %s: %w", path, err)}
		}
		if j.ID == id {
			return &j, nil
		}
	}
	return nil, nil
}

// unknownJob reports whether an error is Slurm's answer about a job it does
// not know (ESLURM_INVALID_JOB_ID: slurmrestd's errors[] and the commands
// print the same words).
func unknownJob(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Invalid job id")
}

// Jobs lists jobs: GET .../jobs, filtered by name here (slurmrestd has no
// name filter).
func (c *Client) Jobs(ctx context.Context, prefix string) ([]Job, error) {
	version, err := c.writingVersion(ctx, "read jobs")
	if err != nil {
		return nil, err
	}
	var resp jobsResponse
	path := "/slurm/" + version + "/jobs"
	if err := c.call(ctx, http.MethodGet, path, nil, &resp); err != nil {
		return nil, err
	}
	var out []Job
	for i := range resp.Jobs {
		if !strings.HasPrefix(resp.Jobs[i].Name, prefix) {
			continue
		}
		j, err := resp.Jobs[i].job()
		if err != nil {
			return nil, &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("slurmrestd GET %s: %w", path, err)}
		}
		out = append(out, j)
	}
	return out, nil
}

// CancelJob cancels a job: DELETE .../job/{id}.
func (c *Client) CancelJob(ctx context.Context, id string) error {
	version, err := c.writingVersion(ctx, "cancel jobs")
	if err != nil {
		return err
	}
	err = c.call(ctx, http.MethodDelete, "/slurm/"+version+"/job/"+url.PathEscape(id), nil, nil)
	if unknownJob(err) {
		return nil
	}
	return err
}

// SubmitPlaceholder runs sbatch --parsable, pinned to the node (-w).
func (c Commands) SubmitPlaceholder(ctx context.Context, p Placeholder) (string, error) {
	args := []string{"--parsable", "--job-name=" + p.Name, "--comment=" + p.Comment, "--nodelist=" + p.Node, "--nodes=1",
		fmt.Sprintf("--gres=%s:%d", p.GRES, p.GPUs), "--chdir=/tmp", "--output=/dev/null", "--export=NONE"}
	if p.Partition != "" {
		args = append(args, "--partition="+p.Partition)
	}
	out, err := c.run(ctx, "sbatch", append(args, "--wrap=exec sleep infinity")...)
	if err != nil {
		return "", err
	}
	// --parsable prints "id" or "id;cluster".
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, perr := strconv.ParseUint(id, 10, 64); perr != nil {
		return "", &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("sbatch printed %q, not a job id", strings.TrimSpace(out))}
	}
	return id, nil
}

// Job runs scontrol -d -o show job <id> (-d adds the GRES indices).
func (c Commands) Job(ctx context.Context, id string) (*Job, error) {
	out, err := c.run(ctx, "scontrol", "-d", "-o", "show", "job", id)
	if unknownJob(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(out, "\n") {
		j := parseScontrolJob(line)
		if j.ID == id {
			return &j, nil
		}
	}
	return nil, nil
}

// parseScontrolJob reads one line of scontrol -d -o show job: key=value
// fields separated by spaces (values such as Comment may hold spaces; only
// the keys read here matter, and none of them do).
func parseScontrolJob(line string) Job {
	var j Job
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		switch k {
		case "JobId":
			j.ID = v
		case "JobName":
			j.Name = v
		case "JobState":
			j.State = v
		case "Reason":
			j.Reason = v
		case "NodeList":
			if v != "(null)" {
				j.Nodes = v
			}
		case "GRES":
			// -d: "Nodes=gpu01 CPU_IDs=0 Mem=0 GRES=gpu:4(IDX:0-3)".
			if v != "" && v != "(null)" {
				j.GRES = append(j.GRES, v)
			}
		}
	}
	return j
}

// Jobs runs squeue for every job of the commands' own user (--me, Slurm
// 20.11 and later) whose name starts with prefix: another user's job is
// never listed, whatever its name and comment.
func (c Commands) Jobs(ctx context.Context, prefix string) ([]Job, error) {
	// The comment comes last: it may hold the separator.
	out, err := c.run(ctx, "squeue", "--me", "--noheader", "--all", "--states=all", "--format=%i|%j|%T|%N|%r|%u|%k")
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimSpace(line), "|", 7)
		if len(f) != 7 || !strings.HasPrefix(f[1], prefix) || !jobID(f[0]) {
			// Not a job line (a name or comment with a newline in it
			// cannot pass for one without a job id of digits).
			continue
		}
		comment := f[6]
		if comment == "(null)" {
			comment = ""
		}
		jobs = append(jobs, Job{ID: f[0], Name: f[1], State: f[2], Nodes: f[3], Reason: f[4], User: f[5], Comment: comment})
	}
	return jobs, nil
}

// jobID reports whether s is a job id: digits, or an array job's
// <id>_<index>.
func jobID(s string) bool {
	id, index, array := strings.Cut(s, "_")
	digits := func(s string) bool {
		return s != "" && strings.Trim(s, "0123456789") == ""
	}
	return digits(id) && (!array || digits(index))
}

// CancelJob runs scancel (which does not fail for a job that has ended).
func (c Commands) CancelJob(ctx context.Context, id string) error {
	_, err := c.run(ctx, "scancel", id)
	if unknownJob(err) {
		return nil
	}
	return err
}
