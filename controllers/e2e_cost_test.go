package controllers

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/subagent"
)

// TestEndToEndCostBudget runs a session with spec.budget.maxCostUSD whose
// two subagents spend past it, through the controller and a runner pod:
// the model's price is the bundled one of claude-sonnet-4-5; the session
// fails BudgetExceeded (exit 4) naming the cost budget, with
// status.usage.costUSD the tree's cost (past the budget by at most the
// responses in flight when it was reached), which the Cost column of
// kubectl get shows and aerie_cost_usd_total counts.
func TestEndToEndCostBudget(t *testing.T) {
	e := startE2E(t)
	const name, model, budget = "cost-budget", "claude-sonnet-4-5", 0.006
	// At $3 and $15 per million tokens: the root's first turn costs
	// $0.00045, each subagent turn $0.0015.
	const root, each = (100*3 + 10*15) / 1e6, (250*3 + 50*15) / 1e6
	spawn := func(id, task string) testenv.ToolCall {
		b, _ := json.Marshal(map[string]any{"task": task})
		return testenv.ToolCall{ID: id, Name: subagent.Name, Arguments: string(b)}
	}
	srv := testenv.StartModelServer(t,
		testenv.Turn{
			ToolCalls: []testenv.ToolCall{spawn("sa", "spender-a: spend"), spawn("sb", "spender-b: spend")},
			Usage:     testenv.TokenUsage{InputTokens: 100, OutputTokens: 10},
		},
		testenv.Turn{Text: "never: the budget ends the run first"})
	big := func(id string) testenv.Turn {
		tt := bashTurn(id, "true")
		tt.Usage = testenv.TokenUsage{InputTokens: 250, OutputTokens: 50}
		return tt
	}
	for _, key := range []string{"spender-a:", "spender-b:"} {
		srv.Conversation(key, big("1"), big("2"), big("3"), big("4"), big("5"), testenv.Turn{Text: "never"})
	}
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Spend.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: model, BaseURL: srv.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
			Budget: &aeriev1alpha1.Budget{MaxCostUSD: ptr.To("0.006")},
		},
	}
	if err := e.cp.Client.Create(t.Context(), s); err != nil {
		t.Fatalf("create session %s: %v", name, err)
	}

	s = e.waitFinished(t, name)
	r, u := s.Status.Result, s.Status.Usage
	if s.Status.Phase != aeriev1alpha1.PhaseFailed || r == nil || r.Outcome != aeriev1alpha1.OutcomeBudgetExceeded ||
		r.ExitCode == nil || *r.ExitCode != runconfig.ExitBudget || u == nil {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("want Failed, BudgetExceeded, exit 4; status:\n%s", b)
	}
	if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Reason != aeriev1alpha1.ReasonBudgetExceeded ||
		!strings.Contains(c.Message, "cost budget of $0.006") {
		t.Errorf("condition Succeeded %s: %s; want BudgetExceeded naming the cost budget of $0.006", c.Reason, c.Message)
	}
	cost, err := strconv.ParseFloat(u.CostUSD, 64)
	if err != nil || cost < budget || cost > budget+2*each+1e-6 {
		t.Fatalf("status.usage.costUSD %q (%v); want the tree's cost, between $%v and $%v", u.CostUSD, err, budget, budget+2*each)
	}
	// The tree's cost is the root's turn and whole subagent turns; the
	// subagents' requests are at most the five of each script.
	if turns := math.Round((cost - root) / each); math.Abs(cost-root-turns*each) > 1e-6 {
		t.Errorf("costUSD %s is not the root's $%v and whole subagent turns of $%v", u.CostUSD, root, each)
	}
	if n := len(srv.Requests()); n > 1+2*5 {
		t.Errorf("%d model requests, want at most the root's first and five of each subagent", n)
	}
	if u.Subagents != 2 {
		t.Errorf("usage counts %d subagents, want 2", u.Subagents)
	}

	out, err := e.cp.Kubectl(t.Context(), "get", "agentsessions", name, "-n", e.ns)
	if err != nil {
		t.Fatal(err)
	}
	if col := tableColumn(t, out, "COST"); col != u.CostUSD {
		t.Errorf("kubectl get shows Cost %q, want %q:\n%s", col, u.CostUSD, out)
	}

	// The controller counts a session's cost once it has recorded it
	// finished.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := seriesValue(e.metrics, "aerie_cost_usd_total", map[string]string{"namespace": e.ns, "model": model})
		if err == nil && math.Abs(got-cost) < 1e-9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("aerie_cost_usd_total{namespace=%s,model=%s} = %v, %v; want %v", e.ns, model, got, err, cost)
		}
	}
}

// tableColumn is the value in column of the one row of kubectl get's
// table out.
func tableColumn(t *testing.T, out, column string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get printed %d lines, want a header and one row:\n%s", len(lines), out)
	}
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	for i, h := range header {
		if h == column && i < len(row) {
			return row[i]
		}
	}
	t.Fatalf("no column %s in kubectl get's table:\n%s", column, out)
	return ""
}
