package agent

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestLoopConcurrentCalls: consecutive calls to a tool Concurrent names run
// at the same time — each waits until both have started — and their
// entries are journaled calls first, then results in call order, whatever
// order they finished in; a call to another tool after them runs alone, in
// its place, and the entries a result carries come before it.
func TestLoopConcurrentCalls(t *testing.T) {
	t.Parallel()
	var started atomic.Int32
	both := make(chan struct{})
	e := echo{hook: func(ctx context.Context) {
		if started.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(30 * time.Second):
			t.Error("the concurrent calls did not run at the same time")
		}
	}}
	outcome := transcript.SubagentOutcome{Session: uuid.New(), Outcome: transcript.OutcomeCompleted}
	marked := marker{entries: []transcript.Payload{outcome}}
	reg, err := tools.NewRegistry(nil, e, marked)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"text": "x"})
	turn := provider.Response{Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
		provider.ToolCall("a", "echo", string(args)), provider.ToolCall("b", "echo", string(args)),
		provider.ToolCall("c", "marker", "{}"),
	}}, StopReason: provider.StopToolUse}
	j := &recorder{}
	l := New(Config{
		Model:      provider.NewScripted("s", []provider.Response{turn, textTurn("done")}),
		Tools:      reg,
		Journal:    j,
		Concurrent: func(name string) bool { return name == "echo" },
	}, nil, transcript.Usage{})
	if r := l.Run(t.Context(), "go"); r.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("result %+v", r)
	}
	want := []transcript.EntryKind{
		transcript.KindUserMessage, transcript.KindAssistantMessage, transcript.KindUsage,
		transcript.KindToolCall, transcript.KindToolCall,
		transcript.KindToolResult, transcript.KindToolCompletion, transcript.KindToolResult, transcript.KindToolCompletion,
		transcript.KindToolCall, transcript.KindSubagentOutcome, transcript.KindToolResult, transcript.KindToolCompletion,
		transcript.KindAssistantMessage, transcript.KindUsage, transcript.KindCheckpoint,
	}
	if diff := cmp.Diff(want, j.kinds()); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	var ids []string
	for _, p := range j.entries {
		if r, ok := p.(transcript.ToolResult); ok {
			ids = append(ids, r.CallID)
		}
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, ids); diff != "" {
		t.Errorf("results in order (-want +got):\n%s", diff)
	}
	msgs := l.Messages()
	if len(msgs[2].Content) != 3 || msgs[2].Content[0].ToolCallID != "a" {
		t.Errorf("tool message %+v", msgs[2])
	}
}

// marker is a tool whose result carries entries to journal.
type marker struct{ entries []transcript.Payload }

func (marker) Name() string            { return "marker" }
func (marker) Description() string     { return "marks" }
func (marker) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (m marker) Run(context.Context, json.RawMessage) tools.Result {
	return tools.Result{Content: "marked", Entries: m.entries}
}
