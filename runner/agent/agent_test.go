package agent

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

	"github.com/aerie-run/aerie/runner/events"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// recorder is a journal that keeps the entries in memory, for the loop's
// unit tests; the journal itself is tested against real databases.
type recorder struct {
	mu      sync.Mutex
	entries []transcript.Payload
	// durable counts the entries appended before the last barrier.
	durable int
	// barrier, when set, is what Barrier returns after it is called.
	barrier func(ctx context.Context) error
}

func (r *recorder) Append(p transcript.Payload) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, p)
	return int64(len(r.entries))
}

func (r *recorder) Barrier(ctx context.Context) error {
	r.mu.Lock()
	r.durable = len(r.entries)
	r.mu.Unlock()
	if r.barrier != nil {
		return r.barrier(ctx)
	}
	return nil
}

// statuses are the statuses of the tool completions recorded.
func (r *recorder) statuses() []transcript.ToolStatus {
	var out []transcript.ToolStatus
	for _, p := range r.entries {
		if c, ok := p.(transcript.ToolCompletion); ok {
			out = append(out, c.Status)
		}
	}
	return out
}

func (r *recorder) kinds() []transcript.EntryKind {
	var ks []transcript.EntryKind
	for _, p := range r.entries {
		ks = append(ks, p.EntryKind())
	}
	return ks
}

// echo is a tool that returns its "text" argument, and calls hook first.
// Its results claim a command's time of process, to check that the loop
// reports it.
type echo struct{ hook func(ctx context.Context) }

const echoProcess = 3 * time.Millisecond

func (echo) Name() string            { return "echo" }
func (echo) Description() string     { return "echo text" }
func (echo) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (e echo) Run(ctx context.Context, call json.RawMessage) tools.Result {
	if e.hook != nil {
		e.hook(ctx)
	}
	var args struct{ Text string }
	if err := json.Unmarshal(call, &args); err != nil {
		return tools.Result{Content: err.Error(), IsError: true}
	}
	return tools.Result{Content: args.Text, Process: echoProcess}
}

func registry(t *testing.T, e echo) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func echoTurn(texts ...string) provider.Response {
	var cs []provider.Content
	for i, s := range texts {
		args, _ := json.Marshal(map[string]string{"text": s})
		cs = append(cs, provider.ToolCall(string(rune('a'+i)), "echo", string(args)))
	}
	return provider.Response{Message: provider.Message{Role: provider.RoleAssistant, Content: cs}, StopReason: provider.StopToolUse, Usage: provider.Usage{InputTokens: 10, OutputTokens: 2}}
}

func textTurn(s string) provider.Response {
	return provider.Response{Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text(s)}}, StopReason: provider.StopEndTurn, Usage: provider.Usage{InputTokens: 20, OutputTokens: 3}}
}

func TestLoopJournalsEveryStep(t *testing.T) {
	t.Parallel()
	j := &recorder{}
	var evs []events.Type
	l := New(Config{
		Model:   provider.NewScripted("s", []provider.Response{echoTurn("one", "two"), textTurn("done")}),
		Tools:   registry(t, echo{}),
		Journal: j,
		System:  "be brief",
		Observe: func(e events.Event) {
			evs = append(evs, e.Type)
			if e.Type == events.ToolResult && e.Process != echoProcess {
				t.Errorf("tool_result reports a process time of %v, want the tool's %v", e.Process, echoProcess)
			}
		},
	}, nil, transcript.Usage{})
	r := l.Run(t.Context(), "go")
	if r.Outcome != transcript.OutcomeCompleted || r.Answer != "done" || r.Turns != 2 {
		t.Fatalf("result = %+v", r)
	}
	if want := (transcript.Usage{InputTokens: 30, OutputTokens: 5, Requests: 2, ContextTokens: 23}); r.Usage != want {
		t.Errorf("usage = %+v, want %+v", r.Usage, want)
	}
	want := []transcript.EntryKind{
		transcript.KindUserMessage, transcript.KindAssistantMessage, transcript.KindUsage,
		transcript.KindToolCall, transcript.KindToolResult, transcript.KindToolCompletion,
		transcript.KindToolCall, transcript.KindToolResult, transcript.KindToolCompletion,
		transcript.KindAssistantMessage, transcript.KindUsage, transcript.KindCheckpoint,
	}
	if diff := cmp.Diff(want, j.kinds()); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if !slices.Contains(evs, events.ToolResult) || evs[len(evs)-1] != events.End {
		t.Errorf("events = %v", evs)
	}
	msgs := l.Messages()
	if len(msgs) != 4 || msgs[2].Role != provider.RoleTool || len(msgs[2].Content) != 2 {
		t.Errorf("conversation = %+v", msgs)
	}
}

// TestLoopPromptJournaledBefore: a prompt journaled before the run (a new
// session's, stored with the session) is sent and reported with its
// sequence number, and not journaled again.
func TestLoopPromptJournaledBefore(t *testing.T) {
	t.Parallel()
	j := &recorder{}
	model := &requests{Model: provider.NewScripted("s", []provider.Response{textTurn("done")})}
	var prompted []events.Event
	l := New(Config{
		Model: model, Journal: j, PromptSeq: 7,
		Observe: func(e events.Event) {
			if e.Type == events.UserMessage {
				prompted = append(prompted, e)
			}
		},
	}, nil, transcript.Usage{})
	if r := l.Run(t.Context(), "go"); r.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("result = %+v", r)
	}
	want := []transcript.EntryKind{transcript.KindAssistantMessage, transcript.KindUsage, transcript.KindCheckpoint}
	if diff := cmp.Diff(want, j.kinds()); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if len(prompted) != 1 || prompted[0].Seq != 7 || prompted[0].Text != "go" {
		t.Errorf("user_message events %+v, want one of sequence number 7", prompted)
	}
	if len(model.got) != 1 || len(model.got[0].Messages) != 1 || model.got[0].Messages[0].Text() != "go" {
		t.Errorf("requests %+v, want one with the prompt", model.got)
	}
}

func TestLoopStopConditions(t *testing.T) {
	t.Parallel()
	turns := []provider.Response{echoTurn("x"), echoTurn("x"), echoTurn("x"), textTurn("done")}
	tests := []struct {
		name    string
		stop    []StopCondition
		prior   transcript.Usage
		outcome transcript.Outcome
		turns   int
	}{
		{"no budget", nil, transcript.Usage{}, transcript.OutcomeCompleted, 4},
		{"session turns", []StopCondition{MaxSessionTurns(3)}, transcript.Usage{}, transcript.OutcomeBudgetExceeded, 3},
		// A resumed session with two requests behind it has one left.
		{"session turns after a resume", []StopCondition{MaxSessionTurns(3)}, transcript.Usage{Requests: 2}, transcript.OutcomeBudgetExceeded, 1},
		{"session turns spent before", []StopCondition{MaxSessionTurns(3)}, transcript.Usage{Requests: 3}, transcript.OutcomeBudgetExceeded, 0},
		{"turns", []StopCondition{MaxTurns(2)}, transcript.Usage{}, transcript.OutcomeBudgetExceeded, 2},
		{"tokens", []StopCondition{MaxTokens(24)}, transcript.Usage{}, transcript.OutcomeBudgetExceeded, 2},
		{"the first that fires", []StopCondition{MaxTurns(3), MaxTokens(1)}, transcript.Usage{}, transcript.OutcomeBudgetExceeded, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := New(Config{Model: provider.NewScripted("s", turns), Tools: registry(t, echo{}), Stop: tt.stop}, nil, tt.prior)
			r := l.Run(t.Context(), "go")
			if r.Outcome != tt.outcome || r.Turns != tt.turns {
				t.Errorf("outcome %s after %d turns, want %s after %d", r.Outcome, r.Turns, tt.outcome, tt.turns)
			}
		})
	}
}

// TestLoopCancelDuringTools answers the calls left after a cancel without
// running them, so the stored conversation stays well-formed.
func TestLoopCancelDuringTools(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("stop requested")
	ran := 0
	j := &recorder{}
	l := New(Config{
		Model:   provider.NewScripted("s", []provider.Response{echoTurn("a", "b", "c")}),
		Tools:   registry(t, echo{hook: func(context.Context) { ran++; cancel(stop) }}),
		Journal: j,
	}, nil, transcript.Usage{})
	r := l.Run(ctx, "go")
	if r.Outcome != transcript.OutcomeCancelled || !errors.Is(r.Err, stop) || ran != 1 {
		t.Fatalf("result %+v after %d tool runs, want cancelled by the cause after 1", r, ran)
	}
	statuses := j.statuses()
	if diff := cmp.Diff([]transcript.ToolStatus{transcript.ToolCancelled, transcript.ToolCancelled, transcript.ToolCancelled}, statuses); diff != "" {
		t.Errorf("completions (-want +got):\n%s", diff)
	}
	if cp, ok := j.entries[len(j.entries)-1].(transcript.Checkpoint); !ok || cp.Outcome != transcript.OutcomeCancelled {
		t.Errorf("last entry %#v, want a cancelled checkpoint", j.entries[len(j.entries)-1])
	}
}

// TestLoopToolCallDurableBeforeItRuns checks the write-ahead rule: when a
// tool starts, the journal has made its call durable, with the response
// that made it.
func TestLoopToolCallDurableBeforeItRuns(t *testing.T) {
	t.Parallel()
	j := &recorder{}
	ran := 0
	l := New(Config{
		Model: provider.NewScripted("s", []provider.Response{echoTurn("one", "two"), textTurn("done")}),
		Tools: registry(t, echo{hook: func(context.Context) {
			ran++
			j.mu.Lock()
			defer j.mu.Unlock()
			last, _ := j.entries[len(j.entries)-1].(transcript.ToolCall)
			if j.durable != len(j.entries) || last.CallID != string(rune('a'+ran-1)) {
				t.Errorf("call %d ran with %d of %d entries durable, the last %#v", ran, j.durable, len(j.entries), j.entries[len(j.entries)-1])
			}
		}}),
		Journal: j,
	}, nil, transcript.Usage{})
	if r := l.Run(t.Context(), "go"); r.Outcome != transcript.OutcomeCompleted || ran != 2 {
		t.Fatalf("result %+v after %d tool runs", r, ran)
	}
}

// TestLoopCancelDuringWriteAhead does not start a call whose write-ahead
// barrier the run's cancel interrupted: nothing says it is durable.
func TestLoopCancelDuringWriteAhead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("stop requested")
	ran := 0
	j := &recorder{barrier: func(bctx context.Context) error {
		cancel(stop)
		return bctx.Err()
	}}
	l := New(Config{
		Model:   provider.NewScripted("s", []provider.Response{echoTurn("a")}),
		Tools:   registry(t, echo{hook: func(context.Context) { ran++ }}),
		Journal: j,
	}, nil, transcript.Usage{})
	r := l.Run(ctx, "go")
	if r.Outcome != transcript.OutcomeCancelled || ran != 0 || r.JournalErr != nil {
		t.Fatalf("result %+v after %d tool runs, want cancelled before the call ran, no journal error", r, ran)
	}
	if diff := cmp.Diff([]transcript.ToolStatus{transcript.ToolCancelled}, j.statuses()); diff != "" {
		t.Errorf("completions (-want +got):\n%s", diff)
	}
}

// TestLoopJournalFailureStops: once a barrier fails, no further call runs
// (it could not be recorded before it ran, and a resume would make it
// again) and the run ends failed at the next request, saying why.
func TestLoopJournalFailureStops(t *testing.T) {
	t.Parallel()
	full := errors.New("database or disk is full")
	tests := []struct {
		name     string
		failAt   int // the barrier that fails, counted from 1
		wantRan  int
		wantTurn int
	}{
		// Barriers: the first call's write-ahead, the end of its turn,
		// the second call's write-ahead.
		{"at the first call's write-ahead", 1, 0, 1},
		{"at the turn's end", 2, 1, 1},
		{"at the second call's write-ahead", 3, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := 0
			j := &recorder{barrier: func(context.Context) error {
				if n++; n >= tt.failAt {
					return full
				}
				return nil
			}}
			ran := 0
			l := New(Config{
				Model:   provider.NewScripted("s", []provider.Response{echoTurn("one"), echoTurn("two"), textTurn("done")}),
				Tools:   registry(t, echo{hook: func(context.Context) { ran++ }}),
				Journal: j,
			}, nil, transcript.Usage{})
			r := l.Run(t.Context(), "go")
			if r.Outcome != transcript.OutcomeFailed || !errors.Is(r.JournalErr, full) || !errors.Is(r.Err, full) {
				t.Fatalf("result %+v, want failed with the journal's error", r)
			}
			if !strings.Contains(r.Reason, "the journal failed") || !strings.Contains(r.Reason, "resume") {
				t.Errorf("reason %q does not say the journal failed and what a resume does", r.Reason)
			}
			if ran != tt.wantRan || r.Turns != tt.wantTurn {
				t.Errorf("%d calls ran in %d turns, want %d in %d", ran, r.Turns, tt.wantRan, tt.wantTurn)
			}
		})
	}
}

// endsAt ends the turn at the call whose text is at.
type endsAt struct {
	Tools
	at string
}

func (e endsAt) Run(ctx context.Context, id, name string, args json.RawMessage) tools.Result {
	res := e.Tools.Run(ctx, id, name, args)
	if res.Content == e.at {
		res.EndTurn = "a PostToolUse hook ended the turn: enough"
	}
	return res
}

// TestLoopToolEndsTurn ends the run when a tool result ends the turn: the
// calls after it are answered without running, and the model is not asked
// again.
func TestLoopToolEndsTurn(t *testing.T) {
	t.Parallel()
	ran := 0
	j := &recorder{}
	model := &requests{Model: provider.NewScripted("s", []provider.Response{echoTurn("a", "b", "c"), textTurn("never")})}
	l := New(Config{
		Model:   model,
		Tools:   endsAt{registry(t, echo{hook: func(context.Context) { ran++ }}), "b"},
		Journal: j,
	}, nil, transcript.Usage{})
	r := l.Run(t.Context(), "go")
	if r.Outcome != transcript.OutcomeCompleted || r.Reason != "a PostToolUse hook ended the turn: enough" || r.Turns != 1 || ran != 2 {
		t.Fatalf("result %+v after %d tool runs, want completed after 1 turn and 2 runs", r, ran)
	}
	if n := len(model.got); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
	statuses := j.statuses()
	if diff := cmp.Diff([]transcript.ToolStatus{transcript.ToolOK, transcript.ToolOK, transcript.ToolCancelled}, statuses); diff != "" {
		t.Errorf("completions (-want +got):\n%s", diff)
	}
	last := l.Messages()[len(l.Messages())-1]
	if got := last.Content[2].Text; !strings.Contains(got, "not run: a PostToolUse hook ended the turn: enough") {
		t.Errorf("the call after the end of the turn got %q", got)
	}
	if cp, ok := j.entries[len(j.entries)-1].(transcript.Checkpoint); !ok || cp.Outcome != transcript.OutcomeCompleted {
		t.Errorf("last entry %#v, want a completed checkpoint", j.entries[len(j.entries)-1])
	}
}

func TestLoopStopHook(t *testing.T) {
	t.Parallel()
	asked := 0
	l := New(Config{
		Model: provider.NewScripted("s", []provider.Response{textTurn("first"), textTurn("second")}),
		OnStop: func(_ context.Context, answer string) (string, bool) {
			asked++
			return "the tests still fail", answer == "first"
		},
	}, nil, transcript.Usage{})
	r := l.Run(t.Context(), "go")
	if r.Outcome != transcript.OutcomeCompleted || r.Answer != "second" || asked != 2 {
		t.Fatalf("result %+v after %d stop hooks", r, asked)
	}
	msgs := l.Messages()
	if got := msgs[2].Text(); msgs[2].Role != provider.RoleUser || got != "the tests still fail" {
		t.Errorf("message after the blocked stop = %+v", msgs[2])
	}

	always := New(Config{
		Model:  provider.NewScripted("s", slices.Repeat([]provider.Response{textTurn("again")}, MaxStopContinues+1)),
		OnStop: func(context.Context, string) (string, bool) { return "no", true },
	}, nil, transcript.Usage{})
	if r := always.Run(t.Context(), "go"); r.Outcome != transcript.OutcomeCompleted || r.Turns != MaxStopContinues+1 {
		t.Errorf("a stop hook that always blocks: %+v, want completed after %d turns", r, MaxStopContinues+1)
	}
}

func TestLoopModelErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		resp provider.Response
		want string
	}{
		{"cut off", provider.Response{Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text("par")}}, StopReason: provider.StopMaxTokens}, "output token limit"},
		{"refusal", provider.Response{Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text("no")}}, StopReason: provider.StopRefusal}, "refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := New(Config{Model: provider.NewScripted("s", []provider.Response{tt.resp})}, nil, transcript.Usage{}).Run(t.Context(), "go")
			if r.Outcome != transcript.OutcomeModelError || r.Err == nil || r.Reason == "" || !strings.Contains(r.Reason, tt.want) {
				t.Errorf("result %+v, want a model error about %q", r, tt.want)
			}
		})
	}
	// A script with no turn left is an error of the model.
	r := New(Config{Model: provider.NewScripted("s", nil)}, nil, transcript.Usage{}).Run(t.Context(), "go")
	if r.Outcome != transcript.OutcomeModelError || !errors.Is(r.Err, provider.ErrScriptExhausted) {
		t.Errorf("exhausted script: %+v", r)
	}
}

func TestLoopBeforeRequest(t *testing.T) {
	t.Parallel()
	lost := errors.New("a required MCP server cannot connect")
	calls := 0
	l := New(Config{
		Model: provider.NewScripted("s", []provider.Response{echoTurn("x"), textTurn("done")}),
		Tools: registry(t, echo{}),
		BeforeRequest: func(context.Context) error {
			calls++
			if calls == 2 {
				return lost
			}
			return nil
		},
	}, nil, transcript.Usage{})
	r := l.Run(t.Context(), "go")
	if r.Outcome != transcript.OutcomeFailed || !errors.Is(r.Err, lost) || r.Turns != 1 {
		t.Errorf("result %+v, want failed after 1 turn with the check's error", r)
	}
}

// requests records the requests a model is sent.
type requests struct {
	Model
	got []provider.Request
}

func (r *requests) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	r.got = append(r.got, req)
	return r.Model.Stream(ctx, req)
}

// TestLoopSwapAtTurnBoundary swaps the system prompt and the tools from
// BeforeRequest: the next request carries the new ones, and the turn in
// progress kept the old.
func TestLoopSwapAtTurnBoundary(t *testing.T) {
	t.Parallel()
	model := &requests{Model: provider.NewScripted("s", []provider.Response{echoTurn("x"), textTurn("done")})}
	empty, err := tools.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	var l *Loop
	calls := 0
	l = New(Config{
		Model:  model,
		Tools:  registry(t, echo{}),
		System: "old",
		BeforeRequest: func(context.Context) error {
			if calls++; calls == 2 {
				l.SetSystem("new")
				l.SetTools(empty)
			}
			return nil
		},
	}, nil, transcript.Usage{})
	if r := l.Run(t.Context(), "go"); r.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("result %+v", r)
	}
	var got []string
	for _, req := range model.got {
		got = append(got, fmt.Sprintf("%s %d", req.Messages[0].Text(), len(req.Tools)))
	}
	if diff := cmp.Diff([]string{"old 1", "new 0"}, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// syncRecorder is a recorder with Sync, which records what each turn
// waited for.
type syncRecorder struct {
	recorder
	syncs    []int64
	barriers int
}

func (r *syncRecorder) Sync(_ context.Context, seq int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncs = append(r.syncs, seq)
	return nil
}

func (r *syncRecorder) Barrier(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.barriers++
	return nil
}

// TestLoopTurnBarrierWaitsForThePreviousTurn checks the turn-complete
// barrier with a SyncJournal: each turn's end waits for the entries up to
// the end of the turn before, each call's start and the run's end for
// everything.
func TestLoopTurnBarrierWaitsForThePreviousTurn(t *testing.T) {
	t.Parallel()
	j := &syncRecorder{}
	l := New(Config{
		Model:   provider.NewScripted("s", []provider.Response{echoTurn("one"), echoTurn("two"), textTurn("done")}),
		Tools:   registry(t, echo{}),
		Journal: j,
	}, nil, transcript.Usage{})
	if r := l.Run(t.Context(), "go"); r.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("result = %+v", r)
	}
	// 1 is the prompt; each tool turn appends the assistant's message, the
	// usage, the call, the result and the completion: 2-6, then 7-11.
	if diff := cmp.Diff([]int64{0, 6}, j.syncs); diff != "" {
		t.Errorf("syncs (-want +got):\n%s", diff)
	}
	// A barrier makes each call durable before it runs, and one ends the
	// run.
	if j.barriers != 3 || len(j.entries) != 14 {
		t.Errorf("%d barriers for %d entries, want one for each of 2 calls and 1 at the end of 14", j.barriers, len(j.entries))
	}
}

// spends makes every result carry the usage of model requests the tool
// made itself.
type spends struct{ Tools }

func (s spends) Run(ctx context.Context, id, name string, args json.RawMessage) tools.Result {
	res := s.Tools.Run(ctx, id, name, args)
	res.Usage = provider.Usage{InputTokens: 100, OutputTokens: 7, CacheReadTokens: 40}
	return res
}

// TestLoopToolUsage: what a tool's own model requests used joins the
// session's usage after its result, journaled and counted by the token
// budget, but not as turns and not in the context size.
func TestLoopToolUsage(t *testing.T) {
	t.Parallel()
	j := &recorder{}
	l := New(Config{
		Model:   provider.NewScripted("s", []provider.Response{echoTurn("one"), textTurn("never")}),
		Tools:   spends{registry(t, echo{})},
		Journal: j,
		Stop:    []StopCondition{MaxTokens(100)},
	}, nil, transcript.Usage{})
	r := l.Run(t.Context(), "go")
	if r.Outcome != transcript.OutcomeBudgetExceeded || r.Turns != 1 {
		t.Fatalf("result = %+v, want the token budget spent after 1 turn", r)
	}
	want := transcript.Usage{InputTokens: 110, OutputTokens: 9, CacheReadTokens: 40, Requests: 1, ContextTokens: 12}
	if r.Usage != want {
		t.Errorf("usage = %+v, want %+v", r.Usage, want)
	}
	wantKinds := []transcript.EntryKind{
		transcript.KindUserMessage, transcript.KindAssistantMessage, transcript.KindUsage,
		transcript.KindToolCall, transcript.KindToolResult, transcript.KindToolCompletion, transcript.KindUsage,
		transcript.KindCheckpoint,
	}
	if diff := cmp.Diff(wantKinds, j.kinds()); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if u, ok := j.entries[6].(transcript.Usage); !ok || u != want {
		t.Errorf("journaled usage %#v, want %+v", j.entries[6], want)
	}
}
