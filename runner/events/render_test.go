package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/transcript"
)

func run() []Event {
	code := 0
	return []Event{
		{Type: SessionStart, Session: "0123456789abcdef", Provider: "anthropic", Model: "claude-sonnet-4-5"},
		{Type: TurnStart, Turn: 1},
		{Type: TextDelta, Turn: 1, Text: "Let me "},
		{Type: TextDelta, Turn: 1, Text: "look."},
		{Type: AssistantMessage, Turn: 1, Text: "Let me look."},
		{Type: ToolCall, Turn: 1, Tool: "bash", CallID: "c1", Arguments: `{"command":"ls\n-la"}`},
		{Type: ToolResult, Turn: 1, Tool: "bash", CallID: "c1", Text: strings.Repeat("x", 500), IsError: true, Duration: 1500 * time.Microsecond},
		{Type: SessionEnd, Session: "0123456789abcdef", Outcome: transcript.OutcomeCompleted, Turn: 2, Usage: &transcript.Usage{InputTokens: 10, OutputTokens: 2}, ExitCode: &code},
	}
}

func TestJSONL(t *testing.T) {
	t.Parallel()
	for _, deltas := range []bool{false, true} {
		var buf bytes.Buffer
		j := NewJSONL(&buf, deltas)
		for _, e := range run() {
			j.Observe(e)
		}
		if j.Err() != nil {
			t.Fatal(j.Err())
		}
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		want := 6
		if deltas {
			want = 8
		}
		if len(lines) != want {
			t.Fatalf("deltas %v: %d lines, want %d:\n%s", deltas, len(lines), want, buf.String())
		}
		var end Event
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &end); err != nil {
			t.Fatal(err)
		}
		if end.Type != SessionEnd || end.ExitCode == nil || *end.ExitCode != 0 || end.Usage.InputTokens != 10 {
			t.Errorf("last line = %+v", end)
		}
		if strings.Contains(buf.String(), `\u003e`) {
			t.Error("HTML escaping in JSON Lines")
		}
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("broken pipe")
}

func TestJSONLKeepsTheFirstError(t *testing.T) {
	t.Parallel()
	w := &failingWriter{}
	j := NewJSONL(w, false)
	for _, e := range run() {
		j.Observe(e)
	}
	if j.Err() == nil || w.n != 1 {
		t.Errorf("err %v after %d writes, want the first error and no more writes", j.Err(), w.n)
	}
}

func TestHumanKeepsTheFirstError(t *testing.T) {
	t.Parallel()
	w := &failingWriter{}
	h := NewHuman(w)
	for _, e := range run() {
		h.Observe(e)
	}
	if h.Err() == nil || w.n != 1 {
		t.Errorf("err %v after %d writes, want the first error and no more writes", h.Err(), w.n)
	}
}

func TestHuman(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := NewHuman(&buf)
	for _, e := range run() {
		h.Observe(e)
	}
	want := "● session 01234567 · anthropic/claude-sonnet-4-5\n" +
		"Let me look.\n" +
		"▸ bash {\"command\":\"ls\\n-la\"}\n" +
		"  ✗ bash (2ms) " + strings.Repeat("x", maxPreview) + "…\n" +
		"● completed after 2 turns · 10 tokens in, 2 out\n"
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestHumanReload(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := NewHuman(&buf)
	h.Observe(Event{Type: Reload, Status: "reloaded", Text: "/h/SYSTEM.md: active\n/h/tools/x.toml: inactive (untrusted): no pin"})
	h.Observe(Event{Type: Reload, Status: "failed", Reason: "hooks: bad", Text: "/h/hooks.toml"})
	want := "↻ extensions reloaded\n  /h/SYSTEM.md: active\n  /h/tools/x.toml: inactive (untrusted): no pin\n" +
		"↻ extensions failed: hooks: bad\n  /h/hooks.toml\n"
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestHumanCompaction(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := NewHuman(&buf)
	h.Observe(Event{Type: Compaction, Seq: 40, Compaction: &transcript.Provenance{Trigger: "auto", Messages: 31, TokensBefore: 170_000, TokensAfter: 22_000}})
	want := "⇊ conversation compacted (auto): 31 messages summarized · ~170000 → ~22000 tokens\n"
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// TestHumanHooks shows what hooks say to the user, and why a hook ended a
// completed run; a hook event with no message shows nothing.
func TestHumanHooks(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := NewHuman(&buf)
	h.Observe(Event{Type: Hook, Tool: "bash", Status: "PreToolUse:none"})
	h.Observe(Event{Type: Hook, Tool: "bash", Status: "PreToolUse:none", Messages: []string{"the cost guard stopped the agent"}})
	h.Observe(Event{Type: SessionEnd, Outcome: transcript.OutcomeCompleted, Turn: 1, Reason: "a PreToolUse hook ended the turn: budget spent"})
	want := "◆ PreToolUse hook: the cost guard stopped the agent\n" +
		"● completed after 1 turns · a PreToolUse hook ended the turn: budget spent\n"
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}
