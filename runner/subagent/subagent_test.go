package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

func TestAdmitRefusesPastEachLimit(t *testing.T) {
	tree := NewTree(Limits{MaxConcurrent: 2, MaxDepth: 2, MaxTotal: 3}, NewLedger(transcript.Usage{}, nil))
	if _, err := tree.admit(2, uuid.New(), ""); err == nil || !strings.Contains(err.Error(), "max_depth 2 reached") {
		t.Errorf("admit at depth 2 = %v, want max_depth refused", err)
	}
	r1, err := tree.admit(0, uuid.New(), "")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := tree.admit(1, uuid.New(), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tree.admit(0, uuid.New(), "")
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "max_concurrent" || !errors.Is(err, ErrLimit) ||
		!strings.Contains(err.Error(), "max_concurrent 2 reached") {
		t.Errorf("third running = %v, want max_concurrent refused", err)
	}
	r1()
	r1() // releasing twice frees one place
	r3, err := tree.admit(0, uuid.New(), "")
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	r2()
	r3()
	if _, err := tree.admit(0, uuid.New(), ""); err == nil || !strings.Contains(err.Error(), "max_total 3 reached") {
		t.Errorf("fourth = %v, want max_total refused", err)
	}
	if got := tree.Spawned(); got != 3 {
		t.Errorf("Spawned() = %d, want 3", got)
	}
	if got := tree.Ledger().Totals().Subagents; got != 3 {
		t.Errorf("ledger subagents = %d, want 3", got)
	}
}

// TestAdmitCountsAChildOnce: a stored child, and one admitted again (a
// resumed one), count once toward max_total.
func TestAdmitCountsAChildOnce(t *testing.T) {
	stored, resumed := uuid.New(), uuid.New()
	tree := NewTree(Limits{MaxConcurrent: 4, MaxDepth: 2, MaxTotal: 2}, NewLedger(transcript.Usage{}, nil), stored, stored)
	r, err := tree.admit(0, resumed, "")
	if err != nil {
		t.Fatal(err)
	}
	r()
	if _, err := tree.admit(0, uuid.New(), ""); err == nil || !strings.Contains(err.Error(), "max_total 2 reached") {
		t.Errorf("a third child = %v, want max_total refused", err)
	}
	for _, id := range []uuid.UUID{stored, resumed} {
		r, err := tree.admit(0, id, "")
		if err != nil {
			t.Errorf("child %s admitted again: %v", id, err)
			continue
		}
		r()
	}
	if got := tree.Spawned(); got != 2 {
		t.Errorf("Spawned() = %d, want 2", got)
	}
}

func TestChildID(t *testing.T) {
	parent := uuid.New()
	a, b := ChildID(parent, "call_1"), ChildID(parent, "call_1")
	if a != b || a.Version() != 5 {
		t.Errorf("ChildID = %s, %s; want one version-5 id", a, b)
	}
	if ChildID(parent, "call_2") == a || ChildID(uuid.New(), "call_1") == a {
		t.Error("ChildID is the same for another call or parent")
	}
	if r1, r2 := ChildID(parent, ""), ChildID(parent, ""); r1 == r2 {
		t.Error("ChildID of no call is not random")
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Error(err)
	}
	err := Limits{MaxDepth: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "subagents.max_depth -1") {
		t.Errorf("Validate() = %v, want the key named", err)
	}
}

// finishing is a model whose every response ends with usage u.
type finishing struct{ u provider.Usage }

func (f finishing) Stream(context.Context, provider.Request) iter.Seq2[provider.Part, error] {
	return func(yield func(provider.Part, error) bool) {
		if !yield(provider.Part{Type: provider.PartTextDelta, Text: "x"}, nil) {
			return
		}
		yield(provider.Part{Type: provider.PartFinish, Usage: f.u, StopReason: provider.StopEndTurn}, nil)
	}
}

// TestLedgerChargesAcrossLoops: concurrent loops charging one ledger stop
// on the tree's totals, whatever their own usage.
func TestLedgerChargesAcrossLoops(t *testing.T) {
	l := NewLedger(transcript.Usage{InputTokens: 100, Requests: 1}, []agent.StopCondition{agent.MaxTokens(1000)})
	m := l.Model(finishing{u: provider.Usage{InputTokens: 40, OutputTokens: 10}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2 {
				for _, err := range m.Stream(t.Context(), provider.Request{}) {
					if err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	tot := l.Totals()
	if tot.Usage.InputTokens != 100+16*40 || tot.Usage.OutputTokens != 160 || tot.Usage.Requests != 17 || tot.Turns != 16 {
		t.Fatalf("totals %+v", tot)
	}
	if _, _, stop := l.Stop()(agent.Status{}); stop {
		t.Errorf("stopped at %d tokens of 1000", 100+16*50)
	}
	l.Charge(provider.Usage{InputTokens: 200})
	out, reason, stop := l.Stop()(agent.Status{})
	if !stop || out != transcript.OutcomeBudgetExceeded || !strings.Contains(reason, "token budget of 1000") {
		t.Errorf("Stop() = %q, %q, %v; want the budget spent", out, reason, stop)
	}
}

// TestLedgerChargesToolModel: the responses of a model outside the loops'
// requests (the compaction summarizer) count toward the token and cost
// budgets, and are no requests or turns of the tree.
func TestLedgerChargesToolModel(t *testing.T) {
	t.Parallel()
	l := NewLedger(transcript.Usage{InputTokens: 100, Requests: 1},
		[]agent.StopCondition{agent.MaxTokens(1000), agent.MaxCostUSD(0.5)})
	m := l.ToolModel(finishing{u: provider.Usage{InputTokens: 300, OutputTokens: 50, CacheReadTokens: 20, CostUSD: 0.2}})
	for range 2 {
		for _, err := range m.Stream(t.Context(), provider.Request{}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	want := transcript.Usage{InputTokens: 700, OutputTokens: 100, CacheReadTokens: 40, CostUSD: 0.4, Requests: 1}
	if tot := l.Totals(); tot.Usage != want || tot.Turns != 0 {
		t.Fatalf("totals %+v, want usage %+v and no turns", tot, want)
	}
	if _, _, stop := l.Stop()(agent.Status{}); stop {
		t.Fatalf("stopped at 800 tokens of 1000 and $0.40 of $0.50")
	}
	l.ChargeTool(provider.Usage{CostUSD: 0.1})
	out, reason, stop := l.Stop()(agent.Status{})
	if !stop || out != transcript.OutcomeBudgetExceeded || !strings.Contains(reason, "0.5") {
		t.Errorf("Stop() = %q, %q, %v; want the cost budget spent", out, reason, stop)
	}
}

func TestChildrenWait(t *testing.T) {
	var c Children
	c.Wait(t.Context()) // none: returns at once
	a, b := uuid.New(), uuid.New()
	c.add(a)
	c.add(b)
	if got := c.Active(); len(got) != 2 {
		t.Fatalf("Active() = %v", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	c.Wait(ctx) // gives up with ctx
	done := make(chan struct{})
	go func() { c.Wait(t.Context()); close(done) }()
	c.done(a)
	c.done(b)
	<-done
	if got := c.Active(); len(got) != 0 {
		t.Errorf("Active() = %v after both ended", got)
	}
}

type fakeSpawner struct {
	got Request
	out Outcome
	err error
}

func (f *fakeSpawner) Spawn(_ context.Context, req Request) (Outcome, error) {
	f.got = req
	if f.err == nil {
		req.Started(f.out.Session)
	}
	return f.out, f.err
}

func TestToolResult(t *testing.T) {
	id := uuid.New()
	sp := &fakeSpawner{out: Outcome{Session: id, Result: agent.Result{
		Outcome: transcript.OutcomeCompleted, Answer: "the answer", Turns: 3,
		Usage: transcript.Usage{InputTokens: 1200, OutputTokens: 34, Requests: 3},
	}}}
	children := &Children{}
	parent := uuid.New()
	tool := NewTool(NewTree(DefaultLimits(), NewLedger(transcript.Usage{}, nil)), 1, parent, sp, children)
	res := tool.Run(tools.WithCallID(t.Context(), "call_7"), json.RawMessage(`{"task":"do it","agent_type":"reviewer","max_turns":4}`))
	if res.IsError || res.Content != "the answer\n\noutcome: completed · 3 turns · 1,234 tokens · session "+id.String() {
		t.Errorf("result %+v", res)
	}
	if sp.got.Task != "do it" || sp.got.AgentType != "reviewer" || sp.got.MaxTurns != 4 || sp.got.Depth != 2 ||
		sp.got.ID != ChildID(parent, "call_7") || sp.got.CallID != "call_7" {
		t.Errorf("request %+v", sp.got)
	}
	o, ok := res.Entries[0].(transcript.SubagentOutcome)
	if !ok || o.Session != id || o.AgentType != "reviewer" || o.Usage.Requests != 3 || !strings.HasPrefix(o.AnswerDigest, "sha256:") {
		t.Errorf("entry %#v", res.Entries)
	}
	if len(children.Active()) != 0 {
		t.Errorf("a child is still active after the call")
	}

	for call, want := range map[string]string{
		`{}`:                          `missing required argument "task"`,
		`{"task":"x","bogus":1}`:      "invalid arguments",
		`{"task":"x","max_turns":-1}`: "max_turns -1",
	} {
		if r := tool.Run(t.Context(), json.RawMessage(call)); !r.IsError || !strings.Contains(r.Content, want) {
			t.Errorf("Run(%s) = %+v, want an error with %q", call, r, want)
		}
	}
	sp.err = errors.New(`unknown agent_type "x"`)
	if r := tool.Run(t.Context(), json.RawMessage(`{"task":"x"}`)); !r.IsError || !strings.Contains(r.Content, "unknown agent_type") {
		t.Errorf("Run() = %+v, want the spawner's error", r)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzParseArgs: any arguments give either a task or an error, never a
// panic.
func FuzzParseArgs(f *testing.F) {
	f.Add([]byte(`{"task":"x","max_turns":3}`))
	f.Add([]byte(`{"task":""}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseArgs(b)
		if err == nil && strings.TrimSpace(a.Task) == "" {
			t.Errorf("parseArgs(%q) accepted an empty task", b)
		}
	})
}

// TestLedgerTurnsFromStart: the tree's turn budget counts the requests of
// the start usage (a resumed tree's stored ones) with those charged since.
func TestLedgerTurnsFromStart(t *testing.T) {
	t.Parallel()
	l := NewLedger(transcript.Usage{Requests: 3}, []agent.StopCondition{agent.MaxTurns(5)})
	l.Charge(provider.Usage{InputTokens: 1})
	if _, _, stop := l.Stop()(agent.Status{}); stop {
		t.Fatalf("stopped after 4 of 5 turns")
	}
	l.ChargeChild("", provider.Usage{InputTokens: 1})
	out, reason, stop := l.Stop()(agent.Status{})
	if !stop || out != transcript.OutcomeBudgetExceeded || !strings.Contains(reason, "turn budget of 5") {
		t.Errorf("Stop after 3 stored and 2 new turns = %q, %q, %v; want the turn budget of 5 spent", out, reason, stop)
	}
	if tot := l.Totals(); tot.Turns != 2 || tot.Usage.Requests != 5 {
		t.Errorf("totals %+v, want 2 turns in this run and 5 requests in all", tot)
	}
}

// TestLedgerByAgentType: each child's responses count toward its agent
// type as well as the tree; the root's count toward the tree only, and a
// child without agent_type counts under the default persona's name.
func TestLedgerByAgentType(t *testing.T) {
	l := NewLedger(transcript.Usage{}, nil)
	tree := NewTree(DefaultLimits(), l)
	u := provider.Usage{InputTokens: 40, OutputTokens: 10}
	for _, typ := range []string{"reviewer", "reviewer", ""} {
		if _, err := tree.admit(0, uuid.New(), typ); err != nil {
			t.Fatal(err)
		}
		for _, err := range l.ChildModel(typ, finishing{u: u}).Stream(t.Context(), provider.Request{}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	l.Charge(u)
	tot := l.Totals()
	if tot.Usage.InputTokens != 160 || tot.Turns != 4 || tot.Subagents != 3 {
		t.Fatalf("totals %+v, want the tree's 4 responses and 3 children", tot)
	}
	want := []AgentType{
		{Name: "default", Subagents: 1, Turns: 1, Usage: transcript.Usage{InputTokens: 40, OutputTokens: 10, Requests: 1}},
		{Name: "reviewer", Subagents: 2, Turns: 2, Usage: transcript.Usage{InputTokens: 80, OutputTokens: 20, Requests: 2}},
	}
	if !slices.Equal(tot.AgentTypes, want) {
		t.Errorf("AgentTypes = %+v, want %+v", tot.AgentTypes, want)
	}
}

func TestCapAgentTypes(t *testing.T) {
	var types []AgentType
	for i := range 10 {
		types = append(types, AgentType{
			Name: fmt.Sprintf("t%02d", i), Subagents: 1, Turns: 2,
			Usage: transcript.Usage{InputTokens: int64(10 * (i + 1)), Requests: 2},
		})
	}
	if got := CapAgentTypes(types[:8], 8); len(got) != 8 || got[7].Name != "t07" {
		t.Errorf("8 types capped at 8 = %+v, want them as they are", got)
	}
	got := CapAgentTypes(types, 8)
	if len(got) != 8 {
		t.Fatalf("%d entries, want 8", len(got))
	}
	// The 7 that used the most (t03..t09), then t00..t02 folded.
	if got[0].Name != "t03" || got[6].Name != "t09" {
		t.Errorf("kept %+v, want t03..t09", got[:7])
	}
	other := got[7]
	if other.Name != OtherAgentTypes || other.Subagents != 3 || other.Turns != 6 ||
		other.Usage.InputTokens != 10+20+30 || other.Usage.Requests != 6 {
		t.Errorf("folded %+v, want t00..t02's sums under %s", other, OtherAgentTypes)
	}
	var sum int64
	for _, a := range got {
		sum += a.Usage.InputTokens
	}
	if sum != 550 {
		t.Errorf("capped entries sum to %d tokens, want all 550", sum)
	}
}

// TestSuspended: a child that paused for approval, or that stopped because
// its run did, goes on when the session resumes; any other end is its
// outcome, delivered.
func TestSuspended(t *testing.T) {
	t.Parallel()
	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		outcome transcript.Outcome
		want    bool
	}{
		{"awaiting approval", t.Context(), transcript.OutcomeAwaitingApproval, true},
		{"stopped with its run", stopped, transcript.OutcomeCancelled, true},
		{"cancelled while its run goes on", t.Context(), transcript.OutcomeCancelled, false},
		{"completed", stopped, transcript.OutcomeCompleted, false},
		{"budget spent", t.Context(), transcript.OutcomeBudgetExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Suspended(tt.ctx, agent.Result{Outcome: tt.outcome}); got != tt.want {
				t.Errorf("Suspended = %v, want %v", got, tt.want)
			}
		})
	}
}
