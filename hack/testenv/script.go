package testenv

import (
	"encoding/json"
	"strings"
)

// The script of a fake model, in the few shapes the end-to-end tests of
// aerie run and of the controller's pods both write: a call, a turn of
// calls, an answer, and the spawn_agent call that starts a subagent whose
// conversation (see ModelServer.Conversation) its task keys.

// Call is a tool call of tool name with args, marshalled to JSON.
func Call(id, name string, args any) ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return ToolCall{ID: id, Name: name, Arguments: string(b)}
}

// ToolTurn is a model turn that makes calls, with a small usage.
func ToolTurn(calls ...ToolCall) Turn {
	return Turn{ToolCalls: calls, Usage: TokenUsage{InputTokens: 100, OutputTokens: 10}}
}

// Answer is a model turn that answers text and calls nothing.
func Answer(text string) Turn {
	return Turn{Text: text, Usage: TokenUsage{InputTokens: 100, OutputTokens: 5}}
}

// BashTurn is a model turn that runs command with the bash tool.
func BashTurn(id, command string) Turn {
	return ToolTurn(Call(id, "bash", map[string]any{"command": command}))
}

// Spawn is a spawn_agent call of a subagent with task; a conversation
// keyed by the start of task scripts the subagent's model.
func Spawn(id, task string) ToolCall {
	return Call(id, "spawn_agent", map[string]any{"task": task})
}

// FirstUser is the text of the request's first user message, which keys
// its conversation: a subagent's is its task.
func (r ModelRequest) FirstUser() string { return firstUserText(r.Body) }

// RequestsOf returns the requests received so far of the conversation
// whose first user message starts with key, in order.
func (s *ModelServer) RequestsOf(key string) []ModelRequest {
	var out []ModelRequest
	for _, r := range s.Requests() {
		if strings.HasPrefix(r.FirstUser(), key) {
			out = append(out, r)
		}
	}
	return out
}
