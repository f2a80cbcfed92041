package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/moa"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// sessionModel is the model e2e runs give --model.
const sessionModel = "claude-sonnet-4-5"

// moaConfig is a project config whose [moa] names two reference models,
// one bare (the session's provider) and one with its provider, and an
// aggregator.
const moaConfig = "[moa]\nreference_models = [\"ref-a\", \"anthropic:ref-b\"]\naggregator_model = \"agg\"\n"

func (e *e2e) projectConfig(doc string) {
	e.t.Helper()
	dir := filepath.Join(e.ws, ".aerie")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(doc), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func modelTurn(model string, turn testenv.Turn) testenv.Turn {
	turn.Model = model
	return turn
}

func usage(in, out int64) testenv.TokenUsage {
	return testenv.TokenUsage{InputTokens: in, OutputTokens: out}
}

// moaTurns are a session that asks mixture_of_agents once and answers with
// what it returned; refB is reference model ref-b's turn.
func moaTurns(refB testenv.Turn) []testenv.Turn {
	return []testenv.Turn{
		modelTurn(sessionModel, testenv.Turn{
			ToolCalls: []testenv.ToolCall{call("moa_1", moa.Name, map[string]string{
				"question": "Which sort should the report use?", "context": "The rows must keep their order on ties.",
			})},
			Usage: usage(100, 20),
		}),
		modelTurn("ref-a", testenv.Turn{Text: "Quicksort: it is fast.", Usage: usage(30, 5)}),
		modelTurn("ref-b", refB),
		modelTurn("agg", testenv.Turn{Text: "Mergesort: it is stable, and ties keep their order.", Usage: usage(50, 7)}),
		modelTurn(sessionModel, testenv.Turn{Text: "The report uses mergesort.", Usage: usage(200, 10)}),
	}
}

// requestsFor returns the requests for model, decoded.
func requestsFor(t *testing.T, e *e2e, model string) []anthropicRequest {
	t.Helper()
	var out []anthropicRequest
	for _, req := range e.model.Requests() {
		var r anthropicRequest
		if err := req.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Model == model {
			out = append(out, r)
		}
	}
	return out
}

// jsonText is v as JSON text, to look for text in whatever shape a
// request field has.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// traces returns the session's stored traces.
func (e *e2e) traces(id string) []store.Trace {
	e.t.Helper()
	trs, err := e.store().Traces(e.t.Context(), e.ws, uuidOf(e.t, id))
	if err != nil {
		e.t.Fatal(err)
	}
	return trs
}

// TestRunMixtureOfAgents asks two reference models and an aggregator
// through mixture_of_agents: the result is the aggregate, the trace holds
// both proposals and the aggregation (outside the entry stream), and the
// tokens of all three count in the session's usage.
func TestRunMixtureOfAgents(t *testing.T) {
	t.Parallel()
	e := newE2E(t, moaTurns(testenv.Turn{Text: "Mergesort: it is stable.", Usage: usage(40, 6)})...)
	e.projectConfig(moaConfig)
	out := e.run("run", "--events-jsonl", "Sort the report.")
	end := out.end(t)
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}

	reqs := e.model.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d model requests, want 5", len(reqs))
	}
	res := toolResults(t, reqs[4])["moa_1"]
	if res.isError || !strings.HasPrefix(res.text, "Mergesort: it is stable, and ties keep their order.") ||
		!strings.Contains(res.text, "2 of 2 reference models answered") {
		t.Errorf("tool result = %+v, want the aggregate", res)
	}
	for _, m := range []string{"ref-a", "ref-b"} {
		rs := requestsFor(t, e, m)
		if len(rs) != 1 || len(rs[0].Messages) != 1 || !strings.Contains(rs[0].Messages[0].Content[0].Text, "keep their order on ties") ||
			!strings.Contains(rs[0].Messages[0].Content[0].Text, "Which sort") {
			t.Errorf("%s was asked %+v, want the question with its context", m, rs)
		}
	}
	agg := requestsFor(t, e, "agg")
	if len(agg) != 1 {
		t.Fatalf("%d aggregator requests, want 1", len(agg))
	}
	if sys := jsonText(t, agg[0].System); !strings.Contains(sys, "Quicksort: it is fast.") ||
		!strings.Contains(sys, "Mergesort: it is stable.") || !strings.Contains(sys, "synthesize") {
		t.Errorf("the aggregator's instruction lacks the proposals: %v", sys)
	}

	trs := e.traces(end.Session)
	if len(trs) != 1 {
		t.Fatalf("%d traces, want 1", len(trs))
	}
	tr := trs[0]
	if tr.CallID != "moa_1" || len(tr.Proposals) != 2 {
		t.Fatalf("trace = %+v, want call moa_1 with 2 proposals", tr)
	}
	for i, want := range []store.TraceCall{
		{Provider: "anthropic", Model: "ref-a", Output: "Quicksort: it is fast.", InputTokens: 30, OutputTokens: 5},
		{Provider: "anthropic", Model: "ref-b", Output: "Mergesort: it is stable.", InputTokens: 40, OutputTokens: 6},
	} {
		got := tr.Proposals[i]
		if got.Duration <= 0 {
			t.Errorf("proposal %d has no duration", i)
		}
		got.Duration = 0
		if got != want {
			t.Errorf("proposal %d = %+v, want %+v", i, got, want)
		}
	}
	if a := tr.Aggregate; a.Model != "agg" || a.Output != "Mergesort: it is stable, and ties keep their order." ||
		a.InputTokens != 50 || a.OutputTokens != 7 || a.Error != "" {
		t.Errorf("aggregate = %+v", a)
	}

	// The session's usage counts the mixture's tokens, its turns only
	// the session's own requests.
	if u := end.Usage; u == nil || u.InputTokens != 100+30+40+50+200 || u.OutputTokens != 20+5+6+7+10 || u.Requests != 2 {
		t.Errorf("session usage = %+v, want 420 in, 48 out, 2 requests", end.Usage)
	}
	es := e.entries(end.Session)
	var last transcript.Usage
	for _, en := range es {
		if u, ok := en.Payload.(transcript.Usage); ok {
			last = u
		}
	}
	if last.InputTokens != 420 || last.OutputTokens != 48 {
		t.Errorf("last journaled usage = %+v, want 420 in, 48 out", last)
	}
}

// TestRunMixtureOfAgentsTokenBudget: the mixture's tokens count toward
// --max-tokens, so the session stops before a request the budget no longer
// covers.
func TestRunMixtureOfAgentsTokenBudget(t *testing.T) {
	t.Parallel()
	turns := moaTurns(testenv.Turn{Text: "Mergesort: it is stable.", Usage: usage(40, 6)})
	e := newE2E(t, turns[:4]...)
	e.projectConfig(moaConfig)
	// The session's own first request uses 120 tokens, the mixture 138.
	out := e.run("run", "--events-jsonl", "--max-tokens", "200", "Sort the report.")
	if out.code != 4 {
		t.Fatalf("exit %d, want 4 (budget); stderr:\n%s", out.code, out.stderr)
	}
	if end := out.end(t); end.Outcome != transcript.OutcomeBudgetExceeded {
		t.Errorf("outcome %s, want %s", end.Outcome, transcript.OutcomeBudgetExceeded)
	}
	if n := len(e.model.Requests()); n != 4 {
		t.Errorf("%d model requests, want 4: none after the budget was spent", n)
	}
}

// TestRunMixtureOfAgentsReferenceFails: a reference model whose request
// fails does not fail the call; the aggregate of the others is the result
// and names the failure, which the trace keeps.
func TestRunMixtureOfAgentsReferenceFails(t *testing.T) {
	t.Parallel()
	e := newE2E(t, moaTurns(testenv.Turn{
		Text:   "never served",
		Faults: []testenv.Fault{{Status: http.StatusNotFound, Type: "not_found_error", Message: "model: ref-b"}},
	})...)
	e.projectConfig(moaConfig)
	out := e.run("run", "--events-jsonl", "Sort the report.")
	end := out.end(t)
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	res := toolResults(t, reqs[len(reqs)-1])["moa_1"]
	if res.isError || !strings.HasPrefix(res.text, "Mergesort: it is stable, and ties keep their order.") ||
		!strings.Contains(res.text, "1 of 2 reference models answered; failed: anthropic:ref-b:") ||
		!strings.Contains(res.text, "model: ref-b") {
		t.Errorf("tool result = %+v, want the aggregate naming ref-b's failure", res)
	}
	agg := requestsFor(t, e, "agg")
	if len(agg) != 1 || strings.Contains(jsonText(t, agg[0].System), "never served") {
		t.Errorf("aggregator requests %+v", agg)
	}
	trs := e.traces(end.Session)
	if len(trs) != 1 || len(trs[0].Proposals) != 2 {
		t.Fatalf("traces = %+v, want one with two proposals", trs)
	}
	if p := trs[0].Proposals[1]; p.Model != "ref-b" || p.Output != "" || !strings.Contains(p.Error, "model: ref-b") {
		t.Errorf("ref-b's proposal = %+v, want its error", p)
	}
	if u := end.Usage; u == nil || u.InputTokens != 100+30+50+200 {
		t.Errorf("session usage = %+v, want 380 input tokens", end.Usage)
	}
}

// TestRunMixtureOfAgentsEveryReferenceFails: with no proposal at all the
// result is an error naming each failure, the aggregator is not asked, and
// the trace is kept.
func TestRunMixtureOfAgentsEveryReferenceFails(t *testing.T) {
	t.Parallel()
	fault := []testenv.Fault{{Status: http.StatusBadRequest, Message: "unsupported model"}}
	e := newE2E(t,
		moaTurns(testenv.Turn{})[0],
		modelTurn("ref-a", testenv.Turn{Faults: fault}),
		modelTurn("ref-b", testenv.Turn{Faults: fault}),
		modelTurn(sessionModel, testenv.Turn{Text: "I could not ask them.", Usage: usage(200, 10)}),
	)
	e.projectConfig(moaConfig)
	out := e.run("run", "--events-jsonl", "Sort the report.")
	end := out.end(t)
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	res := toolResults(t, reqs[len(reqs)-1])["moa_1"]
	if !res.isError || !strings.Contains(res.text, "every reference model failed") ||
		!strings.Contains(res.text, "anthropic:ref-a:") || !strings.Contains(res.text, "anthropic:ref-b:") {
		t.Errorf("tool result = %+v, want an error naming both failures", res)
	}
	if n := len(requestsFor(t, e, "agg")); n != 0 {
		t.Errorf("the aggregator was asked %d times, want 0", n)
	}
	if trs := e.traces(end.Session); len(trs) != 1 || trs[0].Aggregate.Model != "" {
		t.Errorf("traces = %+v, want one without an aggregate", trs)
	}
}

// TestRunMixtureOfAgentsOffered: the tool is offered only when [moa] names
// reference models.
func TestRunMixtureOfAgentsOffered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		config string
		want   bool
	}{
		{"without [moa]", "", false},
		{"with [moa]", moaConfig, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, answer("Nothing to ask."))
			if tc.config != "" {
				e.projectConfig(tc.config)
			}
			if out := e.run("run", "--events-jsonl", "Say hello."); out.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
			}
			var r anthropicRequest
			if err := e.model.Requests()[0].Decode(&r); err != nil {
				t.Fatal(err)
			}
			offered := slices.ContainsFunc(r.Tools, func(tl struct {
				Name string `json:"name"`
			}) bool {
				return tl.Name == moa.Name
			})
			if offered != tc.want {
				t.Errorf("%s offered: %v, want %v", moa.Name, offered, tc.want)
			}
		})
	}
}

// TestRunMixtureOfAgentsBadConfig: a [moa] table that cannot work stops
// the launch (exit 2) with the file, the key and the fix.
func TestRunMixtureOfAgentsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"unknown provider", "[moa]\nreference_models = [\"ref-a\", \"bedrock:claude\"]\n",
			[]string{"config.toml:2:1: moa.reference_models: item 1:", `unknown provider "bedrock"`, "anthropic, openai"}},
		{"empty list", "[moa]\nreference_models = []\n",
			[]string{"config.toml:2:1: moa.reference_models: empty", "or remove [moa]"}},
		{"no list", "[moa]\naggregator_model = \"agg\"\n", []string{"moa.reference_models: empty"}},
		{"bad aggregator", "[moa]\nreference_models = [\"ref-a\"]\naggregator_model = \"gemini:pro\"\n",
			[]string{"config.toml:3:1: moa.aggregator_model:", `unknown provider "gemini"`}},
		{"no credentials", "[moa]\nreference_models = [\"openai:gpt-5\"]\n",
			[]string{"moa.reference_models openai:gpt-5", "OPENAI_API_KEY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			e.projectConfig(tc.config)
			out := e.run("run", "--events-jsonl", "Say hello.")
			if out.code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", out.code, out.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, out.stderr)
				}
			}
			if n := len(e.model.Requests()); n != 0 {
				t.Errorf("%d model requests before the launch failed", n)
			}
		})
	}
}

// TestRunnerMixtureOfAgentsPostgres: in a pod, a namespace layer's [moa]
// offers the tool, its trace goes to the PostgreSQL store under the
// namespace, and the termination report's usage counts its tokens.
func TestRunnerMixtureOfAgentsPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)
	p := newPod(t, pg.NewDatabase(t), moaTurns(testenv.Turn{Text: "Mergesort: it is stable.", Usage: usage(40, 6)})...)
	ns := t.TempDir()
	testenv.WriteTree(t, ns, map[string]string{"config.toml": moaConfig})
	cfg := p.config(func(c *runconfig.Config) {
		c.Layers = []runconfig.Layer{{Name: "team-defaults", Kind: runconfig.LayerNamespace, Dir: ns, Source: "configmap/team-defaults"}}
	})
	res := p.run(t.Context(), cfg)
	if res.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	if u := res.report.Usage; u.InputTokens != 420 || u.OutputTokens != 48 || u.Requests != 2 {
		t.Errorf("report usage = %+v, want 420 in, 48 out, 2 requests", u)
	}
	trs, err := p.store().Traces(t.Context(), cfg.Namespace, uuid.MustParse(cfg.Session.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 1 || len(trs[0].Proposals) != 2 || trs[0].Proposals[0].Output != "Quicksort: it is fast." ||
		trs[0].Aggregate.Output != "Mergesort: it is stable, and ties keep their order." {
		t.Errorf("traces = %+v", trs)
	}
}
