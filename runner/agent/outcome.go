package agent

import (
	"fmt"
	"time"

	"github.com/aerie-run/aerie/runner/transcript"
)

// Outcome is how a run ended. The values are stored in completion
// checkpoints and reported to the controller: never rename one.
type Outcome string

// The outcomes of a run.
const (
	// Completed: the model finished its answer.
	Completed Outcome = "completed"
	// BudgetExceeded: a turn or token budget ran out.
	BudgetExceeded Outcome = "budget_exceeded"
	// DeadlineExceeded: the wall-time budget ran out.
	DeadlineExceeded Outcome = "deadline_exceeded"
	// Cancelled: the run was stopped from outside (a signal, spec.cancel).
	Cancelled Outcome = "cancelled"
	// ModelError: the model API failed after its retries, or the model
	// ended without a usable answer (refusal, cut off, context full).
	ModelError Outcome = "model_error"
	// Failed: aerie itself failed (configuration, storage at launch).
	Failed Outcome = "failed"
)

// Status is what a StopCondition looks at.
type Status struct {
	// Turns counts the model requests made so far in this run.
	Turns int
	// Usage is the session's cumulative usage.
	Usage transcript.Usage
}

// StopCondition ends a run before the next model request when it returns
// true, with the outcome and a reason.
type StopCondition func(s Status) (Outcome, string, bool)

// MaxTurns stops a run after n model requests.
func MaxTurns(n int) StopCondition {
	return func(s Status) (Outcome, string, bool) {
		if s.Turns >= n {
			return BudgetExceeded, fmt.Sprintf("the turn budget of %d is spent", n), true
		}
		return "", "", false
	}
}

// MaxSessionTurns stops a run once the session has made n model requests,
// counting those of the runs before this one (its cumulative usage): the
// budget of a session that several runs continue, such as the attempts of
// an AgentSession whose runner pod was lost.
func MaxSessionTurns(n int) StopCondition {
	return func(s Status) (Outcome, string, bool) {
		if s.Usage.Requests >= int64(n) {
			return BudgetExceeded, fmt.Sprintf("the session's turn budget of %d is spent", n), true
		}
		return "", "", false
	}
}

// MaxTokens stops a run once the session's input and output tokens together
// reach n.
func MaxTokens(n int64) StopCondition {
	return func(s Status) (Outcome, string, bool) {
		if used := s.Usage.InputTokens + s.Usage.OutputTokens; used >= n {
			return BudgetExceeded, fmt.Sprintf("the token budget of %d is spent (%d used)", n, used), true
		}
		return "", "", false
	}
}

// EventType says what an Event reports.
type EventType string

// The events of a run, in the order they can happen.
const (
	EventSessionStart     EventType = "session_start"
	EventUserMessage      EventType = "user_message"
	EventTurnStart        EventType = "turn_start"
	EventTextDelta        EventType = "text_delta"
	EventReasoningDelta   EventType = "reasoning_delta"
	EventAssistantMessage EventType = "assistant_message"
	EventUsage            EventType = "usage"
	EventToolCall         EventType = "tool_call"
	EventToolResult       EventType = "tool_result"
	EventWarning          EventType = "warning"
	// EventHook reports what lifecycle hooks decided: Status is
	// "<event>:<decision>", Reason their reason, Text the context they added.
	EventHook EventType = "hook"
	// EventReload reports the session's extensions re-discovered at a turn
	// boundary after extension_manage changed them: Status is "reloaded"
	// or "failed", Text a line per changed artifact with its state, Reason
	// the failure.
	EventReload     EventType = "extensions_reload"
	EventEnd        EventType = "end"
	EventSessionEnd EventType = "session_end"
)

// Event is one thing that happened in a run, for people and programs
// watching it. Which fields are set depends on Type.
type Event struct {
	Type EventType `json:"type"`
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
	Process time.Duration     `json:"process_ns,omitempty"`
	Usage   *transcript.Usage `json:"usage,omitempty"`
	Outcome Outcome           `json:"outcome,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	// Provider and Model are set on session_start.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Messages are a hook event's system messages: for the people
	// watching the run, not for the model.
	Messages []string `json:"messages,omitempty"`
	// ExitCode is set on session_end.
	ExitCode *int `json:"exit_code,omitempty"`
}
