package agent

import (
	"encoding/json"
	"strings"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// blockRedactedThinking stores reasoning the provider returned encrypted;
// its Signature holds the data. The store keeps block types it does not
// know, so this needs no schema change.
const blockRedactedThinking transcript.BlockType = "redacted_thinking"

// interruptedResult is the result given to a tool call that was never
// answered: the run stopped between the model's call and its result.
const interruptedResult = "not run: the session stopped before this tool call completed"

// assistantEntry is the journal entry of a model response.
func assistantEntry(resp provider.Response) transcript.AssistantMessage {
	m := transcript.AssistantMessage{StopReason: string(resp.StopReason), Content: make([]transcript.Block, 0, len(resp.Message.Content))}
	for _, c := range resp.Message.Content {
		switch c.Type {
		case provider.ContentText:
			m.Content = append(m.Content, transcript.Block{Type: transcript.BlockText, Text: c.Text})
		case provider.ContentReasoning:
			t := transcript.BlockThinking
			if c.Redacted {
				t = blockRedactedThinking
			}
			m.Content = append(m.Content, transcript.Block{Type: t, Text: c.Text, Signature: c.Signature})
		case provider.ContentToolCall:
			m.Content = append(m.Content, transcript.Block{Type: transcript.BlockToolUse, ID: c.ToolCallID, Name: c.ToolName, Input: storedArguments(c.Arguments)})
		}
	}
	return m
}

// storedArguments is how a tool call's arguments are stored: the JSON the
// model wrote (compacted, as the store encodes it), or, when it is not valid
// JSON, a JSON string holding the text, so that the malformed call is kept
// (invalid UTF-8 becomes U+FFFD). Arguments are always an
// object, so a stored string is never a valid call's arguments.
func storedArguments(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return nil
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args) // a string always encodes
	return b
}

// restoredArguments reverses storedArguments.
func restoredArguments(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// History rebuilds the conversation of a stored session for a resume: the
// compaction replacement, if any, as the first user message, then the
// active messages. Consecutive tool results become one tool message, as the
// providers expect, and a tool call left without a result (the run stopped
// between the two) gets an error result saying so.
func History(snap transcript.Snapshot) []provider.Message {
	var msgs []provider.Message
	if snap.Compaction != nil {
		msgs = append(msgs, provider.Message{Role: provider.RoleUser, Content: contents(snap.Compaction.Replacement)})
	}
	for _, e := range snap.Entries {
		switch p := e.Payload.(type) {
		case transcript.UserMessage:
			msgs = closeCalls(msgs)
			msgs = append(msgs, provider.Message{Role: provider.RoleUser, Content: contents(p.Content)})
		case transcript.AssistantMessage:
			msgs = closeCalls(msgs)
			msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: contents(p.Content)})
		case transcript.ToolResult:
			var text strings.Builder
			for _, b := range p.Content {
				text.WriteString(b.Text)
			}
			c := provider.ToolResult(p.CallID, text.String(), p.IsError)
			if n := len(msgs); n > 0 && msgs[n-1].Role == provider.RoleTool {
				msgs[n-1].Content = append(msgs[n-1].Content, c)
			} else {
				msgs = append(msgs, provider.Message{Role: provider.RoleTool, Content: []provider.Content{c}})
			}
		}
	}
	return closeCalls(msgs)
}

// closeCalls gives every tool call of the last assistant message (and of the
// tool message after it) a result, so the conversation can be sent again.
func closeCalls(msgs []provider.Message) []provider.Message {
	n := len(msgs)
	var call provider.Message
	switch {
	case n >= 1 && msgs[n-1].Role == provider.RoleAssistant:
		call = msgs[n-1]
	case n >= 2 && msgs[n-1].Role == provider.RoleTool && msgs[n-2].Role == provider.RoleAssistant:
		call = msgs[n-2]
	default:
		return msgs
	}
	answered := map[string]bool{}
	if msgs[n-1].Role == provider.RoleTool {
		for _, c := range msgs[n-1].Content {
			answered[c.ToolCallID] = true
		}
	}
	var missing []provider.Content
	for _, c := range call.ToolCalls() {
		if !answered[c.ToolCallID] {
			missing = append(missing, provider.ToolResult(c.ToolCallID, interruptedResult, true))
		}
	}
	if len(missing) == 0 {
		return msgs
	}
	if msgs[n-1].Role == provider.RoleTool {
		msgs[n-1].Content = append(msgs[n-1].Content, missing...)
		return msgs
	}
	return append(msgs, provider.Message{Role: provider.RoleTool, Content: missing})
}

func contents(blocks []transcript.Block) []provider.Content {
	cs := make([]provider.Content, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case transcript.BlockText:
			cs = append(cs, provider.Text(b.Text))
		case transcript.BlockThinking:
			cs = append(cs, provider.Content{Type: provider.ContentReasoning, Text: b.Text, Signature: b.Signature})
		case blockRedactedThinking:
			cs = append(cs, provider.Content{Type: provider.ContentReasoning, Signature: b.Signature, Redacted: true})
		case transcript.BlockToolUse:
			cs = append(cs, provider.ToolCall(b.ID, b.Name, restoredArguments(b.Input)))
		}
	}
	return cs
}
