package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

func entries(ps ...transcript.Payload) []transcript.Entry {
	es := make([]transcript.Entry, len(ps))
	for i, p := range ps {
		es[i] = transcript.Entry{Seq: int64(i + 1), Payload: p}
	}
	return es
}

func TestHistory(t *testing.T) {
	t.Parallel()
	user := transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "task"}}}
	twoCalls := transcript.AssistantMessage{StopReason: "tool_use", Content: []transcript.Block{
		{Type: transcript.BlockThinking, Text: "hmm", Signature: "sig"},
		{Type: transcript.BlockText, Text: "looking"},
		{Type: transcript.BlockToolUse, ID: "a", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
		{Type: transcript.BlockToolUse, ID: "b", Name: "read_file", Input: json.RawMessage(`"{not json"`)},
	}}
	wantCalls := provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
		{Type: provider.ContentReasoning, Text: "hmm", Signature: "sig"},
		provider.Text("looking"),
		provider.ToolCall("a", "bash", `{"command":"ls"}`),
		provider.ToolCall("b", "read_file", `{not json`),
	}}
	result := func(id, text string) transcript.ToolResult {
		return transcript.ToolResult{CallID: id, Content: []transcript.Block{{Type: transcript.BlockText, Text: text}}}
	}
	tests := []struct {
		name string
		snap transcript.Snapshot
		want []provider.Message
	}{
		{
			name: "results of one turn become one tool message",
			snap: transcript.Snapshot{Entries: entries(
				user, twoCalls,
				transcript.ToolCall{CallID: "a", Name: "bash"}, result("a", "out a"), transcript.ToolCompletion{CallID: "a", Status: transcript.ToolOK},
				transcript.Usage{InputTokens: 3},
				transcript.ToolCall{CallID: "b", Name: "read_file"}, result("b", "out b"), transcript.ToolCompletion{CallID: "b", Status: transcript.ToolOK},
			)},
			want: []provider.Message{
				provider.UserMessage("task"), wantCalls,
				{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("a", "out a", false), provider.ToolResult("b", "out b", false)}},
			},
		},
		{
			name: "calls without results are answered as interrupted",
			snap: transcript.Snapshot{Entries: entries(user, twoCalls, transcript.ToolCall{CallID: "a", Name: "bash"}, result("a", "out a"))},
			want: []provider.Message{
				provider.UserMessage("task"), wantCalls,
				{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("a", "out a", false), provider.ToolResult("b", interruptedResult, true)}},
			},
		},
		{
			name: "a stream that ends on the calls",
			snap: transcript.Snapshot{Entries: entries(user, twoCalls)},
			want: []provider.Message{
				provider.UserMessage("task"), wantCalls,
				{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("a", interruptedResult, true), provider.ToolResult("b", interruptedResult, true)}},
			},
		},
		{
			name: "a user message after unanswered calls",
			snap: transcript.Snapshot{Entries: entries(user, twoCalls, transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "go on"}}})},
			want: []provider.Message{
				provider.UserMessage("task"), wantCalls,
				{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("a", interruptedResult, true), provider.ToolResult("b", interruptedResult, true)}},
				provider.UserMessage("go on"),
			},
		},
		{
			name: "the compaction replacement comes first",
			snap: transcript.Snapshot{
				Compaction: &transcript.Compaction{Replacement: []transcript.Block{{Type: transcript.BlockText, Text: "summary"}}, FirstKept: 5},
				Entries:    entries(transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "done"}}}),
			},
			want: []provider.Message{
				provider.UserMessage("summary"),
				{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text("done")}},
			},
		},
		{
			name: "redacted reasoning keeps its data",
			snap: transcript.Snapshot{Entries: entries(transcript.AssistantMessage{Content: []transcript.Block{{Type: blockRedactedThinking, Signature: "enc"}}})},
			want: []provider.Message{{Role: provider.RoleAssistant, Content: []provider.Content{{Type: provider.ContentReasoning, Signature: "enc", Redacted: true}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, History(tt.snap)); diff != "" {
				t.Errorf("History (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAssistantEntryRoundTrip stores a response and restores it unchanged.
func TestAssistantEntryRoundTrip(t *testing.T) {
	t.Parallel()
	msg := provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
		{Type: provider.ContentReasoning, Text: "think", Signature: "s1"},
		{Type: provider.ContentReasoning, Signature: "enc", Redacted: true},
		provider.Text("hello"),
		provider.ToolCall("c1", "bash", `{"command":"ls"}`),
		provider.ToolCall("c2", "bash", `{"command": `),
		provider.ToolCall("c3", "process", ``),
	}}
	entry := assistantEntry(provider.Response{Message: msg, StopReason: provider.StopToolUse})
	b, err := transcript.EncodePayload(entry)
	if err != nil {
		t.Fatal(err)
	}
	p, err := transcript.DecodeEntry([16]byte{}, 1, transcript.KindAssistantMessage, string(b))
	if err != nil {
		t.Fatal(err)
	}
	got := History(transcript.Snapshot{Entries: []transcript.Entry{{Seq: 1, Payload: p}}})
	if diff := cmp.Diff(msg, got[0]); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func FuzzStoredArguments(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"a":1}`, `{"a":`, `"quoted"`, `null`, "\xff", `  `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		stored := storedArguments(args)
		if len(stored) > 0 && !json.Valid(stored) {
			t.Fatalf("stored arguments %q are not valid JSON", stored)
		}
		got := restoredArguments(stored)
		switch {
		case len(stored) == 0:
			// Blank arguments are stored as none.
		case !utf8.ValidString(args):
			// Invalid UTF-8 is stored with replacement characters.
		case json.Valid([]byte(args)) && strings.TrimSpace(args)[0] == '"':
			// A JSON string is never a call's arguments; it is read back as
			// the text it holds.
		case json.Valid([]byte(args)):
			// Valid JSON is stored compacted, as every JSON column does.
			if !json.Valid([]byte(got)) {
				t.Fatalf("round trip of %q gave invalid JSON %q", args, got)
			}
		case got != args:
			t.Fatalf("round trip of %q gave %q", args, got)
		}
	})
}
