package compaction_test

import (
	"testing"

	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

func TestEstimate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		msg  provider.Message
		want int64
	}{
		{"empty", provider.Message{Role: provider.RoleUser}, 4},
		{"text", provider.UserMessage("12345678"), 4 + 4 + 2},
		{"rounded up", provider.UserMessage("123456789"), 4 + 4 + 3},
		{"tool call", provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
			provider.ToolCall("c1", "bash", `{"a":1}`), // 2 + 4 + 7 bytes
		}}, 4 + 4 + 4},
		{"two results", provider.Message{Role: provider.RoleTool, Content: []provider.Content{
			provider.ToolResult("c1", "ok", false), provider.ToolResult("c2", "", true),
		}}, 4 + (4 + 1) + (4 + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := compaction.Estimate(tc.msg); got != tc.want {
				t.Errorf("Estimate = %d, want %d", got, tc.want)
			}
		})
	}
}

func sum(msgs []provider.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += compaction.Estimate(m)
	}
	return n
}

func TestTracker(t *testing.T) {
	t.Parallel()
	msgs := session(3, 400) // task, then (call, result) × 3
	var tr compaction.Tracker
	tr.SetFixed(100)

	tr.Observe(msgs[:3], transcript.Usage{})
	if got, want := tr.Tokens(), 100+sum(msgs[:3]); got != want {
		t.Errorf("before any report: %d, want the estimate %d", got, want)
	}
	tr.Observe(msgs[:5], transcript.Usage{})
	if got, want := tr.Tokens(), 100+sum(msgs[:5]); got != want {
		t.Errorf("grown: %d, want %d", got, want)
	}
	if got, want := tr.Tail(2), sum(msgs[2:5]); got != want {
		t.Errorf("Tail(2) = %d, want %d", got, want)
	}

	// A report covers every message up to the response (the last
	// assistant message); what came after it is estimated.
	tr.Observe(msgs[:5], transcript.Usage{Requests: 2, ContextTokens: 1000})
	if got, want := tr.Tokens(), 1000+sum(msgs[4:5]); got != want {
		t.Errorf("after a report: %d, want 1000 + the estimate of the result after it = %d", got, want)
	}
	tr.Observe(msgs[:6], transcript.Usage{Requests: 2, ContextTokens: 1000})
	if got, want := tr.Tokens(), 1000+sum(msgs[4:6]); got != want {
		t.Errorf("the same report again: %d, want %d", got, want)
	}

	// A shorter conversation (a compacted one) starts over, and the report
	// of the old one is not taken for it.
	short := []provider.Message{provider.UserMessage("summary"), msgs[5], msgs[6]}
	tr.Observe(short, transcript.Usage{Requests: 2, ContextTokens: 1000})
	if got, want := tr.Tokens(), 100+sum(short); got != want {
		t.Errorf("after the conversation shrank: %d, want %d", got, want)
	}
	if tr.Len() != 3 {
		t.Errorf("Len = %d, want 3", tr.Len())
	}
	// A report without a response to stand for is ignored.
	var empty compaction.Tracker
	empty.Observe([]provider.Message{provider.UserMessage("hi")}, transcript.Usage{Requests: 1, ContextTokens: 50})
	if got, want := empty.Tokens(), sum([]provider.Message{provider.UserMessage("hi")}); got != want {
		t.Errorf("a report before any response: %d, want the estimate %d", got, want)
	}
}

func TestUsableWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ window, out, want int64 }{
		{0, 1000, 0},
		{200_000, 32_000, 168_000},
		{32_000, 32_000, 24_000}, // the reservation is at most a quarter
		{200_000, 0, 200_000},
	} {
		if got := compaction.UsableWindow(tc.window, tc.out); got != tc.want {
			t.Errorf("UsableWindow(%d, %d) = %d, want %d", tc.window, tc.out, got, tc.want)
		}
	}
}
