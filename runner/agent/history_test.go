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
			name: "a started call without a result is answered as interrupted",
			snap: transcript.Snapshot{Entries: entries(user, twoCalls,
				transcript.ToolCall{CallID: "a", Name: "bash"}, result("a", "out a"), transcript.ToolCompletion{CallID: "a", Status: transcript.ToolOK},
				transcript.ToolCall{CallID: "b", Name: "read_file"})},
			want: []provider.Message{
				provider.UserMessage("task"), wantCalls,
				{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("a", "out a", false), provider.ToolResult("b", interruptedResult, true)}},
			},
		},
		{
			name: "a call that never started is answered as not run",
			snap: transcript.Snapshot{Entries: entries(user, twoCalls, transcript.ToolCall{CallID: "a", Name: "bash"}, result("a", "out a"))},
			want: []provider.Message{
				provider.UserMessage("task"), wantCalls,
				{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("a", "out a", false), provider.ToolResult("b", notStartedResult, true)}},
			},
		},
		{
			name: "a stream that ends on the calls",
			snap: transcript.Snapshot{Entries: entries(user, twoCalls)},
			want: []provider.Message{
				provider.UserMessage("task"), wantCalls,
				{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("a", notStartedResult, true), provider.ToolResult("b", notStartedResult, true)}},
			},
		},
		{
			name: "a user message after unanswered calls",
			snap: transcript.Snapshot{Entries: entries(user, twoCalls, transcript.ToolCall{CallID: "a", Name: "bash"}, transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "go on"}}})},
			want: []provider.Message{
				provider.UserMessage("task"), wantCalls,
				{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("a", interruptedResult, true), provider.ToolResult("b", notStartedResult, true)}},
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

// TestUnanswered checks the entries a resume journals for the calls its
// session's last run left open, and that History then answers every call
// from them.
func TestUnanswered(t *testing.T) {
	t.Parallel()
	user := transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "task"}}}
	calls := func(ids ...string) transcript.AssistantMessage {
		m := transcript.AssistantMessage{StopReason: "tool_use", Content: []transcript.Block{{Type: transcript.BlockText, Text: "working"}}}
		for _, id := range ids {
			m.Content = append(m.Content, transcript.Block{Type: transcript.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{}`)})
		}
		return m
	}
	call := func(id string) transcript.ToolCall { return transcript.ToolCall{CallID: id, Name: "bash"} }
	result := func(id, text string, isError bool) transcript.ToolResult {
		return transcript.ToolResult{CallID: id, Content: []transcript.Block{{Type: transcript.BlockText, Text: text}}, IsError: isError}
	}
	done := func(id string) transcript.ToolCompletion {
		return transcript.ToolCompletion{CallID: id, Status: transcript.ToolOK}
	}
	interrupted := []transcript.Payload{
		result("b", interruptedResult, true),
		transcript.ToolCompletion{CallID: "b", Status: transcript.ToolInterrupted, Error: CompletionError(interruptedResult)},
	}
	tests := []struct {
		name    string
		entries []transcript.Entry
		want    []transcript.Payload
		// started are the calls Started returns: journaled, no result.
		started []string
	}{
		{name: "a new session", entries: nil},
		{name: "a finished turn", entries: entries(user, calls("a"), call("a"), result("a", "out", false), done("a"))},
		{name: "an answer", entries: entries(user, transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "done"}}})},
		{
			name:    "the crash came while the second call ran",
			entries: entries(user, calls("a", "b"), transcript.Usage{Requests: 1}, call("a"), result("a", "out", false), done("a"), call("b"), transcript.Layers{}),
			want:    interrupted,
			started: []string{"b"},
		},
		{
			name:    "the crash came before the second call started",
			entries: entries(user, calls("a", "b"), call("a"), result("a", "out", false), done("a")),
			want:    []transcript.Payload{result("b", notStartedResult, true)},
		},
		{
			name:    "the crash came between a result and its completion",
			entries: entries(user, calls("a", "b"), call("a"), result("a", "failed", true)),
			want:    []transcript.Payload{transcript.ToolCompletion{CallID: "a", Status: transcript.ToolError}, result("b", notStartedResult, true)},
		},
		{
			name:    "an earlier turn's open call is left to History",
			entries: entries(user, calls("b"), call("b"), user),
		},
		{
			name:    "two calls ran at once",
			entries: entries(user, calls("a", "b"), call("a"), call("b")),
			want: []transcript.Payload{
				result("a", interruptedResult, true),
				transcript.ToolCompletion{CallID: "a", Status: transcript.ToolInterrupted, Error: CompletionError(interruptedResult)},
				interrupted[0], interrupted[1],
			},
			started: []string{"a", "b"},
		},
		{
			name:    "a resume already answered it",
			entries: entries(user, calls("b"), call("b"), interrupted[0], interrupted[1]),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			snap := transcript.Snapshot{Entries: tt.entries}
			var started []string
			for _, c := range Started(snap) {
				started = append(started, c.CallID)
			}
			if diff := cmp.Diff(tt.started, started); diff != "" {
				t.Errorf("Started (-want +got):\n%s", diff)
			}
			got := Unanswered(snap)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Unanswered (-want +got):\n%s", diff)
			}
			for _, p := range got {
				snap.Entries = append(snap.Entries, transcript.Entry{Seq: int64(len(snap.Entries) + 1), Payload: p})
			}
			if again := Unanswered(snap); len(again) != 0 {
				t.Errorf("Unanswered after its entries = %v, want none", again)
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

func TestHistoryWithSeqs(t *testing.T) {
	t.Parallel()
	text := func(s string) []transcript.Block { return []transcript.Block{{Type: transcript.BlockText, Text: s}} }
	call := transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockToolUse, ID: "a", Name: "bash"}, {Type: transcript.BlockToolUse, ID: "b", Name: "bash"}}}
	snap := transcript.Snapshot{
		Compaction:    &transcript.Compaction{Replacement: text("summary"), FirstKept: 10},
		CompactionSeq: 20,
		Entries: []transcript.Entry{
			{Seq: 10, Payload: transcript.UserMessage{Content: text("go on")}},
			{Seq: 11, Payload: call},
			{Seq: 12, Payload: transcript.ToolCall{CallID: "a", Name: "bash"}},
			{Seq: 13, Payload: transcript.ToolResult{CallID: "a", Content: text("ok")}},
			{Seq: 14, Payload: transcript.Usage{InputTokens: 1}},
			{Seq: 21, Payload: call}, // its calls never answered: History answers them
		},
	}
	msgs, seqs := HistoryWithSeqs(snap)
	if diff := cmp.Diff(History(snap), msgs); diff != "" {
		t.Errorf("messages differ from History's:\n%s", diff)
	}
	// The replacement, the user message, the call, its results (from the
	// ToolCall entry), the second call, and the results made up for it.
	if diff := cmp.Diff([]int64{20, 10, 11, 12, 21, 0}, seqs); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
}
