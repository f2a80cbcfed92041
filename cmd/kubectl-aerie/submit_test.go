package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	aeriev1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// finish plays the controller's part: once the session exists, it writes a
// finished status.
func finish(t *testing.T, cp *testenv.ControlPlane, ns, name string, phase aeriev1.AgentSessionPhase, code int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var s aeriev1.AgentSession
		err := cp.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &s)
		if err == nil {
			s.Status.Phase = phase
			s.Status.SessionID = string(s.UID)
			s.Status.Result = &aeriev1.Result{Outcome: "BudgetExceeded", ExitCode: ptr.To(code), Message: "the turn budget of 3 is spent"}
			if phase == aeriev1.PhaseSucceeded {
				s.Status.Result.Outcome, s.Status.Result.Message = "Completed", ""
			}
			s.Status.Usage = &aeriev1.Usage{Turns: 3, TotalTokens: 1200, Compactions: 1}
			if err := cp.Client.Status().Update(t.Context(), &s); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("session %s/%s never appeared: %v", ns, name, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSubmit runs the cluster commands against one API server; its
// subtests play the controller's part where they need one.
func TestSubmit(t *testing.T) {
	t.Parallel()
	cp := testenv.StartControlPlane(t)
	t.Run("wait", func(t *testing.T) { testSubmitWait(t, cp) })
	t.Run("refusals", func(t *testing.T) { testSubmitRefusals(t, cp) })
	t.Run("approve", func(t *testing.T) { testApprove(t, cp) })
	t.Run("layer", func(t *testing.T) { testLayerAccepted(t, cp) })
}

// testLayerAccepted applies a packed layer to the API server.
func testLayerAccepted(t *testing.T, cp *testenv.ControlPlane) {
	t.Parallel()
	src := t.TempDir()
	testenv.WriteFile(t, filepath.Join(src, "tools/lint.sh"), "#!/bin/sh\n", 0o755)
	testenv.WriteFile(t, filepath.Join(src, "tools/lib/__init__.py"), "", 0o644)
	ns := cp.Namespace(t)
	r := harness{}.aerie(t, "layer", "pack", src, "--name", "team-tools", "-n", ns)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &cm); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(t.Context(), &cm); err != nil {
		t.Errorf("the API server refused the packed layer: %v", err)
	}
}

func testSubmitWait(t *testing.T, cp *testenv.ControlPlane) {
	t.Parallel()
	manifest := filepath.Join(t.TempDir(), "session.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: aerie.run/v1alpha1
kind: AgentSession
metadata:
  name: fix-tests
spec:
  prompt: make the tests pass
  model:
    provider: scripted
    name: demo
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		phase aeriev1.AgentSessionPhase
		code  int32
	}{
		{"completed", aeriev1.PhaseSucceeded, 0},
		{"budget", aeriev1.PhaseFailed, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := cp.Namespace(t)
			go finish(t, cp, ns, "fix-tests", tt.phase, tt.code)
			r := harness{}.aerie(t, "submit", "-f", manifest, "--wait", "--timeout", "60s", "--kubeconfig", cp.Kubeconfig, "-n", ns)
			if r.code != int(tt.code) {
				t.Fatalf("exit %d, want %d: %v\n%s", r.code, tt.code, r.err, r.stdout)
			}
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			var last submitted
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
				t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
			}
			if last.Type != "finished" || last.Phase != tt.phase || last.Usage == nil || last.Usage.Turns != 3 || last.Usage.Compactions != 1 {
				t.Errorf("last record = %+v", last)
			}
		})
	}
}

func testSubmitRefusals(t *testing.T, cp *testenv.ControlPlane) {
	t.Parallel()
	ns := cp.Namespace(t)
	dir := t.TempDir()
	bad := map[string]string{
		"two-prompts.yaml":   "apiVersion: aerie.run/v1alpha1\nkind: AgentSession\nmetadata: {name: x}\nspec:\n  prompt: a\n  promptFrom: {configMapKeyRef: {name: p, key: k}}\n  model: {provider: scripted, name: demo}\n",
		"not-a-session.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"typo.yaml":          "apiVersion: aerie.run/v1alpha1\nkind: AgentSession\nmetadata: {name: x}\nspec:\n  promt: a\n  model: {provider: scripted, name: demo}\n",
	}
	for file, content := range bad {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		r := harness{}.aerie(t, "submit", "-f", path, "--kubeconfig", cp.Kubeconfig, "-n", ns)
		if r.code != 2 {
			t.Errorf("%s: exit %d (%v), want 2", file, r.code, r.err)
		}
	}
	r := harness{}.aerie(t, "submit", "--prompt", "hello", "--provider", "scripted", "--model", "demo", "--kubeconfig", cp.Kubeconfig, "-n", ns)
	if r.code != 0 {
		t.Fatalf("submit --prompt: exit %d: %v", r.code, r.err)
	}
	var created submitted
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &created); err != nil || !strings.HasPrefix(created.Name, "session-") {
		t.Fatalf("created = %+v, %v", created, err)
	}
	if r := (harness{}).aerie(t, "cancel", created.Name, "--kubeconfig", cp.Kubeconfig, "-n", ns); r.code != 0 {
		t.Fatalf("cancel: %v", r.err)
	}
	got := harness{}.aerie(t, "get", created.Name, "--json", "--kubeconfig", cp.Kubeconfig, "-n", ns)
	var items []aeriev1.AgentSession
	if err := json.Unmarshal([]byte(got.stdout), &items); err != nil || len(items) != 1 || !items[0].Spec.Cancel {
		t.Errorf("get after cancel = %s (%v)", got.stdout, err)
	}
	if r := (harness{}).aerie(t, "logs", created.Name, "--kubeconfig", cp.Kubeconfig, "-n", ns); r.code == 0 || !strings.Contains(r.err.Error(), "no runner pod") {
		t.Errorf("logs of a session without a pod: %v", r.err)
	}
}

// testApprove: approve appends a decision on the paused call (or a named
// one) to spec.approvals and refuses to decide a call twice.
func testApprove(t *testing.T, cp *testenv.ControlPlane) {
	t.Parallel()
	ns := cp.Namespace(t)
	s := &aeriev1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused"},
		Spec: aeriev1.AgentSessionSpec{
			Prompt: "hello", HookApproval: aeriev1.HookApprovalAsk,
			Model: aeriev1.ModelSpec{Provider: aeriev1.ProviderScripted, Name: "demo"},
		},
	}
	if err := cp.Client.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	kube := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns}
	if r := (harness{}).aerie(t, append([]string{"approve", "paused"}, kube...)...); r.code == 0 || !strings.Contains(r.err.Error(), "not paused on a call") {
		t.Errorf("approve with nothing pending: exit %d, %v", r.code, r.err)
	}
	s.Status.Phase = aeriev1.PhaseAwaitingApproval
	s.Status.PendingApproval = &aeriev1.PendingApproval{CallID: "c1", Tool: "bash", Since: metav1.Now()}
	if err := cp.Client.Status().Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if r := (harness{}).aerie(t, append([]string{"approve", "paused"}, kube...)...); r.code != 0 || !strings.Contains(r.stdout, "call c1: allow") {
		t.Fatalf("approve: exit %d, %q, %v", r.code, r.stdout, r.err)
	}
	if r := (harness{}).aerie(t, append([]string{"approve", "paused", "--deny"}, kube...)...); r.code == 0 || !strings.Contains(r.err.Error(), "already decided") {
		t.Errorf("second decision on c1: exit %d, %v", r.code, r.err)
	}
	if r := (harness{}).aerie(t, append([]string{"approve", "paused", "c2", "--deny", "--reason", "not today"}, kube...)...); r.code != 0 {
		t.Fatalf("approve c2 --deny: exit %d, %v", r.code, r.err)
	}
	var got aeriev1.AgentSession
	if err := cp.Client.Get(t.Context(), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	want := []aeriev1.ApprovalDecision{
		{CallID: "c1", Decision: aeriev1.DecisionAllow},
		{CallID: "c2", Decision: aeriev1.DecisionDeny, Reason: "not today"},
	}
	if len(got.Spec.Approvals) != 2 || got.Spec.Approvals[0] != want[0] || got.Spec.Approvals[1] != want[1] {
		t.Errorf("spec.approvals %+v, want %+v", got.Spec.Approvals, want)
	}
}

// TestExitStatus: submit --wait exits as aerie run would for every phase
// and outcome a session settles in, with the runner's exit code when it
// reported one and from the phase and outcome when its pod was lost.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		phase   aeriev1.AgentSessionPhase
		outcome aeriev1.Outcome
		code    *int32 // the runner's, nil when it reported none
		want    int
		settled bool
	}{
		{aeriev1.PhasePending, "", nil, 1, false},
		{aeriev1.PhaseRunning, "", nil, 1, false},
		{aeriev1.PhaseSucceeded, aeriev1.OutcomeCompleted, ptr.To[int32](0), 0, true},
		{aeriev1.PhaseSucceeded, "", nil, 0, true},
		{aeriev1.PhaseFailed, aeriev1.OutcomeBudgetExceeded, ptr.To[int32](4), 4, true},
		{aeriev1.PhaseFailed, aeriev1.OutcomeBudgetExceeded, nil, 4, true},
		{aeriev1.PhaseFailed, aeriev1.OutcomeTimedOut, nil, 4, true},
		{aeriev1.PhaseFailed, aeriev1.OutcomeResultInvalid, ptr.To[int32](6), 6, true},
		{aeriev1.PhaseFailed, aeriev1.OutcomeResultInvalid, nil, 6, true},
		{aeriev1.PhaseFailed, aeriev1.OutcomeError, ptr.To[int32](3), 3, true},
		{aeriev1.PhaseFailed, aeriev1.OutcomeError, ptr.To[int32](2), 2, true},
		{aeriev1.PhaseFailed, aeriev1.OutcomeFailed, nil, 1, true},
		{aeriev1.PhaseAwaitingApproval, "", ptr.To[int32](5), 5, true},
		// A resumed attempt's earlier report does not stand for the pause.
		{aeriev1.PhaseAwaitingApproval, "", ptr.To[int32](0), 5, true},
		{aeriev1.PhaseAwaitingApproval, "", nil, 5, true},
		{aeriev1.PhaseCancelled, aeriev1.OutcomeCancelled, nil, 143, true},
	} {
		s := &aeriev1.AgentSession{Status: aeriev1.AgentSessionStatus{Phase: c.phase}}
		if c.outcome != "" || c.code != nil {
			s.Status.Result = &aeriev1.Result{Outcome: c.outcome, ExitCode: c.code}
		}
		if got := settled(s); got != c.settled {
			t.Errorf("%s %s: settled = %v, want %v", c.phase, c.outcome, got, c.settled)
		}
		if !c.settled {
			continue
		}
		if got := exitStatus(s); got != c.want {
			t.Errorf("%s %s (runner's code %v): exit %d, want %d", c.phase, c.outcome, c.code, got, c.want)
		}
	}
}
