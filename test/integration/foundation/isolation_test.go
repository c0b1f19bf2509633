// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-sched/sluice/test/harness"
)

// leakEnv makes TestLeftoverFailsTheNextTest run its leaking child.
const leakEnv = "SLUICE_TEST_LEAK_CHILD"

// TestLeftoverFailsTheNextTest breaks isolation on purpose, in a child run
// of this test binary (its own control plane, so nothing reaches this
// package's other tests): a first subtest leaves a Deployment behind, and
// the next one must fail at once, naming it, instead of timing out later
// over pods it did not create.
func TestLeftoverFailsTheNextTest(t *testing.T) {
	if os.Getenv(leakEnv) == "1" {
		leakThenStart(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLeftoverFailsTheNextTest$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), leakEnv+"=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err == nil {
		t.Fatalf("the child run passed; its second subtest should have failed on the leftover:\n%s", text)
	}
	for _, want := range []string{
		"--- PASS: TestLeftoverFailsTheNextTest/leaks_a_Deployment",
		"--- FAIL: TestLeftoverFailsTheNextTest/starts_after_the_leak",
		"left behind by an earlier test",
		"Deployment default/leaky",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the child run's output lacks %q:\n%s", want, text)
		}
	}
}

// leakThenStart is the child run.
func leakThenStart(t *testing.T) {
	cp := harness.Shared(t)
	t.Run("leaks a Deployment", func(t *testing.T) {
		d := harness.InferenceDeployment("default", "leaky", 1, 1)
		if _, err := cp.Client.AppsV1().Deployments("default").Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("starts after the leak", func(t *testing.T) {
		harness.NewNamespace(t, cp.Client)
	})
}
