package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/provider"
)

// TestRequestReusesEncodings checks that a request built from the
// encodings kept from earlier requests is the one built from scratch,
// as the conversation grows, repeats a block, and is compacted.
func TestRequestReusesEncodings(t *testing.T) {
	t.Parallel()
	newClient := func() *Messages {
		a, err := New(provider.Config{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5", APIKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	long := benchConversation(6)
	// The same tool call twice, and reasoning that is and is not sent back.
	long = append(long,
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{{Type: provider.ContentReasoning, Text: "hmm", Signature: "sig"}, {Type: provider.ContentReasoning, Text: "unsigned"}, provider.ToolCall("call_0", "bash", `{"command":"go test"}`)}},
		provider.Message{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("call_0", "FAIL", true)}},
		provider.Message{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("call_0", "FAIL", true)}},
	)
	compacted := append([]provider.Message{provider.SystemMessage("You are a coding agent."), provider.UserMessage("Summary of the work so far.")}, long[8:]...)
	warm, warmBody := newClient(), newClient()
	for i, msgs := range [][]provider.Message{long[:4], long[:8], long, compacted, long, long[:6], long} {
		req := provider.Request{Messages: msgs}
		checkBody(t, warmBody, req)
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
	if n := len(warm.last); n > 40 {
		t.Errorf("%d encodings kept; the last conversation has fewer blocks", n)
	}
}

// checkBody checks that a's body for req is the request that params
// builds, streamed, both as JSON values (the order of the keys differs),
// and that a client without kept encodings makes the same body.
func checkBody(t *testing.T, a *Messages, req provider.Request) {
	t.Helper()
	body, err := a.body(req)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := New(provider.Config{Provider: provider.NameAnthropic, Model: a.model, MaxOutputTokens: a.maxTokens, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := fresh.body(req)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fresh.params(req)
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	// Compared as values: the SDK writes the schema keywords it has no
	// field for in map order, which varies.
	got, fromScratch, want := jsonValue(t, body), jsonValue(t, scratch), jsonValue(t, sdk)
	want["stream"] = true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body differs from the SDK's encoding of the params (-sdk +body):\n%s", diff)
	}
	if diff := cmp.Diff(fromScratch, got); diff != "" {
		t.Errorf("body with kept encodings differs from one made from scratch (-scratch +kept):\n%s", diff)
	}
}

func jsonValue(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return v
}

// TestBody checks the request body against the SDK's encoding of
// the same params: system prompts, tools (with schema keywords the SDK has
// no field for), output limits, and a system prompt and tools that change
// between requests of one client.
func TestBody(t *testing.T) {
	t.Parallel()
	a, err := New(provider.Config{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	conv := benchConversation(3)
	tools := []provider.Tool{
		{Name: "bash", Description: "Run a <command> & \"more\"", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false,"$defs":{"x":{"type":"integer"}}}`)},
		{Name: "noargs"},
	}
	for _, req := range []provider.Request{
		{Messages: conv},
		{Messages: conv, Tools: tools},
		{Messages: conv, Tools: tools, MaxOutputTokens: 77},
		{Messages: conv[1:], Tools: tools[:1]},
		{Messages: append([]provider.Message{provider.SystemMessage("first"), provider.SystemMessage("second \u2028")}, conv[1:]...), Tools: tools},
		{Messages: append([]provider.Message{provider.SystemMessage("first")}, conv[1:]...), Tools: tools},
		{Messages: conv, Tools: tools},
	} {
		checkBody(t, a, req)
	}
	if _, err := a.body(provider.Request{Messages: conv, Tools: []provider.Tool{{Name: "bad", InputSchema: json.RawMessage(`[1]`)}}}); err == nil {
		t.Error("a tool whose schema is not an object was encoded")
	}
	if _, err := a.body(provider.Request{Messages: []provider.Message{provider.SystemMessage("only")}}); err == nil {
		t.Error("a request without a conversation was encoded")
	}
}

// FuzzBody checks that the body made of kept encodings is the
// SDK's encoding of the params, whatever the texts, arguments and tool
// description, and as the conversation grows and changes.
func FuzzBody(f *testing.F) {
	f.Add("hello", `{"command":"ls"}`, "result", "Run a command.")
	f.Add("<&>\u2028\\", "not json", "", "")
	f.Add("", `{"a":[1,{"b":null}]}`, "\x00\xff", "é")
	a, err := New(provider.Config{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5", APIKey: "k"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text, args, result, desc string) {
		conv := []provider.Message{
			provider.SystemMessage("system"),
			provider.UserMessage(text),
			{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text(text), provider.ToolCall("c1", "bash", args)}},
			{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("c1", result, result == "")}},
		}
		tools := []provider.Tool{{Name: "bash", Description: desc}}
		for _, msgs := range [][]provider.Message{conv[:2], conv, append(conv[:1:1], conv[2:]...), conv} {
			if _, _, err := provider.SplitSystem(msgs); err != nil {
				continue
			}
			checkBody(t, a, provider.Request{Messages: msgs, Tools: tools})
		}
	})
}

// TestRequestMatchesSDK checks the messages params builds from
// encoded blocks against the SDK's own message constructors, byte for byte:
// merged sides, blocks that are not sent, arguments that are not JSON,
// characters JSON escapes.
func TestRequestMatchesSDK(t *testing.T) {
	t.Parallel()
	a, err := New(provider.Config{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := append(benchConversation(3),
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
			{Type: provider.ContentReasoning, Text: "hmm", Signature: "sig"},
			{Type: provider.ContentReasoning, Signature: "encrypted", Redacted: true},
			{Type: provider.ContentReasoning, Text: "from another provider"},
			provider.Text(""),
			provider.ToolCall("c", "bash", "not json"),
		}},
		provider.Message{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("c", "", true)}},
		provider.UserMessage("more \u2028 \"quoted\" <html> \\ é"),
	)
	p, err := a.params(provider.Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	_, conv, err := provider.SplitSystem(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var turns [][]anthropic.ContentBlockParamUnion
	var sides []bool
	for _, m := range conv {
		var blocks []anthropic.ContentBlockParamUnion
		for _, c := range m.Content {
			if b, ok := contentBlock(c); ok {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		assistant := m.Role == provider.RoleAssistant
		if n := len(turns); n > 0 && sides[n-1] == assistant {
			turns[n-1] = append(turns[n-1], blocks...)
			continue
		}
		turns = append(turns, blocks)
		sides = append(sides, assistant)
	}
	// The last block takes the rolling cache breakpoint.
	last := turns[len(turns)-1]
	*last[len(last)-1].GetCacheControl() = anthropic.NewCacheControlEphemeralParam()
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
