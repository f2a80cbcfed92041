package controllers

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// askHooks is a hooks.toml whose PreToolUse hook asks a person about every
// bash call.
const askHooks = "[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\n" +
	`command = "echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"commands need a person\"}}'"` + "\n"

// TestApprovalsEndToEnd: with hookApproval ask, a call a platform hook asks
// about pauses the session in phase AwaitingApproval and its pod ends; a
// decision in spec.approvals starts attempt 2, which runs the call; a
// session nobody answers is denied once approvalTimeout passes.
func TestApprovalsEndToEnd(t *testing.T) {
	e := startE2E(t)
	ns, platform := e.namespace(t), e.cp.Namespace(t)
	e = e.in(ns)
	layer := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ask-hooks", Namespace: platform, Labels: map[string]string{runconfig.LayerLabel: ""}},
		Data:       map[string]string{"hooks.toml": askHooks},
	}
	if err := e.cp.Client.Create(t.Context(), layer); err != nil {
		t.Fatalf("create the platform layer: %v", err)
	}
	e.startController(t, ns, platform)

	t.Run("approved", func(t *testing.T) {
		t.Parallel()
		model := testenv.StartModelServer(t, bashTurn("c1", "echo ran-once"), testenv.Turn{Text: "Done."})
		e.askSession(t, "approved", model, time.Hour)
		s := e.waitAwaiting(t, "approved")
		c := meta.FindStatusCondition(s.Status.Conditions, aeriev1alpha1.ConditionAwaitingApproval)
		for _, want := range []string{"c1", "bash", "echo ran-once", "commands need a person"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("AwaitingApproval message %q does not name %q", c.Message, want)
			}
		}
		if pa := s.Status.PendingApproval; pa == nil || pa.CallID != "c1" || pa.Tool != "bash" {
			t.Errorf("pendingApproval %+v, want c1 of bash", pa)
		}
		s.Spec.Approvals = append(s.Spec.Approvals, aeriev1alpha1.ApprovalDecision{CallID: "c1", Decision: aeriev1alpha1.DecisionAllow})
		if err := e.cp.Client.Update(t.Context(), s); err != nil {
			t.Fatalf("approve: %v", err)
		}
		s = e.waitFinished(t, "approved")
		e.checkResumed(t, s, aeriev1alpha1.ReasonApprovalDecided)
		if body := string(requestForTurn(t, model, 2).Body); !strings.Contains(body, "ran-once") {
			t.Errorf("the approved call did not run: the model saw %s", body)
		}
		if rc := runnerConfigOf(t, e, "approved", 2); len(rc.Approvals) != 1 || !rc.Approvals[0].Allowed || rc.Approvals[0].CallID != "c1" {
			t.Errorf("attempt 2's runner config approvals %+v, want c1 allowed", rc.Approvals)
		}
	})

	t.Run("timed out", func(t *testing.T) {
		t.Parallel()
		model := testenv.StartModelServer(t, bashTurn("c1", "echo ran-once"), testenv.Turn{Text: "Done."})
		e.askSession(t, "timed-out", model, 2*time.Second)
		e.waitAwaiting(t, "timed-out")
		s := e.waitFinished(t, "timed-out")
		e.checkResumed(t, s, aeriev1alpha1.ReasonApprovalTimedOut)
		body := string(requestForTurn(t, model, 2).Body)
		if !strings.Contains(body, messageApprovalTimedOut) || strings.Contains(body, "ran-once\\n") {
			t.Errorf("the call was not denied as timed out: the model saw %s", body)
		}
	})

	t.Run("approved in a subagent", func(t *testing.T) {
		t.Parallel()
		testAskInSubagent(t, e, "child-approved", aeriev1alpha1.DecisionAllow)
	})

	t.Run("denied in a subagent", func(t *testing.T) {
		t.Parallel()
		testAskInSubagent(t, e, "child-denied", aeriev1alpha1.DecisionDeny)
	})
}

// testAskInSubagent: a call a hook asks about inside a subagent pauses the
// whole session, whose status names the subagent and its call; the
// decision in spec.approvals starts attempt 2, which resumes the subagent
// from its journal: approved, its call runs once, denied, it gets the
// reason; either way the subagent ends, once, and so does the root.
func testAskInSubagent(t *testing.T, e *e2e, name string, decision aeriev1alpha1.Decision) {
	const task = "child-ask: count the lines"
	model := testenv.StartModelServer(t, testenv.ToolTurn(testenv.Spawn("s1", task)), answer("Root done."))
	model.Conversation(task, bashTurn("c1", "echo ran >> once.log; wc -l < once.log"), answer("Child done."))
	e.askSession(t, name, model, time.Hour)

	s := e.waitAwaiting(t, name)
	root := uuid.MustParse(s.Status.SessionID)
	child := subagent.ChildID(root, "s1")
	c := meta.FindStatusCondition(s.Status.Conditions, aeriev1alpha1.ConditionAwaitingApproval)
	for _, want := range []string{"call c1 of tool bash", "subagent " + child.String(), "once.log", "commands need a person"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("AwaitingApproval message %q does not name %q", c.Message, want)
		}
	}
	if pa := s.Status.PendingApproval; pa == nil || pa.CallID != "c1" || pa.Tool != "bash" {
		t.Errorf("pendingApproval %+v, want c1 of bash", pa)
	}
	if n := len(model.RequestsOf(task)); n != 1 {
		t.Errorf("the subagent made %d requests before the decision, want 1", n)
	}

	s.Spec.Approvals = append(s.Spec.Approvals, aeriev1alpha1.ApprovalDecision{CallID: "c1", Decision: decision, Reason: "not today"})
	if err := e.cp.Client.Update(t.Context(), s); err != nil {
		t.Fatalf("decide: %v", err)
	}
	s = e.waitFinished(t, name)
	e.checkResumed(t, s, aeriev1alpha1.ReasonApprovalDecided)

	// The subagent: its first turn once, then its last with c1's result,
	// the command's output when approved (run once: one line), the reason
	// when denied.
	reqs := model.RequestsOf(task)
	if len(reqs) != 2 {
		t.Fatalf("the subagent made %d requests, want 2 (its first turn was not asked again)", len(reqs))
	}
	got := toolResults(t, reqs[1])["c1"]
	if decision == aeriev1alpha1.DecisionAllow && strings.TrimSpace(got) != "1" {
		t.Errorf("the approved call's result %q, want 1 (it ran once)", got)
	}
	if decision == aeriev1alpha1.DecisionDeny && !strings.Contains(got, "a person denied this call: not today") {
		t.Errorf("the denied call's result %q, want the reason", got)
	}
	// The root: its first turn once, then its last with the subagent's answer.
	var rootReqs []testenv.ModelRequest
	for _, r := range model.Requests() {
		if !strings.HasPrefix(r.FirstUser(), task) {
			rootReqs = append(rootReqs, r)
		}
	}
	if len(rootReqs) != 2 || !strings.Contains(toolResults(t, rootReqs[1])["s1"], "Child done.") {
		t.Fatalf("the root made %d requests, want 2, the last with the subagent's answer", len(rootReqs))
	}

	// Stored: the subagent completed under the root, with the decision
	// and one result of c1 in its journal; the root has its one outcome.
	var outcomes []transcript.SubagentOutcome
	for _, en := range storedEntries(t, e, s) {
		if p, ok := en.Payload.(transcript.SubagentOutcome); ok {
			outcomes = append(outcomes, p)
		}
	}
	if len(outcomes) != 1 || outcomes[0].Session != child || outcomes[0].Outcome != transcript.OutcomeCompleted {
		t.Errorf("the root's outcomes %+v, want one, completed, of %s", outcomes, child)
	}
	entries := storedChild(t, e, root, child)
	results, decided := 0, 0
	for _, en := range entries {
		switch p := en.Payload.(type) {
		case transcript.ToolResult:
			if p.CallID == "c1" {
				results++
			}
		case transcript.ApprovalDecision:
			if p.CallID == "c1" && p.Allowed == (decision == aeriev1alpha1.DecisionAllow) && p.By == "spec.approvals" {
				decided++
			}
		}
	}
	if results != 1 || decided != 1 {
		t.Errorf("the subagent's journal has %d results of c1 and %d decisions from spec.approvals, want 1 and 1:\n%s",
			results, decided, describeEntries(entries))
	}
}

// askSession creates a session with hookApproval ask and approvalTimeout.
func (e *e2e) askSession(t *testing.T, name string, model *testenv.ModelServer, timeout time.Duration) {
	t.Helper()
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Run the command.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: model.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
			HookApproval:    aeriev1alpha1.HookApprovalAsk,
			ApprovalTimeout: &metav1.Duration{Duration: timeout},
		},
	}
	if err := e.cp.Client.Create(t.Context(), s); err != nil {
		t.Fatalf("create session %s: %v", name, err)
	}
}

// waitAwaiting polls the session until it is AwaitingApproval with the
// condition True, for at most two minutes.
func (e *e2e) waitAwaiting(t *testing.T, name string) *aeriev1alpha1.AgentSession {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var s aeriev1alpha1.AgentSession
		if err := e.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: e.ns, Name: name}, &s); err != nil {
			t.Fatalf("get session %s: %v", name, err)
		}
		if s.Status.Phase == aeriev1alpha1.PhaseAwaitingApproval &&
			meta.IsStatusConditionTrue(s.Status.Conditions, aeriev1alpha1.ConditionAwaitingApproval) {
			return &s
		}
		if time.Now().After(deadline) || s.Status.Phase.Finished() {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Fatalf("session %s not AwaitingApproval; status:\n%s", name, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkResumed: the session succeeded in a second attempt that resumed
// after the pause for reason, which counted as no retry.
func (e *e2e) checkResumed(t *testing.T, s *aeriev1alpha1.AgentSession, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(s.Status.Conditions, aeriev1alpha1.ConditionAwaitingApproval)
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || s.Status.Attempts != 2 || s.Status.ApprovalResumes != 1 ||
		c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || s.Status.PendingApproval != nil {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("want Succeeded in attempt 2 resumed (%s); status:\n%s", reason, b)
	}
	var pods corev1.PodList
	if err := e.cp.Client.List(t.Context(), &pods, client.InNamespace(e.ns), client.MatchingLabels{LabelSessionUID: string(s.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 2 {
		t.Errorf("%d runner pods, want 2", len(pods.Items))
	}
}
