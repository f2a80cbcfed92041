package anthropic

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/aerie-run/aerie/runner/provider"
)

// benchConversation is a coding session of n tool-calling turns: a system
// prompt, the task, then per turn the assistant's bash call and its result.
func benchConversation(n int) []provider.Message {
	msgs := []provider.Message{provider.SystemMessage("You are a coding agent."), provider.UserMessage("Fix the flaky test in runner/journal.")}
	for i := range n {
		id := "call_" + strconv.Itoa(i)
		msgs = append(msgs,
			provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text("Let me run the tests."), provider.ToolCall(id, "bash", fmt.Sprintf(`{"command":"go test -run TestJournal/%d ./runner/journal/"}`, i))}},
			provider.Message{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult(id, "ok  \tgithub.com/aerie-run/aerie/runner/journal\t0.123s\n", false)}},
		)
	}
	return msgs
}

// benchTools are n tools the size of aerie's built-in ones: a paragraph of
// description and a schema of four properties.
func benchTools(n int) []provider.Tool {
	tools := make([]provider.Tool, n)
	for i := range tools {
		tools[i] = provider.Tool{
			Name: "tool_" + strconv.Itoa(i),
			Description: "Run a bash command in the workspace and return its combined standard output and error, " +
				"followed by the exit code when it is not zero. The command runs in its own process group, " +
				"which is torn down when it times out (default 120 s, at most 3600 s).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"command":{"type":"string","description":"The bash script to run."},` +
				`"timeout":{"type":"integer","description":"Timeout in seconds (default 120, max 3600); ignored in background mode."},` +
				`"validation":{"type":"boolean","description":"Stop at the first failing command (set -o errexit -o pipefail)."},` +
				`"background":{"type":"boolean","description":"Start the command in the background and return its process id."}` +
				`},"required":["command"],"additionalProperties":false}`),
		}
	}
	return tools
}

// BenchmarkRequest measures building and encoding the body of a
// Messages request for a conversation of 10 and 100 turns, with one tool
// and with twelve (as many as aerie's built-in tools): the work the loop
// does, before the request leaves, at every turn.
func BenchmarkRequest(b *testing.B) {
	a, err := New(provider.Config{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5", APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		turns int
		tools []provider.Tool
	}{
		{"turns=10", 10, []provider.Tool{{Name: "bash", Description: "Run a command.", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}},
		{"turns=100", 100, []provider.Tool{{Name: "bash", Description: "Run a command.", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}},
		{"turns=100/tools=12", 100, benchTools(12)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := provider.Request{Messages: benchConversation(bc.turns), Tools: bc.tools}
			for b.Loop() {
				if _, err := a.body(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
