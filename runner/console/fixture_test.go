package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/postgres"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// tenant is the tenant of the fixtures; other is one the console does not
// show.
const (
	tenant = "agents"
	other  = "elsewhere"
)

// xss is an entry text that must render as text.
const xss = "<script>alert(1)</script>"

// secret is a credential in a tool result, which must not be shown.
const secret = "sk-ant0123456789abcdefSECRET"

// backend is a real store to run a test against.
type backend struct {
	name string
	open func(t *testing.T) store.Store
}

// backends are SQLite (a file of the test's) and PostgreSQL (a throwaway
// server of hack/testenv, a database per test).
func backends() []backend {
	return []backend{
		{"sqlite", func(t *testing.T) store.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sessions.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"postgres", func(t *testing.T) store.Store {
			st, err := postgres.Open(context.Background(), testenv.StartPostgres(t).NewDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
}

// stream builds a session's entries with increasing sequence numbers.
type stream struct {
	entries []transcript.Entry
	at      time.Time
}

func (s *stream) add(p transcript.Payload) int64 {
	seq := int64(len(s.entries) + 1)
	s.at = s.at.Add(time.Second)
	s.entries = append(s.entries, transcript.Entry{Seq: seq, Payload: p, CreatedAt: s.at})
	return seq
}

func text(t string) []transcript.Block {
	return []transcript.Block{{Type: transcript.BlockText, Text: t}}
}

// toolTurn adds an assistant message calling tool with input, the call,
// its result and its completion.
func (s *stream) toolTurn(id, tool, input, result string) {
	in := json.RawMessage(input)
	s.add(transcript.AssistantMessage{Content: []transcript.Block{
		{Type: transcript.BlockText, Text: "running " + tool},
		{Type: transcript.BlockToolUse, ID: id, Name: tool, Input: in}}})
	s.add(transcript.ToolCall{CallID: id, Name: tool, Input: in})
	s.add(transcript.ToolResult{CallID: id, Content: text(result)})
	s.add(transcript.ToolCompletion{CallID: id, Status: transcript.ToolOK, Duration: 1500 * time.Millisecond})
}

// fixture is what seed stored.
type fixture struct {
	big, child, pending, forked, foreign store.Session
	compaction                           int64
}

// seed stores: big, a session of n entries (n ≥ 300 or so) with tool
// calls, an XSS text, a secret, a compaction and a subagent (child) whose
// outcome it recorded; pending, a session paused on a call awaiting
// approval; forked, a fork of big; and foreign, a session of another
// tenant.
func seed(t testing.TB, st store.Store, n int) fixture {
	t.Helper()
	ctx := context.Background()
	var f fixture
	start := time.Now().Add(-time.Hour)
	bigID := uuid.New()
	var s stream
	s.at = start
	s.add(transcript.Layers{Layers: []transcript.Layer{{Name: "project", Kind: "project", Source: ".aerie",
		Digest: "sha256:0123abcd"}}})
	s.add(transcript.UserMessage{Content: text("Fix the build. " + xss)})
	s.toolTurn("call-1", "bash", `{"command":"make test"}`, "FAIL: token="+secret+"\n<b>not bold</b>")
	s.add(transcript.AssistantMessage{Content: []transcript.Block{
		{Type: transcript.BlockText, Text: "delegating"},
		{Type: transcript.BlockToolUse, ID: "call-sub", Name: subagent.Name, Input: json.RawMessage(`{"prompt":"look"}`)}}})
	s.add(transcript.ToolCall{CallID: "call-sub", Name: subagent.Name, Input: json.RawMessage(`{"prompt":"look"}`)})
	childID := subagent.ChildID(bigID, "call-sub")
	s.add(transcript.SubagentOutcome{Session: childID, Outcome: transcript.OutcomeCompleted, CallID: "call-sub",
		Summary: "looked", Usage: &transcript.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.001}})
	s.add(transcript.ToolResult{CallID: "call-sub", Content: text("the subagent looked")})
	s.add(transcript.ToolCompletion{CallID: "call-sub", Status: transcript.ToolOK})
	for i := 0; len(s.entries) < n/2; i++ {
		s.toolTurn(fmt.Sprintf("call-a%d", i), "read_file", fmt.Sprintf(`{"path":"f%d.go"}`, i), fmt.Sprintf("content %d", i))
	}
	firstKept := int64(len(s.entries) + 1)
	s.add(transcript.UserMessage{Content: text("go on")})
	f.compaction = s.add(transcript.Compaction{Replacement: text("summary of the first half"), FirstKept: firstKept,
		Provenance: transcript.Provenance{Trigger: "auto", Messages: int(firstKept - 1), TokensBefore: 9000, TokensAfter: 900}})
	for i := 0; len(s.entries) < n-3; i++ {
		s.toolTurn(fmt.Sprintf("call-b%d", i), "bash", `{"command":"go test"}`, "ok")
	}
	s.add(transcript.AssistantMessage{Content: text("done")})
	s.add(transcript.Usage{InputTokens: 1200, OutputTokens: 340, Requests: 12, CostUSD: 0.0421})
	s.add(transcript.Checkpoint{Turn: 1, Outcome: transcript.OutcomeCompleted, Result: "built"})
	var err error
	// The compaction must be appended, not created with the session.
	f.big, err = st.Create(ctx, tenant, store.NewSession{ID: bigID, Kind: store.SessionHeadless, Label: "big",
		Settings: transcript.Settings{Provider: "anthropic", Model: "claude-test"}, State: store.StateCompleted,
		Entries: s.entries[:2]})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, tenant, bigID, s.entries[2:]); err != nil {
		t.Fatal(err)
	}
	var c stream
	c.at = start
	c.add(transcript.UserMessage{Content: text("look around")})
	c.add(transcript.AssistantMessage{Content: text("child answer")})
	f.child, err = st.Create(ctx, tenant, store.NewSession{ID: childID, Kind: store.SessionSubagent, Parent: bigID,
		Settings: transcript.Settings{Persona: "explorer"}, State: store.StateCompleted, Entries: c.entries})
	if err != nil {
		t.Fatal(err)
	}
	var p stream
	p.at = start
	p.add(transcript.UserMessage{Content: text("push it")})
	p.add(transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockToolUse, ID: "call-p",
		Name: "bash", Input: json.RawMessage(`{"command":"git push"}`)}}})
	p.add(transcript.ToolCall{CallID: "call-p", Name: "bash", Input: json.RawMessage(`{"command":"git push"}`)})
	p.add(transcript.ApprovalRequest{CallID: "call-p", Tool: "bash", Preview: "git push", Hooks: []string{"guard.sh"},
		Reason: "pushes need a person"})
	p.add(transcript.Checkpoint{Turn: 1, Outcome: transcript.OutcomeAwaitingApproval})
	f.pending, err = st.Create(ctx, tenant, store.NewSession{Kind: store.SessionHeadless, Label: "pending",
		Settings: transcript.Settings{Model: "gpt-test"}, State: store.StateIdle, Entries: p.entries})
	if err != nil {
		t.Fatal(err)
	}
	f.forked, err = st.Fork(ctx, tenant, bigID, store.ForkOptions{At: 6, Label: "forked"})
	if err != nil {
		t.Fatal(err)
	}
	f.foreign, err = st.Create(ctx, other, store.NewSession{Label: "foreign", State: store.StateIdle,
		Entries: []transcript.Entry{{Seq: 1, Payload: transcript.UserMessage{Content: text("not yours")}, CreatedAt: start}}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
