package runconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxReportBytes is the most a Report may take once encoded: the kubelet
// keeps at most 4096 bytes of a container's termination message, and a
// truncated JSON document could not be read back at all.
const MaxReportBytes = 4096

// Outcomes a Report carries: the runner's own (transcript.Outcome's
// values, which are stored and never renamed). They are spelled again here
// because the controller links no runner package but this one.
const (
	OutcomeCompleted        = "completed"
	OutcomeBudgetExceeded   = "budget_exceeded"
	OutcomeDeadlineExceeded = "deadline_exceeded"
	OutcomeCancelled        = "cancelled"
	OutcomeModelError       = "model_error"
	OutcomeFailed           = "failed"
	OutcomeAwaitingApproval = "awaiting_approval"
	OutcomeResultInvalid    = "result_invalid"
)

// Report is how an attempt ended, as the runner writes it to its
// termination message for the controller, which never reads the database.
type Report struct {
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	// ExitCode is the runner's exit status.
	ExitCode int `json:"exitCode"`
	// SessionID is the store's session id the attempt worked on.
	SessionID string `json:"sessionID,omitempty"`
	// Reason says why, for outcomes other than completed.
	Reason string `json:"reason,omitempty"`
	// Summary is the model's last message, truncated to fit.
	Summary string `json:"summary,omitempty"`
	Usage   Usage  `json:"usage"`
	// AgentTypes are the children's usage by agent type (persona), at most
	// MaxAgentTypes entries: past that the types that used least are
	// folded into one named "_other".
	AgentTypes []AgentTypeUsage `json:"agentTypes,omitempty"`
	// Approval is the tool call a hook asked a person to approve, with
	// outcome awaiting_approval.
	Approval *PendingApproval `json:"approval,omitempty"`
	// Result is the structured result the session was asked for, when
	// the model submitted a valid one (see ResultRef).
	Result *Result `json:"result,omitempty"`
	// Push is how the delivery of spec.workspace.git.push went.
	Push *PushReport `json:"push,omitempty"`
}

// Result is the structured result of an attempt: the value itself when it
// fits in the report, and always where the store keeps it.
type Result struct {
	// Value is the result, compact JSON; empty when it did not fit in
	// the termination message, which then carries only the reference.
	Value json.RawMessage `json:"value,omitempty"`
	// Seq is the sequence number of the session's result entry, in the
	// session SessionID names.
	Seq int64 `json:"seq"`
}

// PendingApproval is a tool call the session paused on, for the
// controller to show a person: a few hundred bytes at most (see
// MaxPreviewBytes).
type PendingApproval struct {
	CallID string `json:"callID"`
	Tool   string `json:"tool"`
	// Preview is the start of the call's arguments.
	Preview string `json:"preview,omitempty"`
	// Reason is the reason the hooks gave for asking.
	Reason string `json:"reason,omitempty"`
	// AgentID is the subagent (its session id) whose call it is; empty
	// for the session's own call. A decision names the call alone.
	AgentID string `json:"agentID,omitempty"`
}

// MaxPreviewBytes bounds the preview of a pending call's arguments and
// the hooks' reason in a Report.
const MaxPreviewBytes = 240

// Shorten cuts s to at most n bytes, ellipsis included, on a rune
// boundary.
func Shorten(s string, n int) string { return shorten(s, n) }

// Usage is the session's cumulative usage at the end of the attempt.
type Usage struct {
	InputTokens     int64 `json:"inputTokens,omitempty"`
	OutputTokens    int64 `json:"outputTokens,omitempty"`
	CacheReadTokens int64 `json:"cacheReadTokens,omitempty"`
	// Requests counts the session's model requests (turns), all attempts.
	Requests int64 `json:"requests,omitempty"`
	// ToolCalls counts the session's tool calls, all attempts: like the
	// tokens, what the session has used so far, so that the status the
	// controller derives from the last pod alone is the session's.
	ToolCalls int64 `json:"toolCalls,omitempty"`
	// Compactions counts the session's compaction checkpoints, all
	// attempts.
	Compactions int64 `json:"compactions,omitempty"`
	// Subagents counts the children the attempt's session tree spawned;
	// the tokens and requests then are the tree's.
	Subagents int64 `json:"subagents,omitempty"`
	// CostUSD is what the session tree's model calls cost in US dollars,
	// when the model's price is known.
	CostUSD float64 `json:"costUSD,omitempty"`
}

// MaxAgentTypes bounds Usage.AgentTypes, so that the report fits whatever
// personas a session tree used.
const MaxAgentTypes = 8

// AgentTypeUsage is what the children of one agent type used in the
// attempt.
type AgentTypeUsage struct {
	// Name is the persona's name ("default" for none); "_other" holds the
	// types past MaxAgentTypes.
	Name      string `json:"name"`
	Subagents int64  `json:"subagents,omitempty"`
	// Requests counts their model requests.
	Requests        int64 `json:"requests,omitempty"`
	InputTokens     int64 `json:"inputTokens,omitempty"`
	OutputTokens    int64 `json:"outputTokens,omitempty"`
	CacheReadTokens int64 `json:"cacheReadTokens,omitempty"`
}

// maxReasonBytes bounds the reason before the summary is fitted, so that a
// long error message cannot crowd out the summary.
const maxReasonBytes = 1024

// maxPushErrorBytes bounds a failed push's error in a Report.
const maxPushErrorBytes = 512

// EncodeReport encodes r in at most MaxReportBytes: the reason is cut to
// 1 KiB, then the summary to what room is left, then, if need be, the reason
// to what room is left without a summary. Cuts fall on rune boundaries and
// end with "…".
//
// A structured result is kept whole or not at all: when the report does
// not fit with it even without a summary, its value is dropped and only
// its reference (the store's session and sequence number) is kept.
func EncodeReport(r Report) ([]byte, error) {
	if len(r.Reason) > maxReasonBytes {
		r.Reason = shorten(r.Reason, maxReasonBytes)
	}
	if p := r.Push; p != nil {
		c := *p
		c.Error = shorten(c.Error, maxPushErrorBytes)
		r.Push = &c
	}
	if a := r.Approval; a != nil {
		c := *a
		c.Preview, c.Reason = shorten(c.Preview, MaxPreviewBytes), shorten(c.Reason, MaxPreviewBytes)
		r.Approval = &c
	}
	if r.Result != nil && len(r.Result.Value) > 0 {
		if b, err := encodeReport(r); err == nil {
			return b, nil
		}
		r.Result = &Result{Seq: r.Result.Seq}
	}
	return encodeReport(r)
}

// encodeReport fits r in MaxReportBytes as EncodeReport says, without
// touching its result.
func encodeReport(r Report) ([]byte, error) {
	b, err := marshalReport(r)
	if err != nil || len(b) <= MaxReportBytes {
		return b, err
	}
	if r.Summary != "" {
		if b, ok := fit(&r, &r.Summary); ok {
			return b, nil
		}
		r.Summary = ""
	}
	if r.Reason != "" {
		if b, ok := fit(&r, &r.Reason); ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("encode report: over %d bytes without summary and reason", MaxReportBytes)
}

// fit cuts *field to the longest prefix with which r encodes within
// MaxReportBytes. JSON escaping makes a byte of text cost one to six bytes
// encoded, so the length is searched for rather than computed.
func fit(r *Report, field *string) ([]byte, bool) {
	full := *field
	lo, hi := 0, len(full) // lo fits (if anything does), hi does not
	var best []byte
	for lo <= hi {
		mid := (lo + hi) / 2
		*field = shorten(full, mid)
		b, err := marshalReport(*r)
		if err == nil && len(b) <= MaxReportBytes {
			best, lo = b, mid+1
		} else {
			hi = mid - 1
		}
	}
	if best == nil {
		*field = full
		return nil, false
	}
	return best, true
}

func marshalReport(r Report) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// A summary of code is full of <, > and &: escaping them for HTML
	// would triple their cost for no reader that needs it.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// shorten cuts s to at most n bytes, ellipsis included, on a rune boundary.
func shorten(s string, n int) string {
	if n >= len(s) {
		return s
	}
	const ellipsis = "…"
	n -= len(ellipsis)
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

// DecodeReport reads a termination message written by EncodeReport.
func DecodeReport(b []byte) (Report, error) {
	var r Report
	if len(b) == 0 {
		return r, errors.New("decode report: empty termination message")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("decode report: %w", err)
	}
	if r.Outcome == "" {
		return Report{}, errors.New("decode report: no outcome")
	}
	return r, nil
}

// Exit statuses of the runner and of `aerie run`. A CI job can trust them: 0
// only when the session completed. They are defined here, in the contract
// between the runner and the controller, so that the controller maps them to
// an AgentSession's status without importing the runner.
const (
	ExitCompleted = 0
	// ExitFailure: aerie failed at something other than the model (storage,
	// an internal error).
	ExitFailure = 1
	// ExitConfig: the run could not start: bad flags, configuration, an
	// unknown session, a provider without credentials.
	ExitConfig = 2
	// ExitModel: the model API failed after its retries, or the model ended
	// without a usable answer.
	ExitModel = 3
	// ExitBudget: a turn, token or time budget ran out.
	ExitBudget = 4
	// ExitAwaitingApproval: a hook asked a person to approve a tool call
	// (hook approval policy ask); the session paused until a decision
	// (aerie approve, spec.approvals) and a resume.
	ExitAwaitingApproval = 5
	// ExitResultInvalid: a structured result was asked for and the run
	// ended without a valid one.
	ExitResultInvalid = 6
	// ExitInterrupted and ExitTerminated: the run was cancelled by SIGINT or
	// by SIGTERM (or a cancel request), as shells report them.
	ExitInterrupted = 130
	ExitTerminated  = 143
	// ExitKilled is SIGKILL's status, as the kubelet reports a container
	// killed at the end of its grace period.
	ExitKilled = 137
)
