package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/aerie-run/aerie/runner/tools"
)

// ToolName is the memory tool's name.
const ToolName = "memory"

// Tool is the memory tool over m.
func (m *Memory) Tool() tools.Tool { return memoryTool{m} }

type memoryTool struct{ m *Memory }

func (memoryTool) Name() string { return ToolName }

func (t memoryTool) Description() string {
	l := t.m.limits
	return "Save what a later session should know, as short self-contained entries: target project (MEMORY.md) for " +
		"facts about this code base — commands, conventions, pitfalls, decisions — and target user (USER.md) for the " +
		"user's preferences. action add appends content as a new entry; replace puts content in place of the one entry " +
		"that contains old_text; remove deletes that entry. Memory reaches the system prompt of the next session, not " +
		fmt.Sprintf("this one. Caps: %d bytes of project memory, %d of user memory, %d per entry; ",
			l.Project, l.User, l.Entry) +
		"remove or merge stale entries rather than piling up new ones. Never save secrets."
}

func (memoryTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"target":{"type":"string","enum":["project","user"],"description":"project (MEMORY.md) or user (USER.md)"},` +
		`"action":{"type":"string","enum":["add","replace","remove"]},` +
		`"content":{"type":"string","description":"the entry to add, or the replacement (add, replace)"},` +
		`"old_text":{"type":"string","description":"a part of the one entry to replace or remove"}},` +
		`"required":["target","action"],"additionalProperties":false}`)
}

type toolArgs struct {
	Target  string `json:"target"`
	Action  string `json:"action"`
	Content string `json:"content"`
	OldText string `json:"old_text"`
}

func (t memoryTool) Run(ctx context.Context, call json.RawMessage) tools.Result {
	var a toolArgs
	dec := json.NewDecoder(bytes.NewReader(call))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return tools.Result{Content: "memory: invalid arguments: " + err.Error(), IsError: true}
	}
	target, err := ParseTarget(a.Target)
	if err != nil {
		return tools.Result{Content: "memory: " + err.Error(), IsError: true}
	}
	msg, err := t.m.Apply(ctx, Op{Target: target, Action: Action(a.Action), Content: a.Content, OldText: a.OldText})
	if err != nil {
		return tools.Result{Content: "memory: " + err.Error(), IsError: true}
	}
	return tools.Result{Content: msg}
}
