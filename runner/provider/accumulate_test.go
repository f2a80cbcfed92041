package provider_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/provider"
)

func seq(parts ...provider.Part) func(func(provider.Part, error) bool) {
	return func(yield func(provider.Part, error) bool) {
		for _, p := range parts {
			if !yield(p, nil) {
				return
			}
		}
	}
}

func TestProviderAccumulator(t *testing.T) {
	finish := provider.Part{Type: provider.PartFinish, StopReason: provider.StopToolUse, Usage: provider.Usage{InputTokens: 10, OutputTokens: 5}}
	for _, tc := range []struct {
		name    string
		parts   []provider.Part
		want    provider.Message
		wantErr string
	}{
		{
			name: "text, reasoning and interleaved tool calls",
			parts: []provider.Part{
				{Type: provider.PartReasoningDelta, Text: "think "},
				{Type: provider.PartReasoningDelta, Text: "hard"},
				{Type: provider.PartReasoningEnd, Signature: "sig"},
				{Type: provider.PartReasoningEnd, Signature: "opaque", Redacted: true},
				{Type: provider.PartTextDelta, Text: "Hel"},
				{Type: provider.PartTextDelta, Text: "lo"},
				{Type: provider.PartToolCallStart, ToolCallID: "a", ToolName: "bash"},
				{Type: provider.PartToolCallStart, ToolCallID: "b", ToolName: "noargs"},
				{Type: provider.PartToolCallDelta, ToolCallID: "a", Text: `{"command":`},
				{Type: provider.PartToolCallEnd, ToolCallID: "b"},
				{Type: provider.PartToolCallDelta, ToolCallID: "a", Text: `"ls"}`},
				{Type: provider.PartToolCallEnd, ToolCallID: "a"},
				{Type: provider.PartTextDelta, Text: "after"},
				finish,
			},
			want: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
				{Type: provider.ContentReasoning, Text: "think hard", Signature: "sig"},
				{Type: provider.ContentReasoning, Signature: "opaque", Redacted: true},
				provider.Text("Hello"),
				provider.ToolCall("a", "bash", `{"command":"ls"}`),
				provider.ToolCall("b", "noargs", "{}"),
				provider.Text("after"),
			}},
		},
		{name: "empty response", parts: []provider.Part{finish}, want: provider.Message{Role: provider.RoleAssistant}},
		{name: "no finish", parts: []provider.Part{{Type: provider.PartTextDelta, Text: "cut"}}, wantErr: "stream ended before the response was complete"},
		{name: "delta before start", parts: []provider.Part{{Type: provider.PartToolCallDelta, ToolCallID: "x", Text: "{}"}}, wantErr: `tool call "x" that never started`},
		{name: "delta after end", parts: []provider.Part{
			{Type: provider.PartToolCallStart, ToolCallID: "x", ToolName: "t"},
			{Type: provider.PartToolCallEnd, ToolCallID: "x"},
			{Type: provider.PartToolCallDelta, ToolCallID: "x", Text: "{}"},
		}, wantErr: "after its end"},
		{name: "duplicate start", parts: []provider.Part{
			{Type: provider.PartToolCallStart, ToolCallID: "x", ToolName: "t"},
			{Type: provider.PartToolCallStart, ToolCallID: "x", ToolName: "t"},
		}, wantErr: "starts twice"},
		{name: "start without id", parts: []provider.Part{{Type: provider.PartToolCallStart, ToolName: "t"}}, wantErr: "without an id"},
		{name: "part after finish", parts: []provider.Part{finish, {Type: provider.PartTextDelta, Text: "late"}}, wantErr: "after the finish part"},
		{name: "unknown part", parts: []provider.Part{{Type: "sparkle"}}, wantErr: `unknown part type "sparkle"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := provider.Collect(seq(tc.parts...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, resp.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if resp.Usage != finish.Usage || resp.StopReason != finish.StopReason {
				t.Errorf("usage %+v, stop %q", resp.Usage, resp.StopReason)
			}
		})
	}
}

func TestProviderCollectStreamError(t *testing.T) {
	boom := errors.New("boom")
	stream := func(yield func(provider.Part, error) bool) {
		if yield(provider.Part{Type: provider.PartTextDelta, Text: "a"}, nil) {
			yield(provider.Part{}, boom)
		}
	}
	if _, err := provider.Collect(stream); !errors.Is(err, boom) {
		t.Errorf("error %v, want the stream's", err)
	}
	if !errors.Is(func() error { _, err := provider.Collect(seq()); return err }(), provider.ErrIncomplete) {
		t.Error("an empty stream is not ErrIncomplete")
	}
}

func TestProviderMessageHelpers(t *testing.T) {
	m := provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
		provider.Text("a"), provider.ToolCall("1", "t", "{}"), provider.Text("b"),
	}}
	if got := m.Text(); got != "ab" {
		t.Errorf("Text() = %q", got)
	}
	if got := m.ToolCalls(); !slices.Equal(got, []provider.Content{provider.ToolCall("1", "t", "{}")}) {
		t.Errorf("ToolCalls() = %+v", got)
	}
	u := provider.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4}
	if got, want := u.Add(u), (provider.Usage{InputTokens: 2, OutputTokens: 4, CacheReadTokens: 6, CacheWriteTokens: 8}); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
}
