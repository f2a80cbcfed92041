package events

import (
	"encoding/json"
	"time"

	"github.com/aerie-run/aerie/runner/transcript"
)

// Type says what an Event reports.
type Type string

// The events of a run, in the order they can happen.
const (
	SessionStart     Type = "session_start"
	UserMessage      Type = "user_message"
	TurnStart        Type = "turn_start"
	TextDelta        Type = "text_delta"
	ReasoningDelta   Type = "reasoning_delta"
	AssistantMessage Type = "assistant_message"
	Usage            Type = "usage"
	ToolCall         Type = "tool_call"
	ToolResult       Type = "tool_result"
	Warning          Type = "warning"
	// Hook reports what lifecycle hooks decided: Status is
	// "<event>:<decision>", Reason their reason, Text the context they added.
	Hook Type = "hook"
	// Reload reports the session's extensions re-discovered at a turn
	// boundary after extension_manage changed them: Status is "reloaded"
	// or "failed", Text a line per changed artifact with its state, Reason
	// the failure.
	Reload Type = "extensions_reload"
	// Compaction reports a compaction checkpoint journaled (Seq): the
	// conversation before it was replaced by a summary. Compaction says
	// what started it, how many messages it replaced, and the estimated
	// tokens of the next request before and after.
	Compaction Type = "compaction"
	// ApprovalRequested reports a tool call a hook asked a person to
	// approve, under the "ask" policy: the session pauses on it (outcome
	// awaiting_approval) until a decision. CallID and Tool name the call,
	// Arguments is a preview of its arguments, Reason the hooks' reason.
	ApprovalRequested Type = "approval_requested"
	// SubagentStart reports a child agent started (Session is its
	// session, Text its task), SubagentStop one that ended (Outcome,
	// Reason, Text its answer, Usage its own); AgentType is its persona.
	// The events of a child's loop carry AgentID, and ParentID the
	// session that spawned it, so that a reader can place each event in
	// the tree; the root's events carry neither.
	SubagentStart Type = "subagent_start"
	SubagentStop  Type = "subagent_stop"
	End           Type = "end"
	SessionEnd    Type = "session_end"
	// Result carries the structured result a run was asked for (Result),
	// with the Seq of its journal entry: after session_end, the last
	// event of a run that got one.
	Result Type = "result"
)

// Event is one thing that happened in a run, for people and programs
// watching it. Which fields are set depends on Type.
type Event struct {
	Type Type      `json:"type"`
	Time time.Time `json:"time"`
	// Session is set on session events.
	Session string `json:"session,omitempty"`
	// Seq is the journal sequence number of the entry the event recorded.
	Seq  int64 `json:"seq,omitempty"`
	Turn int   `json:"turn,omitempty"`
	// Text is the message text, the delta, or the tool result.
	Text       string `json:"text,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	Tool       string `json:"tool,omitempty"`
	// Arguments is the tool call's arguments as the model wrote them.
	Arguments string        `json:"arguments,omitempty"`
	IsError   bool          `json:"is_error,omitempty"`
	Status    string        `json:"status,omitempty"`
	Duration  time.Duration `json:"duration_ns,omitempty"`
	// Process is set on tool_result when the tool ran a command: how long
	// the command lived, from its start to its exit, within Duration.
	Process time.Duration      `json:"process_ns,omitempty"`
	Usage   *transcript.Usage  `json:"usage,omitempty"`
	Outcome transcript.Outcome `json:"outcome,omitempty"`
	Reason  string             `json:"reason,omitempty"`
	// Provider and Model are set on session_start.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Messages are a hook event's system messages: for the people
	// watching the run, not for the model.
	Messages []string `json:"messages,omitempty"`
	// Compaction is set on compaction.
	Compaction *transcript.Provenance `json:"compaction,omitempty"`
	// ExitCode is set on session_end.
	ExitCode *int `json:"exit_code,omitempty"`
	// AgentID is the child session whose loop the event comes from, and
	// ParentID the session that spawned it; both empty for the root.
	AgentID  string `json:"agent_id,omitempty"`
	ParentID string `json:"parent_id,omitempty"`
	// AgentType is the child's persona, on subagent events.
	AgentType string `json:"agent_type,omitempty"`
	// Subagents counts the children spawned, on session_end.
	Subagents int `json:"subagents,omitempty"`
	// Result is set on result: the value, JSON.
	Result json.RawMessage `json:"result,omitempty"`
}
