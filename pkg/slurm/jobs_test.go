// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlaceholderOverREST: a placeholder is submitted as 24.11 takes it
// (the job pinned with required_nodes, GPUs as tres_per_node, a working
// directory and an environment, without which slurmrestd refuses it), read
// back from a real 24.11 answer (job_state a list, indices in gres_detail),
// and cancelled; a job Slurm does not know reads as nil.
func TestPlaceholderOverREST(t *testing.T) {
	job, err := os.ReadFile("testdata/jobs/job-rest-placeholder-v0.0.42.json")
	if err != nil {
		t.Fatal(err)
	}
	var submitted map[string]any
	var requests []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests = append(requests, r.Method+" "+r.URL.Path)
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/slurm/v0.0.42/job/submit":
			body, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(body, &submitted); err != nil {
				t.Errorf("submit body: %v", err)
			}
			_, _ = w.Write([]byte(`{"job_id":6,"step_id":"batch","errors":[],"warnings":[]}`))
		case r.URL.Path == "/slurm/v0.0.42/job/6":
			_, _ = w.Write(job)
		case r.URL.Path == "/slurm/v0.0.42/job/7":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"errors":[{"description":"Unable to query JobId=7","error_number":2017,"error":"Invalid job id specified","source":"_handle_job_get"}]}`))
		}
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.42", TokenFile: writeToken(t, t.TempDir(), "jwt")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := c.SubmitPlaceholder(ctx, Placeholder{Name: "sluice-uid", Comment: "sluice: GPUs of pod ml/a", Node: "gpu06", GRES: "gpu", GPUs: 4})
	if err != nil || id != "6" {
		t.Fatalf("submit: %q, %v", id, err)
	}
	wantJob := map[string]any{"name": "sluice-uid", "comment": "sluice: GPUs of pod ml/a", "script": "#!/bin/sh\nexec sleep infinity\n",
		"required_nodes": []any{"gpu06"}, "tres_per_node": "gres/gpu:4", "current_working_directory": "/tmp",
		"environment": []any{"PATH=/usr/bin:/bin"}, "standard_output": "/dev/null"}
	if diff := cmp.Diff(map[string]any{"job": wantJob}, submitted); diff != "" {
		t.Errorf("submitted (-want,+got):\n%s", diff)
	}
	j, err := c.Job(ctx, "6")
	if err != nil || j == nil {
		t.Fatalf("job 6: %v, %v", j, err)
	}
	if !j.Running() || j.Nodes != "gpu06" || j.Indexes("gpu") != "4-7" || j.Ended() {
		t.Errorf("job 6 read as %+v (indexes %q), want RUNNING on gpu06 with GPUs 4-7", j, j.Indexes("gpu"))
	}
	if j, err := c.Job(ctx, "7"); j != nil || err != nil {
		t.Errorf("unknown job: %v, %v, want nil and no error", j, err)
	}
	if err := c.CancelJob(ctx, "6"); err != nil {
		t.Error(err)
	}
	if got := requests[len(requests)-1]; got != "DELETE /slurm/v0.0.42/job/6" {
		t.Errorf("cancel sent %q", got)
	}
}

// TestPlaceholderCommands runs stand-in sbatch, scontrol and squeue that
// print what Slurm 22.05 prints, and checks what is sent and read: sbatch
// gets each argument whole (a comment with spaces is one argument).
func TestPlaceholderCommands(t *testing.T) {
	dir := t.TempDir()
	show, err := os.ReadFile("testdata/jobs/scontrol-show-job-22.05.txt")
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "args")
	write := func(name, script string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("sbatch", "for a in \"$@\"; do echo \"[$a]\" >> "+log+"; done\necho 9\n")
	if err := os.WriteFile(filepath.Join(dir, "show"), show, 0o644); err != nil {
		t.Fatal(err)
	}
	write("scontrol", "[ \"$5\" = 9 ] && exec cat "+filepath.Join(dir, "show")+"\necho 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1\n")
	write("squeue", "echo \"$*\" > "+filepath.Join(dir, "squeue-args")+"\necho '8|sluice-gone|CANCELLED|gpu03|None|root|(null)'\necho '9|sluice-0f3c6a4e|RUNNING|gpu02|None|root|sluice-cluster=c1: GPUs of pod ml/a|b'\necho '10|wrap|PENDING||Resources|alice|'\necho 'GPUs of pod ml/b|sluice-forged|RUNNING|gpu01|None|root|x'\n")
	c := Commands{Dir: dir}
	ctx := context.Background()
	id, err := c.SubmitPlaceholder(ctx, Placeholder{Name: "sluice-uid", Comment: "sluice: GPUs of pod ml/a; rm -rf /", Node: "gpu02", GRES: "gpu", GPUs: 4, Partition: "hold"})
	if err != nil || id != "9" {
		t.Fatalf("submit: %q, %v", id, err)
	}
	args, _ := os.ReadFile(log)
	want := "[--parsable]\n[--job-name=sluice-uid]\n[--comment=sluice: GPUs of pod ml/a; rm -rf /]\n[--nodelist=gpu02]\n[--nodes=1]\n[--gres=gpu:4]\n[--chdir=/tmp]\n[--output=/dev/null]\n[--export=NONE]\n[--partition=hold]\n[--wrap=exec sleep infinity]\n"
	if string(args) != want {
		t.Errorf("sbatch got\n%s\nwant\n%s", args, want)
	}
	j, err := c.Job(ctx, "9")
	if err != nil || j == nil {
		t.Fatalf("job 9: %v, %v", j, err)
	}
	if !j.Running() || j.Nodes != "gpu02" || j.Indexes("gpu") != "0-3" || j.Name != "sluice-0f3c6a4e-1b2d-4c5e-9f70-1a2b3c4d5e6f" {
		t.Errorf("job 9 read as %+v (indexes %q), want RUNNING on gpu02 with GPUs 0-3", j, j.Indexes("gpu"))
	}
	if j, err := c.Job(ctx, "11"); j != nil || err != nil {
		t.Errorf("unknown job: %v, %v, want nil and no error", j, err)
	}
	jobs, err := c.Jobs(ctx, "sluice-")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != "8" || !jobs[0].Ended() || jobs[1].ID != "9" || jobs[1].Ended() {
		t.Errorf("jobs: %+v, want 8 (ended) and 9 (running), not the wrap job", jobs)
	} else if jobs[0].Comment != "" || jobs[1].User != "root" || jobs[1].Comment != "sluice-cluster=c1: GPUs of pod ml/a|b" {
		t.Errorf("jobs: %+v, want user root, no comment for 8 and the whole comment (separator included) for 9", jobs)
	}
	// Only the commands' own user's jobs are listed: another user's job,
	// whatever its name and comment, is never this sluice's to cancel.
	if squeue, _ := os.ReadFile(filepath.Join(dir, "squeue-args")); !strings.Contains(" "+string(squeue)+" ", " --me ") {
		t.Errorf("squeue %s: want --me (the commands' own user's jobs only)", strings.TrimSpace(string(squeue)))
	}
}
