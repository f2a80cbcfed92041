package controllers

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// memorySession creates an AgentSession with spec.memory set to memory
// and waits until it has finished.
func (e *e2e) memorySession(
	t *testing.T, name string, model *testenv.ModelServer, memory *aeriev1alpha1.MemorySpec,
) {
	t.Helper()
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Fix the failing tests.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: model.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
			Memory: memory,
		},
	}
	if err := e.cp.Client.Create(t.Context(), s); err != nil {
		t.Fatalf("create session %s: %v", name, err)
	}
	got := e.waitFinished(t, name)
	if got.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(got.Status, "", "  ")
		t.Fatalf("session %s: phase %s, want Succeeded; status:\n%s", name, got.Status.Phase, b)
	}
}

// TestEndToEndMemory runs sessions with the built-in memory through the
// controller and runner pods: what the memory tool saves in one session's
// pod is kept in the session store and is in the system prompt of the next
// session on the same project, once its pod is gone; another project does
// not see it, and spec.memory.disabled offers neither the tool nor the
// memory.
func TestEndToEndMemory(t *testing.T) {
	e := startE2E(t)
	const fact = "the tests run with make check, never go test ./..."
	project := &aeriev1alpha1.MemorySpec{Scope: "team/app"}

	writer := testenv.StartModelServer(t,
		callTurn("m1", "memory", map[string]any{"target": "project", "action": "add", "content": fact}),
		testenv.Turn{Text: "Saved."})
	e.memorySession(t, "memory-write", writer, project)
	reqs := writer.Requests()
	if len(reqs) != 2 || !bytes.Contains(reqs[1].Body, []byte("entry added")) {
		t.Fatalf("the memory tool did not save the entry: %d requests", len(reqs))
	}
	if bytes.Contains(reqs[0].Body, []byte(fact)) {
		t.Errorf("the entry is in the system prompt of the session that saved it")
	}

	for _, c := range []struct {
		name   string
		memory *aeriev1alpha1.MemorySpec
		// sees says whether the first request has the entry and the tool.
		sees bool
	}{
		{"memory-read", project, true},
		{"memory-other-project", &aeriev1alpha1.MemorySpec{Scope: "team/other"}, false},
		{"memory-disabled", &aeriev1alpha1.MemorySpec{Disabled: true}, false},
	} {
		model := testenv.StartModelServer(t, testenv.Turn{Text: "Done."})
		e.memorySession(t, c.name, model, c.memory)
		reqs := model.Requests()
		if len(reqs) == 0 {
			t.Fatalf("%s: no model request", c.name)
		}
		body := reqs[0].Body
		if got := bytes.Contains(body, []byte(fact)); got != c.sees {
			t.Errorf("%s: the entry in the first request = %v, want %v:\n%s", c.name, got, c.sees, body)
		}
		disabled := c.memory.Disabled
		if got := bytes.Contains(body, []byte(`"name":"memory"`)); got == disabled {
			t.Errorf("%s: the memory tool offered = %v, want %v", c.name, got, !disabled)
		}
	}

	// aerie memory shows and edits the memory the pods kept.
	memoryCmd := func(env []string, args ...string) (string, error) {
		args = append(args, "--db", e.dsn, "--namespace", e.ns, "--scope", project.Scope)
		cmd := exec.Command(e.bin, args...)
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := memoryCmd(nil, "memory", "show", "--json")
	var docs []struct {
		Target, Where string
		Entries       []string
	}
	if err != nil || json.Unmarshal([]byte(out), &docs) != nil || len(docs) != 2 ||
		len(docs[0].Entries) != 1 || docs[0].Entries[0] != fact || !strings.Contains(docs[0].Where, project.Scope) {
		t.Fatalf("aerie memory show --json: %v\n%s", err, out)
	}
	if out, err := memoryCmd([]string{`EDITOR=printf '# Project memory\n\n- edited\n' >`}, "memory", "edit"); err != nil {
		t.Fatalf("aerie memory edit: %v\n%s", err, out)
	}
	if out, err := memoryCmd(nil, "memory", "show"); err != nil || !strings.Contains(out, "- edited") || strings.Contains(out, fact) {
		t.Errorf("aerie memory show after the edit: %v\n%s", err, out)
	}
}
