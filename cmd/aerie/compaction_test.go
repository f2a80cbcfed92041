package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/transcript"
)

// compactionSteps is how many build steps the long task runs; each step's
// bash output is a few thousand bytes, so that the whole task is several
// times the windows below.
const compactionSteps = 40

// longBuild is a model that runs compactionSteps bash steps (see
// buildSteps).
func longBuild() []testenv.Turn { return buildSteps(compactionSteps) }

// buildSteps is a model that runs n bash steps one after the other, each
// appending its number to steps.log and printing a long log, then ends;
// it answers the summary requests with a summary. Each turn looks at the
// request it answers.
func buildSteps(n int) []testenv.Turn {
	var mu sync.Mutex
	step := 0
	respond := func(req testenv.ModelRequest) testenv.Turn {
		if strings.Contains(string(req.Body), "You summarize the first part of a conversation") {
			return testenv.Turn{Text: "Task: run the build steps in order. State: the steps above are built."}
		}
		mu.Lock()
		defer mu.Unlock()
		step++
		if step > n {
			return testenv.Turn{Text: "All steps built."}
		}
		cmd := fmt.Sprintf("echo step %d >> steps.log && yes 'compiling unit %d of the build' | head -n 220", step, step)
		return testenv.Turn{ToolCalls: []testenv.ToolCall{call(fmt.Sprintf("step%d", step), "bash", map[string]any{"command": cmd})}}
	}
	// A turn for each step, each summary and the answer, with room for the
	// summaries.
	turns := make([]testenv.Turn, 2*n+4)
	for i := range turns {
		turns[i].Respond = respond
	}
	return turns
}

// checkLongBuild checks what a run of longBuild left: it completed, every
// step ran exactly once, the journal's entries are contiguous, and each
// compaction is a checkpoint of the journal reported as a compaction event
// with trigger; it returns the number of compactions.
func checkLongBuild(t *testing.T, e *e2e, out runOutput, trigger string) int {
	t.Helper()
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	end := out.end(t)
	if end.Outcome != transcript.OutcomeCompleted || end.Text != "All steps built." {
		t.Fatalf("session end %s %q: %s", end.Outcome, end.Text, end.Reason)
	}
	log, err := os.ReadFile(filepath.Join(e.ws, "steps.log"))
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for l := range strings.Lines(string(log)) {
		runs[strings.TrimSpace(l)]++
	}
	for s := 1; s <= compactionSteps; s++ {
		if n := runs[fmt.Sprintf("step %d", s)]; n != 1 {
			t.Errorf("step %d ran %d times", s, n)
		}
	}
	if len(runs) != compactionSteps {
		t.Errorf("steps.log holds %d distinct lines, want %d", len(runs), compactionSteps)
	}

	var session string
	var reported []events.Event
	for _, ev := range out.events {
		switch ev.Type {
		case events.SessionStart:
			session = ev.Session
		case events.Compaction:
			reported = append(reported, ev)
		}
	}
	es := e.entries(session)
	checkpoints := map[int64]transcript.Compaction{}
	for i, en := range es {
		if en.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d: the journal is not contiguous", i+1, en.Seq)
		}
		if c, ok := en.Payload.(transcript.Compaction); ok {
			checkpoints[en.Seq] = c
			if c.FirstKept < 1 || c.FirstKept > en.Seq {
				t.Errorf("compaction %d keeps from %d", en.Seq, c.FirstKept)
			}
		}
	}
	if len(reported) == 0 || len(reported) != len(checkpoints) {
		t.Fatalf("%d compaction events for %d compaction checkpoints", len(reported), len(checkpoints))
	}
	for _, ev := range reported {
		c, ok := checkpoints[ev.Seq]
		p := ev.Compaction
		switch {
		case !ok:
			t.Errorf("compaction event at seq %d, which is no compaction checkpoint", ev.Seq)
		case p == nil || p.Trigger != c.Provenance.Trigger || p.Trigger != trigger:
			t.Errorf("compaction event %+v for checkpoint %+v, want trigger %s", p, c.Provenance, trigger)
		case p.Messages != c.Provenance.Messages || p.TokensBefore <= p.TokensAfter || p.TokensAfter <= 0:
			t.Errorf("compaction event %+v for checkpoint %+v", p, c.Provenance)
		}
	}
	t.Logf("%d compactions (%s) in %d entries", len(reported), trigger, len(es))
	return len(reported)
}

// TestRunCompactsLongTask runs a task several times the window given with
// --context-window: automatic compaction keeps every request within it,
// and the run completes.
func TestRunCompactsLongTask(t *testing.T) {
	t.Parallel()
	const window = 32_000
	e := newE2E(t, longBuild()...)
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
	out := e.run("run", "--events-jsonl", "--context-window", fmt.Sprint(window), "Build every step.")
	checkLongBuild(t, e, out, "auto")
	for i, req := range e.model.Requests() {
		if req.Overflow {
			t.Errorf("request %d (%d tokens) overflowed the %d-token window", i+1, req.Tokens, window)
		}
	}
}

// TestRunRecoversFromOverflow runs the same task with a model whose window
// aerie does not know and no --context-window: each request the server
// refuses as too large is compacted and sent once more.
func TestRunRecoversFromOverflow(t *testing.T) {
	t.Parallel()
	const window = 16_000
	e := newE2E(t, longBuild()...)
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
	out := e.run("run", "--events-jsonl", "--model", "claude-unlisted", "Build every step.")
	n := checkLongBuild(t, e, out, "overflow")
	overflows := 0
	for _, req := range e.model.Requests() {
		if req.Overflow {
			overflows++
		}
	}
	if overflows != n {
		t.Errorf("%d compactions for %d overflowed requests", n, overflows)
	}
}

// isSummaryRequest says whether req is a compaction's summary request.
func isSummaryRequest(req testenv.ModelRequest) bool {
	return strings.Contains(string(req.Body), "You summarize the first part of a conversation")
}

// withSummaryUsage is turns with the answers to summary requests reporting
// u; the other answers report no tokens, so that what a run counts is the
// summaries' alone.
func withSummaryUsage(turns []testenv.Turn, u testenv.TokenUsage) []testenv.Turn {
	for i, turn := range turns {
		respond := turn.Respond
		turns[i].Respond = func(req testenv.ModelRequest) testenv.Turn {
			out := respond(req)
			if isSummaryRequest(req) {
				out.Usage = u
			}
			return out
		}
	}
	return turns
}

// TestRunChargesCompactionSummaries: the tokens and cost of the summary
// requests are the session's usage, reported at the end and journaled,
// though they are no requests of its own.
func TestRunChargesCompactionSummaries(t *testing.T) {
	t.Parallel()
	const window = 16_000
	summary := usage(3_000, 400)
	e := newE2E(t, withSummaryUsage(buildSteps(12), summary)...)
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
	out := e.run("run", "--events-jsonl", "--context-window", fmt.Sprint(window), "Build every step.")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	summaries, own := 0, 0
	for _, req := range e.model.Requests() {
		switch {
		case req.Turn == 0:
		case isSummaryRequest(req):
			summaries++
		default:
			own++
		}
	}
	if summaries == 0 {
		t.Fatal("no summary request: the run did not compact")
	}
	end := out.end(t)
	u := end.Usage
	n := int64(summaries)
	if u == nil || u.InputTokens != n*summary.InputTokens || u.OutputTokens != n*summary.OutputTokens || u.Requests != int64(own) {
		t.Fatalf("session usage %+v, want %d summaries' %d input and %d output tokens in %d requests",
			u, n, n*summary.InputTokens, n*summary.OutputTokens, own)
	}
	// claude-sonnet-4-5: $3 and $15 a million input and output tokens.
	if want := float64(n) * (3_000*3 + 400*15) / 1e6; math.Abs(u.CostUSD-want) > 1e-9 {
		t.Errorf("session cost $%v, want the summaries' $%v", u.CostUSD, want)
	}
	var last transcript.Usage
	for _, en := range e.entries(end.Session) {
		if ju, ok := en.Payload.(transcript.Usage); ok {
			last = ju
		}
	}
	if last.InputTokens != u.InputTokens || last.OutputTokens != u.OutputTokens || math.Abs(last.CostUSD-u.CostUSD) > 1e-9 {
		t.Errorf("last journaled usage %+v, want the session's %+v", last, *u)
	}
}

// TestRunCompactionSummaryTokenBudget: a summary's tokens count toward
// --max-tokens, so a summary that spends the budget ends the session
// before the request it was made for.
func TestRunCompactionSummaryTokenBudget(t *testing.T) {
	t.Parallel()
	const window = 16_000
	e := newE2E(t, withSummaryUsage(buildSteps(12), usage(3_000, 400))...)
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
	out := e.run("run", "--events-jsonl", "--context-window", fmt.Sprint(window), "--max-tokens", "3000", "Build every step.")
	if out.code != 4 {
		t.Fatalf("exit %d, want 4 (budget); stderr:\n%s", out.code, out.stderr)
	}
	end := out.end(t)
	if end.Outcome != transcript.OutcomeBudgetExceeded || !strings.Contains(end.Reason, "token budget of 3000 is spent (3400 used)") {
		t.Errorf("session end %s: %s, want the token budget spent by the summary", end.Outcome, end.Reason)
	}
	reqs := e.model.Requests()
	if len(reqs) == 0 || !isSummaryRequest(reqs[len(reqs)-1]) {
		t.Errorf("%d requests, the last not the summary: a request was made after the budget was spent", len(reqs))
	}
}

// TestRunChargesSubagentCompactionSummaries: a child's summaries are
// charged to the tree: the session's reported usage, the tree's, counts
// their tokens and cost.
func TestRunChargesSubagentCompactionSummaries(t *testing.T) {
	t.Parallel()
	const window = 16_000
	summary := usage(3_000, 400)
	// The child's requests are the builder's conversation's; once
	// compacted, they no longer start with its key and come to the main
	// script, which hands them on.
	child := withSummaryUsage(buildSteps(12), summary)
	var mu sync.Mutex
	root := 0
	respond := func(req testenv.ModelRequest) testenv.Turn {
		if !strings.Contains(string(req.Body), "Have the steps built.") {
			return child[0].Respond(req)
		}
		mu.Lock()
		defer mu.Unlock()
		if root++; root == 1 {
			return testenv.Turn{ToolCalls: []testenv.ToolCall{spawn("sa", "builder: build every step")}}
		}
		return testenv.Turn{Text: "The builder built every step."}
	}
	main := make([]testenv.Turn, len(child))
	for i := range main {
		main[i].Respond = respond
	}
	e := newE2E(t, main...)
	e.model.Conversation("builder:", child...)
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
	out := e.run("run", "--events-jsonl", "--context-window", fmt.Sprint(window), "Have the steps built.")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	for _, ev := range out.events {
		if ev.Type == events.SubagentStop && ev.Outcome != transcript.OutcomeCompleted {
			t.Fatalf("the child ended %s: %s", ev.Outcome, ev.Reason)
		}
	}
	summaries := 0
	for _, req := range e.model.Requests() {
		if req.Turn != 0 && isSummaryRequest(req) {
			summaries++
		}
	}
	if summaries == 0 {
		t.Fatal("no summary request: the child did not compact")
	}
	if log, err := os.ReadFile(filepath.Join(e.ws, "steps.log")); err != nil || strings.Count(string(log), "\n") != 12 {
		t.Fatalf("steps.log %q (%v), want the child's 12 steps", log, err)
	}
	n := int64(summaries)
	u := out.end(t).Usage
	t.Logf("%d summaries; tree usage %+v", n, *u)
	if u == nil || u.InputTokens != n*summary.InputTokens || u.OutputTokens != n*summary.OutputTokens {
		t.Fatalf("tree usage %+v, want %d summaries' %d input and %d output tokens", u, n, n*summary.InputTokens, n*summary.OutputTokens)
	}
	if want := float64(n) * (3_000*3 + 400*15) / 1e6; math.Abs(u.CostUSD-want) > 1e-9 {
		t.Errorf("tree cost $%v, want the summaries' $%v", u.CostUSD, want)
	}
}
