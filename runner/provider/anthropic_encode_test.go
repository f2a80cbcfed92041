package provider

import (
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestAnthropicRequestReusesEncodings checks that a request built from the
// encodings kept from earlier requests is the one built from scratch,
// as the conversation grows, repeats a block, and is compacted.
func TestAnthropicRequestReusesEncodings(t *testing.T) {
	t.Parallel()
	newClient := func() *Anthropic {
		a, err := NewAnthropic(Config{Provider: NameAnthropic, Model: "claude-sonnet-4-5", APIKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	long := benchConversation(6)
	// The same tool call twice, and reasoning that is and is not sent back.
	long = append(long,
		Message{Role: RoleAssistant, Content: []Content{{Type: ContentReasoning, Text: "hmm", Signature: "sig"}, {Type: ContentReasoning, Text: "unsigned"}, ToolCall("call_0", "bash", `{"command":"go test"}`)}},
		Message{Role: RoleTool, Content: []Content{ToolResult("call_0", "FAIL", true)}},
		Message{Role: RoleTool, Content: []Content{ToolResult("call_0", "FAIL", true)}},
	)
	compacted := append([]Message{SystemMessage("You are a coding agent."), UserMessage("Summary of the work so far.")}, long[8:]...)
	warm := newClient()
	for i, msgs := range [][]Message{long[:4], long[:8], long, compacted, long} {
		req := Request{Messages: msgs}
		got, err := warm.params(req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := newClient().params(req)
		if err != nil {
			t.Fatal(err)
		}
		gotJSON, err := got.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, err := want.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("request %d with kept encodings:\n%s\nfrom scratch:\n%s", i, gotJSON, wantJSON)
		}
	}
	if n := len(warm.blocks); n > 40 {
		t.Errorf("%d encodings kept; the last conversation has fewer blocks", n)
	}
}

// TestAnthropicRequestMatchesSDK checks the messages params builds from
// encoded blocks against the SDK's own message constructors, byte for byte:
// merged sides, blocks that are not sent, arguments that are not JSON,
// characters JSON escapes.
func TestAnthropicRequestMatchesSDK(t *testing.T) {
	t.Parallel()
	a, err := NewAnthropic(Config{Provider: NameAnthropic, Model: "claude-sonnet-4-5", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := append(benchConversation(3),
		Message{Role: RoleAssistant, Content: []Content{
			{Type: ContentReasoning, Text: "hmm", Signature: "sig"},
			{Type: ContentReasoning, Signature: "encrypted", Redacted: true},
			{Type: ContentReasoning, Text: "from another provider"},
			Text(""),
			ToolCall("c", "bash", "not json"),
		}},
		Message{Role: RoleTool, Content: []Content{ToolResult("c", "", true)}},
		UserMessage("more \u2028 \"quoted\" <html> \\ é"),
	)
	p, err := a.params(Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	_, conv, err := splitSystem(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var turns [][]anthropic.ContentBlockParamUnion
	var sides []bool
	for _, m := range conv {
		var blocks []anthropic.ContentBlockParamUnion
		for _, c := range m.Content {
			if b, ok := anthropicContentBlock(c); ok {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		assistant := m.Role == RoleAssistant
		if n := len(turns); n > 0 && sides[n-1] == assistant {
			turns[n-1] = append(turns[n-1], blocks...)
			continue
		}
		turns = append(turns, blocks)
		sides = append(sides, assistant)
	}
	var want []anthropic.MessageParam
	for i, blocks := range turns {
		if sides[i] {
			want = append(want, anthropic.NewAssistantMessage(blocks...))
		} else {
			want = append(want, anthropic.NewUserMessage(blocks...))
		}
	}
	if len(p.Messages) != len(want) {
		t.Fatalf("%d messages, want %d", len(p.Messages), len(want))
	}
	for i := range want {
		got, err := p.Messages[i].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		w, err := want[i].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(w) {
			t.Errorf("message %d:\n%s\nthe SDK's:\n%s", i, got, w)
		}
	}
}
