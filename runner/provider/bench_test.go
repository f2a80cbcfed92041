package provider

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// benchConversation is a coding session of n tool-calling turns: a system
// prompt, the task, then per turn the assistant's bash call and its result.
func benchConversation(n int) []Message {
	msgs := []Message{SystemMessage("You are a coding agent."), UserMessage("Fix the flaky test in runner/journal.")}
	for i := range n {
		id := "call_" + strconv.Itoa(i)
		msgs = append(msgs,
			Message{Role: RoleAssistant, Content: []Content{Text("Let me run the tests."), ToolCall(id, "bash", fmt.Sprintf(`{"command":"go test -run TestJournal/%d ./runner/journal/"}`, i))}},
			Message{Role: RoleTool, Content: []Content{ToolResult(id, "ok  \tgithub.com/aerie-run/aerie/runner/journal\t0.123s\n", false)}},
		)
	}
	return msgs
}

// BenchmarkAnthropicRequest measures building and encoding the body of a
// Messages request for a conversation of 10 and 100 turns: the work the
// loop does, before the request leaves, at every turn.
func BenchmarkAnthropicRequest(b *testing.B) {
	a, err := NewAnthropic(Config{Provider: NameAnthropic, Model: "claude-sonnet-4-5", APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	for _, turns := range []int{10, 100} {
		b.Run("turns="+strconv.Itoa(turns), func(b *testing.B) {
			req := Request{Messages: benchConversation(turns), Tools: []Tool{{Name: "bash", Description: "Run a command.", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}}
			for b.Loop() {
				p, err := a.params(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.MarshalJSON(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
