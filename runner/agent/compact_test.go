package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/provider/openai"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// build is a tool whose output is a long build log: each call's output
// is the step it was called for and resultBytes of log, and the tool
// counts the calls of each step.
type build struct {
	resultBytes int
	mu          sync.Mutex
	runs        map[int]int
}

func (*build) Name() string            { return "build" }
func (*build) Description() string     { return "run a build step" }
func (*build) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (b *build) Run(_ context.Context, call json.RawMessage) tools.Result {
	var args struct{ Step int }
	if err := json.Unmarshal(call, &args); err != nil {
		return tools.Result{Content: err.Error(), IsError: true}
	}
	b.mu.Lock()
	b.runs[args.Step]++
	b.mu.Unlock()
	return tools.Result{Content: fmt.Sprintf("step %d\n%s", args.Step, strings.Repeat("log line\n", b.resultBytes/9))}
}

// longTask is a model that builds steps one after the other, then ends,
// and answers the summary requests: each turn of the fake server looks at
// the request it answers.
func longTask(steps int, summary string) []testenv.Turn {
	var mu sync.Mutex
	step := 0
	respond := func(req testenv.ModelRequest) testenv.Turn {
		if strings.Contains(string(req.Body), "You summarize the first part of a conversation") {
			return testenv.Turn{Text: summary}
		}
		mu.Lock()
		defer mu.Unlock()
		step++
		if step > steps {
			return testenv.Turn{Text: "All steps built."}
		}
		return testenv.Turn{ToolCalls: []testenv.ToolCall{{Name: "build", Arguments: fmt.Sprintf(`{"step":%d}`, step)}}}
	}
	turns := make([]testenv.Turn, 2*steps+1)
	for i := range turns {
		turns[i].Respond = respond
	}
	return turns
}

// compactions are the compaction checkpoints the recorder holds, each
// checked against the entries: it keeps a message's entry, after it began.
func compactions(t *testing.T, r *recorder) []transcript.Compaction {
	t.Helper()
	var out []transcript.Compaction
	for i, p := range r.entries {
		c, ok := p.(transcript.Compaction)
		if !ok {
			continue
		}
		out = append(out, c)
		seq := int64(i + 1)
		if c.FirstKept < 1 || c.FirstKept > seq {
			t.Errorf("compaction %d keeps from %d", seq, c.FirstKept)
			continue
		}
		switch k := r.entries[c.FirstKept-1].EntryKind(); {
		case c.FirstKept == seq:
		case k == transcript.KindUserMessage, k == transcript.KindAssistantMessage:
		default:
			t.Errorf("compaction %d keeps from entry %d, a %s", seq, c.FirstKept, k)
		}
		if c.Provenance.TokensAfter >= c.Provenance.TokensBefore || c.Provenance.Messages < compaction.MinRemoved {
			t.Errorf("compaction %d: provenance %+v", seq, c.Provenance)
		}
	}
	return out
}

func checkEveryStepOnce(t *testing.T, b *build, steps int) {
	t.Helper()
	for s := 1; s <= steps; s++ {
		if n := b.runs[s]; n != 1 {
			t.Errorf("step %d ran %d times", s, n)
		}
	}
}

// TestLoopCompactsLongTask runs a task whose tool outputs add up to several
// windows: automatic compaction keeps every request within the window.
func TestLoopCompactsLongTask(t *testing.T) {
	t.Parallel()
	const steps, window = 60, 32_000
	ms := testenv.StartModelServer(t, longTask(steps, "Steps built so far: all those above.")...)
	ms.SetContextWindow(testenv.ContextWindow{Tokens: window})
	model, err := anthropic.New(provider.Config{Provider: "anthropic", Model: "claude-test", APIKey: "k", BaseURL: ms.URL(), MaxOutputTokens: 4_000})
	if err != nil {
		t.Fatal(err)
	}
	b := &build{resultBytes: 6_000, runs: map[int]int{}}
	reg, err := tools.NewRegistry(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	policy := compaction.New(compaction.Config{Window: compaction.UsableWindow(window, 4_000), Summarizer: model, Provider: "anthropic", Model: "claude-test"})
	rec := &recorder{}
	var reported []events.Event
	observe := func(e events.Event) {
		if e.Type == events.Compaction {
			reported = append(reported, e)
		}
	}
	r := New(Config{Model: model, Tools: reg, Journal: rec, System: "You build.", Compactor: policy, Observe: observe}, nil, transcript.Usage{}).Run(t.Context(), "Build every step.")
	if r.Outcome != transcript.OutcomeCompleted || r.Answer != "All steps built." {
		t.Fatalf("outcome %s: %s (%v)", r.Outcome, r.Reason, r.Err)
	}
	checkEveryStepOnce(t, b, steps)
	cs := compactions(t, rec)
	if len(cs) < 3 {
		t.Errorf("%d compactions for %d steps of %d bytes in a %d-token window", len(cs), steps, b.resultBytes, window)
	}
	for _, c := range cs {
		if c.Provenance.Trigger != "auto" {
			t.Errorf("a %s compaction", c.Provenance.Trigger)
		}
	}
	if len(reported) != len(cs) {
		t.Fatalf("%d compaction events for %d checkpoints", len(reported), len(cs))
	}
	for i, e := range reported {
		if p := e.Compaction; e.Seq == 0 || p == nil || p.Trigger != "auto" || p.Messages != cs[i].Provenance.Messages || p.TokensAfter >= p.TokensBefore {
			t.Errorf("compaction event %d: seq %d, %+v; checkpoint %+v", i, e.Seq, p, cs[i].Provenance)
		}
	}
	for i, req := range ms.Requests() {
		if req.Overflow {
			t.Errorf("request %d (%d tokens) overflowed the window", i+1, req.Tokens)
		}
	}
}

// TestLoopRecoversFromOverflow runs the same task with the window unknown
// to aerie, through an OpenAI-compatible server (vLLM): each overflow is
// compacted and the request sent once more.
func TestLoopRecoversFromOverflow(t *testing.T) {
	t.Parallel()
	const steps, window = 40, 16_000
	ms := testenv.StartModelServer(t, longTask(steps, "Steps built so far: all those above.")...)
	ms.SetContextWindow(testenv.ContextWindow{Tokens: window, Server: testenv.ServerVLLM})
	model, err := openai.New(provider.Config{Provider: "openai-compatible", Model: "qwen-test", BaseURL: ms.OpenAIURL()})
	if err != nil {
		t.Fatal(err)
	}
	b := &build{resultBytes: 6_000, runs: map[int]int{}}
	reg, err := tools.NewRegistry(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	policy := compaction.New(compaction.Config{Summarizer: model}) // the window unknown
	rec := &recorder{}
	r := New(Config{Model: model, Tools: reg, Journal: rec, Compactor: policy}, nil, transcript.Usage{}).Run(t.Context(), "Build every step.")
	if r.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("outcome %s: %s (%v)", r.Outcome, r.Reason, r.Err)
	}
	checkEveryStepOnce(t, b, steps)
	cs := compactions(t, rec)
	overflows := 0
	for _, req := range ms.Requests() {
		if req.Overflow {
			overflows++
		}
	}
	if len(cs) < 2 || overflows != len(cs) {
		t.Errorf("%d compactions for %d overflows", len(cs), overflows)
	}
	for _, c := range cs {
		if c.Provenance.Trigger != "overflow" {
			t.Errorf("a %s compaction", c.Provenance.Trigger)
		}
	}
}

// TestLoopOverflowTwice: when the compacted conversation still overflows,
// the run is a model error that says so.
func TestLoopOverflowTwice(t *testing.T) {
	t.Parallel()
	const window = 4_000
	// A summary larger than the window.
	ms := testenv.StartModelServer(t, longTask(10, strings.Repeat("a summary far too long ", 1_000))...)
	ms.SetContextWindow(testenv.ContextWindow{Tokens: window})
	model, err := anthropic.New(provider.Config{Provider: "anthropic", Model: "claude-test", APIKey: "k", BaseURL: ms.URL()})
	if err != nil {
		t.Fatal(err)
	}
	b := &build{resultBytes: 3_000, runs: map[int]int{}}
	reg, err := tools.NewRegistry(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{Model: model, Tools: reg, Journal: &recorder{}, Compactor: compaction.New(compaction.Config{Summarizer: model})}, nil, transcript.Usage{}).Run(t.Context(), "Build every step.")
	if r.Outcome != transcript.OutcomeModelError || !strings.Contains(r.Reason, "still exceeds the model's context window after the conversation was compacted") {
		t.Errorf("outcome %s: %s", r.Outcome, r.Reason)
	}
}

// TestLoopCompactionFailureKeepsContext: a summarizer that fails leaves
// the conversation as it was, with a warning, and the run goes on.
func TestLoopCompactionFailureKeepsContext(t *testing.T) {
	t.Parallel()
	turns := []provider.Response{echoTurn(strings.Repeat("x", 4_000)), echoTurn("y"), echoTurn("z"), textTurn("done")}
	for i := range turns {
		turns[i].Usage = provider.Usage{} // no count of the provider's: the estimate decides
	}
	model := provider.NewScripted("s", turns)
	failing := provider.NewScripted("summarizer", nil) // no turn: every request fails
	var warnings []string
	rec := &recorder{}
	l := New(Config{
		Model: model, Tools: registry(t, echo{}), Journal: rec,
		Compactor: compaction.New(compaction.Config{Window: 1_000, Summarizer: failing, SummaryTimeout: time.Second}),
		Observe: func(e events.Event) {
			if e.Type == events.Warning {
				warnings = append(warnings, e.Reason)
			}
		},
	}, nil, transcript.Usage{})
	r := l.Run(t.Context(), "go")
	if r.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("outcome %s: %s", r.Outcome, r.Reason)
	}
	if len(warnings) == 0 || !strings.Contains(warnings[0], "compaction: ") {
		t.Errorf("warnings %q, want the failed compaction's", warnings)
	}
	if len(compactions(t, rec)) != 0 {
		t.Error("a compaction was journaled")
	}
	if got := len(l.Messages()); got != 8 {
		t.Errorf("%d messages, want the whole conversation, 8", got)
	}
}

// cutAt is a Compactor that compacts once, before the first request, at a
// fixed index.
type cutAt struct {
	index int
	// usage is what its summary used.
	usage provider.Usage
	done  bool
}

func (c *cutAt) Before(_ context.Context, msgs []provider.Message, _ transcript.Usage) (compaction.Result, bool, error) {
	if c.done {
		return compaction.Result{}, false, nil
	}
	c.done = true
	out := append([]provider.Message{provider.UserMessage("summary")}, msgs[c.index:]...)
	return compaction.Result{
		Messages: out, Cut: compaction.Cut{Index: c.index}, Replacement: "summary",
		Provenance: transcript.Provenance{Trigger: "manual"}, Usage: c.usage,
	}, true, nil
}

func (c *cutAt) Overflow(context.Context, []provider.Message) (compaction.Result, error) {
	return compaction.Result{}, compaction.ErrNoCut
}

func (c *cutAt) Manual(context.Context, []provider.Message, string) (compaction.Result, error) {
	return compaction.Result{}, compaction.ErrNoCut
}

// resumedHistory is the conversation of a stored session of three
// exchanges, journaled from entry 100 on, and its entries' numbers.
func resumedHistory() ([]provider.Message, []int64) {
	text := func(s string) []transcript.Block { return []transcript.Block{{Type: transcript.BlockText, Text: s}} }
	var es []transcript.Entry
	for i, p := range []transcript.Payload{
		transcript.UserMessage{Content: text("one")},
		transcript.AssistantMessage{Content: text("1")},
		transcript.UserMessage{Content: text("two")},
		transcript.AssistantMessage{Content: text("2")},
		transcript.Usage{Requests: 2},
		transcript.UserMessage{Content: text("three")},
		transcript.AssistantMessage{Content: text("3")},
	} {
		es = append(es, transcript.Entry{Seq: int64(100 + i), Payload: p})
	}
	return HistoryWithSeqs(transcript.Snapshot{Entries: es})
}

// TestLoopCountsSummaryUsage: what a compaction's summary used is the
// session's usage, journaled, though no request of its own; a summary
// that spends the token budget ends the run before the next request.
func TestLoopCountsSummaryUsage(t *testing.T) {
	t.Parallel()
	history, seqs := resumedHistory()
	start := transcript.Usage{InputTokens: 50, OutputTokens: 5, Requests: 2}
	summary := provider.Usage{InputTokens: 400, OutputTokens: 40, CostUSD: 0.002}
	rec := &recorder{}
	done := textTurn("done")
	done.Usage = provider.Usage{InputTokens: 10, OutputTokens: 1}
	l := New(Config{
		Model: provider.NewScripted("s", []provider.Response{done}), Journal: rec,
		Compactor: &cutAt{index: 4, usage: summary}, HistorySeqs: seqs,
	}, history, start)
	r := l.Run(t.Context(), "")
	want := transcript.Usage{InputTokens: 460, OutputTokens: 46, CostUSD: 0.002, Requests: 3, ContextTokens: 11}
	if r.Outcome != transcript.OutcomeCompleted || r.Usage != want {
		t.Fatalf("outcome %s (%s), usage %+v; want completed with %+v", r.Outcome, r.Reason, r.Usage, want)
	}
	var journaled []transcript.Usage
	for _, p := range rec.entries {
		if u, ok := p.(transcript.Usage); ok {
			journaled = append(journaled, u)
		}
	}
	if len(journaled) != 2 || journaled[0].InputTokens != 450 || journaled[0].Requests != 2 {
		t.Errorf("journaled usage %+v, want the summary's first, then the response's", journaled)
	}

	// No response is scripted: a request would fail the run.
	l = New(Config{
		Model: provider.NewScripted("s", nil), Journal: &recorder{}, Stop: []StopCondition{MaxTokens(400)},
		Compactor: &cutAt{index: 4, usage: summary}, HistorySeqs: seqs,
	}, history, start)
	if r := l.Run(t.Context(), ""); r.Outcome != transcript.OutcomeBudgetExceeded || r.Usage.InputTokens != 450 {
		t.Errorf("outcome %s (%s), usage %+v; want the budget spent by the summary", r.Outcome, r.Reason, r.Usage)
	}
}

// TestLoopCompactsResumedHistory: a compaction that keeps messages of the
// history journals the entry of the first one kept, which HistorySeqs
// gives; without them it is not made.
func TestLoopCompactsResumedHistory(t *testing.T) {
	t.Parallel()
	history, seqs := resumedHistory()

	rec := &recorder{}
	l := New(Config{Model: provider.NewScripted("s", []provider.Response{textTurn("done")}), Journal: rec, Compactor: &cutAt{index: 4}, HistorySeqs: seqs}, history, transcript.Usage{})
	if r := l.Run(t.Context(), ""); r.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("outcome %s: %s", r.Outcome, r.Reason)
	}
	cs := []transcript.Compaction{}
	for _, p := range rec.entries {
		if c, ok := p.(transcript.Compaction); ok {
			cs = append(cs, c)
		}
	}
	if len(cs) != 1 || cs[0].FirstKept != 105 {
		t.Errorf("compactions %+v, want one keeping from entry 105 (\"three\")", cs)
	}
	if got := l.Messages(); len(got) != 4 || got[0].Text() != "summary" || got[1].Text() != "three" {
		t.Errorf("conversation %+v", got)
	}

	// Without the sequence numbers, the compaction is not made.
	var warnings []string
	l = New(Config{Model: provider.NewScripted("s", []provider.Response{textTurn("done")}), Journal: &recorder{}, Compactor: &cutAt{index: 4},
		Observe: func(e events.Event) {
			if e.Type == events.Warning {
				warnings = append(warnings, e.Reason)
			}
		}}, history, transcript.Usage{})
	if r := l.Run(t.Context(), ""); r.Outcome != transcript.OutcomeCompleted || len(l.Messages()) != 7 || len(warnings) != 1 {
		t.Errorf("outcome %s, %d messages, warnings %q", r.Outcome, len(l.Messages()), warnings)
	}
}
