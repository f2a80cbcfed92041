package agent

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// blockRedactedThinking stores reasoning the provider returned encrypted;
// its Signature holds the data. The store keeps block types it does not
// know, so this needs no schema change.
const blockRedactedThinking transcript.BlockType = "redacted_thinking"

// The results given to a tool call that was never answered: the session
// stopped between the model's call and its result. A call is journaled
// durably before it starts, so one with a ToolCall entry may have partly
// run, and one without never started.
const (
	interruptedResult = "interrupted: the session stopped while this tool call was running; " +
		"it may have partly run, so check its effects before you run it again"
	notStartedResult = "not run: the session stopped before this tool call started"
)

// assistantEntry is the journal entry of a model response.
func assistantEntry(resp provider.Response) transcript.AssistantMessage {
	m := transcript.AssistantMessage{
		StopReason: string(resp.StopReason),
		Content:    make([]transcript.Block, 0, len(resp.Message.Content)),
	}
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
			m.Content = append(m.Content, transcript.Block{
				Type: transcript.BlockToolUse, ID: c.ToolCallID, Name: c.ToolName, Input: storedArguments(c.Arguments),
			})
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
//
// A resume journals the answers to the calls a crash left open first (see
// Unanswered), so that History finds them; the results History makes up
// itself are for older streams, which may have such calls anywhere.
func History(snap transcript.Snapshot) []provider.Message {
	msgs, _ := HistoryWithSeqs(snap)
	return msgs
}

// HistoryWithSeqs is History with, for each message, the sequence number of
// the journal entry it starts with (the compaction checkpoint's for the
// replacement; 0 for a result History makes up), for Config.HistorySeqs.
func HistoryWithSeqs(snap transcript.Snapshot) ([]provider.Message, []int64) {
	var msgs []provider.Message
	var seqs []int64
	add := func(m provider.Message, seq int64) {
		msgs = append(msgs, m)
		seqs = append(seqs, seq)
	}
	if snap.Compaction != nil {
		add(provider.Message{Role: provider.RoleUser, Content: contents(snap.Compaction.Replacement)}, snap.CompactionSeq)
	}
	started := map[string]bool{} // calls with a ToolCall entry
	var callSeq int64            // the first ToolCall entry since the last message
	closeOpen := func() {
		n := len(msgs)
		msgs = closeCalls(msgs, started)
		for range len(msgs) - n {
			seqs = append(seqs, 0)
		}
	}
	for _, e := range snap.Entries {
		switch p := e.Payload.(type) {
		case transcript.UserMessage:
			closeOpen()
			add(provider.Message{Role: provider.RoleUser, Content: contents(p.Content)}, e.Seq)
			callSeq = 0
		case transcript.AssistantMessage:
			closeOpen()
			add(provider.Message{Role: provider.RoleAssistant, Content: contents(p.Content)}, e.Seq)
			callSeq = 0
		case transcript.ToolCall:
			started[p.CallID] = true
			if callSeq == 0 {
				callSeq = e.Seq
			}
		case transcript.ToolResult:
			var text strings.Builder
			for _, b := range p.Content {
				text.WriteString(b.Text)
			}
			c := provider.ToolResult(p.CallID, text.String(), p.IsError)
			if n := len(msgs); n > 0 && msgs[n-1].Role == provider.RoleTool {
				msgs[n-1].Content = append(msgs[n-1].Content, c)
			} else {
				add(provider.Message{Role: provider.RoleTool, Content: []provider.Content{c}}, cmp.Or(callSeq, e.Seq))
			}
		}
	}
	closeOpen()
	return msgs, seqs
}

// closeCalls gives every tool call of the last assistant message (and of the
// tool message after it) a result, so the conversation can be sent again:
// interrupted if it started, else not run.
func closeCalls(msgs []provider.Message, started map[string]bool) []provider.Message {
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
			text := notStartedResult
			if started[c.ToolCallID] {
				text = interruptedResult
			}
			missing = append(missing, provider.ToolResult(c.ToolCallID, text, true))
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

// Unanswered returns the entries that answer the tool calls a crash left
// open at the end of a stored session, for a resume to journal before it
// goes on: every call of the last assistant message without a result gets
// one, interrupted (with an interrupted completion) when its ToolCall entry
// says it may have started, else not run; a call whose result was stored
// but not its completion gets the completion. The session's conversation
// then stays as the model will see it, and its last calls are closed, so a
// fork can cut after them. Calls left open before later messages, by older
// versions, are left to History. A call pending a person's approval (see
// PendingApproval) is left open.
func Unanswered(snap transcript.Snapshot) []transcript.Payload {
	last := lastAssistant(snap)
	if last < 0 {
		return nil
	}
	called := map[string]bool{}
	results := map[string]transcript.ToolResult{}
	completed := map[string]bool{}
	for _, e := range snap.Entries[last+1:] {
		switch p := e.Payload.(type) {
		case transcript.ToolCall:
			called[p.CallID] = true
		case transcript.ToolResult:
			results[p.CallID] = p
		case transcript.ToolCompletion:
			completed[p.CallID] = true
		}
	}
	// A call paused for a person's approval is not interrupted: it waits
	// for its decision (see ResolveApproval).
	pending, paused := PendingApproval(snap)
	var out []transcript.Payload
	for _, b := range snap.Entries[last].Payload.(transcript.AssistantMessage).Content {
		if b.Type != transcript.BlockToolUse || (paused && b.ID == pending.Call.CallID) {
			continue
		}
		res, answered := results[b.ID]
		switch {
		case !answered && called[b.ID]:
			out = append(out,
				transcript.ToolResult{
					CallID:  b.ID,
					Content: []transcript.Block{{Type: transcript.BlockText, Text: interruptedResult}},
					IsError: true,
				},
				transcript.ToolCompletion{
					CallID: b.ID, Status: transcript.ToolInterrupted, Error: CompletionError(interruptedResult),
				})
		case !answered:
			out = append(out, transcript.ToolResult{
				CallID:  b.ID,
				Content: []transcript.Block{{Type: transcript.BlockText, Text: notStartedResult}},
				IsError: true,
			})
		case called[b.ID] && !completed[b.ID]:
			status := transcript.ToolOK
			if res.IsError {
				status = transcript.ToolError
			}
			out = append(out, transcript.ToolCompletion{CallID: b.ID, Status: status})
		}
	}
	return out
}

// Started returns the calls of the last assistant message that were
// journaled as started (a ToolCall entry) and have no result: those a
// crash may have left running, which a resume answers (see Unanswered) or,
// for a call that can be continued such as a subagent's, continues.
func Started(snap transcript.Snapshot) []transcript.ToolCall {
	last := lastAssistant(snap)
	if last < 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, e := range snap.Entries[last+1:] {
		if p, ok := e.Payload.(transcript.ToolResult); ok {
			answered[p.CallID] = true
		}
	}
	var calls []transcript.ToolCall
	for _, e := range snap.Entries[last+1:] {
		if p, ok := e.Payload.(transcript.ToolCall); ok && !answered[p.CallID] {
			calls = append(calls, p)
		}
	}
	return calls
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
