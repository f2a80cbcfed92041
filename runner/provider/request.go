package provider

import (
	"encoding/json"
	"errors"
	"fmt"
)

// SplitSystem checks the conversation's shape and returns the system prompt
// (one text per system message) apart from the rest. Every provider checks
// the same rules, so that a conversation one provider accepts the others
// accept too: system messages first, tool calls only from the assistant, tool
// results only in tool messages.
//
// The conversation shares msgs' array: callers only read it.
func SplitSystem(msgs []Message) (system []string, conv []Message, err error) {
	start := 0
	for i, m := range msgs {
		if m.Role == RoleSystem {
			if start < i {
				return nil, nil, fmt.Errorf(
					"messages[%d]: a system message after the conversation started; system messages must come first", i)
			}
			for j, c := range m.Content {
				if c.Type != ContentText {
					return nil, nil, fmt.Errorf("messages[%d].content[%d]: %s content in a system message; want text", i, j, c.Type)
				}
			}
			system = append(system, m.Text())
			start = i + 1
			continue
		}
		if m.Role != RoleUser && m.Role != RoleAssistant && m.Role != RoleTool {
			return nil, nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
		for j, c := range m.Content {
			if !allowedContent(m.Role, c.Type) {
				return nil, nil, fmt.Errorf("messages[%d].content[%d]: %s content in a %s message", i, j, c.Type, m.Role)
			}
			if (c.Type == ContentToolCall || c.Type == ContentToolResult) && c.ToolCallID == "" {
				return nil, nil, fmt.Errorf("messages[%d].content[%d]: %s without a tool call id", i, j, c.Type)
			}
		}
	}
	conv = msgs[start:len(msgs):len(msgs)]
	if len(conv) == 0 {
		return nil, nil, errors.New("no messages besides the system prompt")
	}
	return system, conv, nil
}

// allowedContent says which content each role may carry.
func allowedContent(r Role, t ContentType) bool {
	switch r {
	case RoleUser:
		return t == ContentText
	case RoleAssistant:
		return t == ContentText || t == ContentReasoning || t == ContentToolCall
	case RoleTool:
		return t == ContentToolResult
	}
	return false
}

// Schema returns the tool's input schema as a JSON object, key by key, for
// the providers to translate into their wire formats. A tool without a
// schema takes no arguments.
func (t Tool) Schema() (map[string]json.RawMessage, error) {
	if t.Name == "" {
		return nil, errors.New("a tool without a name")
	}
	if len(t.InputSchema) == 0 {
		return map[string]json.RawMessage{"type": json.RawMessage(`"object"`), "properties": json.RawMessage(`{}`)}, nil
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema == nil {
		return nil, fmt.Errorf("tool %q: the input schema is not a JSON object", t.Name)
	}
	return schema, nil
}
