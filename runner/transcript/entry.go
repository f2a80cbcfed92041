package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ErrCorruptEntry: a stored entry cannot be decoded; see EntryError.
var ErrCorruptEntry = errors.New("corrupt entry")

// EntryKind names the type of an entry's payload. It is stored beside the
// JSON payload and selects how the payload is decoded.
type EntryKind string

// The entry kinds of the ordered session stream. The values are stored in
// the database: never rename one, only add.
const (
	KindUserMessage      EntryKind = "user_message"
	KindAssistantMessage EntryKind = "assistant_message"
	KindToolResult       EntryKind = "tool_result"
	KindToolCall         EntryKind = "tool_call"
	KindToolCompletion   EntryKind = "tool_completion"
	KindProviderChange   EntryKind = "provider_change"
	KindModelChange      EntryKind = "model_change"
	KindPersonaChange    EntryKind = "persona_change"
	KindReasoningChange  EntryKind = "reasoning_change"
	KindUsage            EntryKind = "usage"
	KindCheckpoint       EntryKind = "checkpoint"
	KindCompaction       EntryKind = "compaction"
	KindFork             EntryKind = "fork"
	KindSubagentOutcome  EntryKind = "subagent_outcome"
	KindLayers           EntryKind = "layers"
	KindHookVerdict      EntryKind = "hook_verdict"
	KindApprovalRequest  EntryKind = "approval_request"
	KindApprovalDecision EntryKind = "approval_decision"
	KindWorkspaceDiff    EntryKind = "workspace_diff"
	KindResult           EntryKind = "result"
)

// KindOf returns the EntryKind stored as b. It does not allocate for the
// kinds of this package, whose values are constants: reading a long session
// converts a stored kind for every entry.
func KindOf(b []byte) EntryKind {
	switch EntryKind(b) {
	case KindUserMessage:
		return KindUserMessage
	case KindAssistantMessage:
		return KindAssistantMessage
	case KindToolResult:
		return KindToolResult
	case KindToolCall:
		return KindToolCall
	case KindToolCompletion:
		return KindToolCompletion
	case KindProviderChange:
		return KindProviderChange
	case KindModelChange:
		return KindModelChange
	case KindPersonaChange:
		return KindPersonaChange
	case KindReasoningChange:
		return KindReasoningChange
	case KindUsage:
		return KindUsage
	case KindCheckpoint:
		return KindCheckpoint
	case KindCompaction:
		return KindCompaction
	case KindFork:
		return KindFork
	case KindSubagentOutcome:
		return KindSubagentOutcome
	case KindLayers:
		return KindLayers
	case KindHookVerdict:
		return KindHookVerdict
	case KindApprovalRequest:
		return KindApprovalRequest
	case KindApprovalDecision:
		return KindApprovalDecision
	case KindWorkspaceDiff:
		return KindWorkspaceDiff
	case KindResult:
		return KindResult
	}
	return EntryKind(b)
}

// Payload is the typed content of an entry: one of the payload types of this
// package (UserMessage, ToolCall, Compaction, ...). The set is closed because
// every stored kind must have a decoder here.
type Payload interface {
	// EntryKind is the kind stored with the payload.
	EntryKind() EntryKind
	// validate reports a payload that must not be stored or is corrupt.
	validate() error
}

// Entry is one record of a session's ordered stream.
type Entry struct {
	// Seq is the entry's position in its session, allocated by the writer
	// before the entry is queued. Sequence numbers start at 1 and only grow;
	// they may have gaps (entries skipped by a failed journal writer).
	Seq int64
	// Payload is the typed content; its EntryKind is the entry's kind.
	Payload Payload
	// CreatedAt is when the entry was produced (not when it was flushed).
	CreatedAt time.Time
	// CompactedBy is the sequence number of the compaction checkpoint that
	// replaced this entry in the live context, or 0 while the entry is active.
	// Compacted entries stay stored; Load skips them.
	CompactedBy int64
}

// Kind is the kind of the entry's payload.
func (e Entry) Kind() EntryKind { return e.Payload.EntryKind() }

// Block is one part of a message's content.
type Block struct {
	Type BlockType `json:"type"`
	// Text is the text of a text or thinking block.
	Text string `json:"text,omitempty"`
	// Signature is the provider's opaque signature of a thinking block,
	// replayed verbatim.
	Signature string `json:"signature,omitempty"`
	// ID, Name and Input describe a tool_use block: the call the model made.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// MediaType and Data hold an image block.
	MediaType string `json:"media_type,omitempty"`
	Data      []byte `json:"data,omitempty"`
}

// BlockType says what a Block holds.
type BlockType string

// Block types. Other values are kept as they are: a newer runner may know
// more block types than this one.
const (
	BlockText     BlockType = "text"
	BlockThinking BlockType = "thinking"
	BlockToolUse  BlockType = "tool_use"
	BlockImage    BlockType = "image"
)

// UserMessage is a message from the user (or the harness on their behalf).
type UserMessage struct {
	Content []Block `json:"content"`
}

// AssistantMessage is a message from the model.
type AssistantMessage struct {
	Content []Block `json:"content"`
	// StopReason is the provider's reason for ending the message.
	StopReason string `json:"stop_reason,omitempty"`
}

// ToolResult is the message that hands a tool's result back to the model.
type ToolResult struct {
	CallID  string  `json:"call_id"`
	Content []Block `json:"content"`
	IsError bool    `json:"is_error,omitempty"`
}

// ToolCall records a tool call the harness is about to run. It opens the
// call: a fork cut may not fall between a ToolCall and its ToolCompletion.
// The agent makes it durable before the call starts, so a ToolCall without
// its ToolCompletion after a crash is a call that may have partly run.
type ToolCall struct {
	CallID string          `json:"call_id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// ToolCompletion closes a tool call. The agent writes it after the call's
// ToolResult, so that a cut after the completion has the whole exchange.
type ToolCompletion struct {
	CallID   string        `json:"call_id"`
	Status   ToolStatus    `json:"status"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// ToolStatus is how a tool call ended.
type ToolStatus string

// Tool call outcomes.
const (
	ToolOK        ToolStatus = "ok"
	ToolError     ToolStatus = "error"
	ToolCancelled ToolStatus = "cancelled"
	ToolTimeout   ToolStatus = "timeout"
	ToolDenied    ToolStatus = "denied"
	// ToolInterrupted: the session stopped (a crash, a lost pod) while the
	// call ran, and the resumed session answered it so; it may have partly
	// run.
	ToolInterrupted ToolStatus = "interrupted"
)

// ProviderChange switches the model provider from this entry on.
type ProviderChange struct {
	Provider string `json:"provider"`
}

// ModelChange switches the model from this entry on.
type ModelChange struct {
	Model string `json:"model"`
}

// PersonaChange switches the persona from this entry on; empty means the
// default persona.
type PersonaChange struct {
	Persona string `json:"persona"`
}

// ReasoningChange sets the reasoning effort from this entry on; empty means
// the provider's default.
type ReasoningChange struct {
	Effort string `json:"effort"`
}

// Usage is a snapshot of the session's cumulative usage. The latest snapshot
// is restored on resume.
type Usage struct {
	InputTokens      int64   `json:"input_tokens,omitempty"`
	OutputTokens     int64   `json:"output_tokens,omitempty"`
	CacheReadTokens  int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64   `json:"reasoning_tokens,omitempty"`
	Requests         int64   `json:"requests,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
	// ContextTokens is the size of the live context after the last request.
	ContextTokens int64 `json:"context_tokens,omitempty"`
}

// Outcome is how a run ended. The values are stored in completion
// checkpoints and subagent outcomes, and reported to the controller: never
// rename one.
type Outcome string

// The outcomes of a run.
const (
	// OutcomeCompleted: the model finished its answer.
	OutcomeCompleted Outcome = "completed"
	// OutcomeBudgetExceeded: a turn or token budget ran out.
	OutcomeBudgetExceeded Outcome = "budget_exceeded"
	// OutcomeDeadlineExceeded: the wall-time budget ran out.
	OutcomeDeadlineExceeded Outcome = "deadline_exceeded"
	// OutcomeCancelled: the run was stopped from outside (a signal,
	// spec.cancel).
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeModelError: the model API failed after its retries, or the
	// model ended without a usable answer (refusal, cut off, context full).
	OutcomeModelError Outcome = "model_error"
	// OutcomeFailed: aerie itself failed (configuration, storage at launch).
	OutcomeFailed Outcome = "failed"
	// OutcomeAwaitingApproval: a hook asked a person to approve a tool
	// call, and the session paused with the call pending (an
	// ApprovalRequest entry) until a decision (an ApprovalDecision entry)
	// lets a resumed run go on.
	OutcomeAwaitingApproval Outcome = "awaiting_approval"
	// OutcomeResultInvalid: the run was given a result schema and ended
	// without a valid result: the model's submissions failed validation
	// too often, or it ended its turn without submitting one.
	OutcomeResultInvalid Outcome = "result_invalid"
)

// Checkpoint records that a turn completed, and how. The latest one is the
// session's completion state on resume.
type Checkpoint struct {
	Turn    int64   `json:"turn"`
	Outcome Outcome `json:"outcome"`
	// Result is the final answer of a completed run, if any.
	Result string `json:"result,omitempty"`
}

// Compaction is a compaction checkpoint: the replacement for every entry
// before FirstKept, and where it came from. Appending one marks those older
// entries compacted; Load then returns the latest replacement followed by the
// active entries.
type Compaction struct {
	// Replacement is the content that stands in for the compacted prefix,
	// typically a summary.
	Replacement []Block `json:"replacement"`
	// FirstKept is the sequence number of the first entry of the kept tail.
	// It must not be greater than the checkpoint's own sequence number.
	FirstKept  int64      `json:"first_kept"`
	Provenance Provenance `json:"provenance"`
}

// Provenance says how a compaction replacement was made.
type Provenance struct {
	Trigger  string `json:"trigger"` // "auto", "manual" or "overflow"
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Messages is the number of messages the replacement stands in for.
	Messages     int   `json:"messages,omitempty"`
	TokensBefore int64 `json:"tokens_before,omitempty"`
	TokensAfter  int64 `json:"tokens_after,omitempty"`
	// PendingChildren are child sessions still running when the summary was
	// made.
	PendingChildren []uuid.UUID `json:"pending_children,omitempty"`
}

// Fork is the first entry a fork adds after the copied prefix.
type Fork struct {
	Source    uuid.UUID `json:"source"`
	SourceSeq int64     `json:"source_seq"`
}

// Layers records the extension layers a run of the session used, nearest
// first, as it started: each run (each attempt of a pod) appends one, so
// the stream says what every part of the conversation was made with. It
// plays no part in resuming.
type Layers struct {
	Layers []Layer `json:"layers"`
}

// Layer is one extension layer of a Layers record.
type Layer struct {
	// Name labels the layer in reports.
	Name string `json:"name"`
	// Kind is where it comes from: project, spec, namespace, platform,
	// home or bundled.
	Kind string `json:"kind"`
	// Source says what holds it: a ConfigMap ("configmap/NAME"), a volume
	// ("pvc/CLAIM", "image/REF"), or a directory.
	Source string `json:"source,omitempty"`
	// Digest is the content digest ("sha256:…") of what was read, when
	// known.
	Digest string `json:"digest,omitempty"`
}

// SubagentOutcome records the terminal outcome of a child session in its
// parent's stream: the answer to the parent's spawn_agent call CallID.
type SubagentOutcome struct {
	Session uuid.UUID `json:"session"`
	Outcome Outcome   `json:"outcome"`
	Summary string    `json:"summary,omitempty"`
	Usage   *Usage    `json:"usage,omitempty"`
	// CallID is the parent's tool call that spawned the child.
	CallID string `json:"call_id,omitempty"`
	// AgentType is the child's persona ("" for the session's own).
	AgentType string `json:"agent_type,omitempty"`
	// AnswerDigest is the content digest ("sha256:…") of the child's
	// final answer, which the parent's tool result carries.
	AnswerDigest string `json:"answer_digest,omitempty"`
}

// HookVerdict records what lifecycle hooks decided at one point of the
// session — a tool call denied, allowed or rewritten, an "ask" the
// approval policy settled, context added, a prompt blocked, a stop
// refused — and every hook that ran or was skipped for it, so that the
// transcript says why the session went the way it did. It is a record
// only: resuming a session does not replay it (what the hooks added to
// the conversation is in its messages already).
type HookVerdict struct {
	// Event is the hook event: PreToolUse, PostToolUse, SessionStart,
	// UserPromptSubmit, Stop, SubagentStart, SubagentStop or SessionEnd.
	Event string `json:"event"`
	// CallID and Tool name the tool call of a tool event.
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Decision is "allow" or "block"; empty when the hooks decided
	// neither.
	Decision string `json:"decision,omitempty"`
	// Reason is the reason for a block.
	Reason string `json:"reason,omitempty"`
	// Approval is how the approval policy decided a call a hook asked
	// about.
	Approval *HookApproval `json:"approval,omitempty"`
	// UpdatedInput replaced the tool call's arguments.
	UpdatedInput json.RawMessage `json:"updated_input,omitempty"`
	// Context is what the hooks added for the model.
	Context string `json:"context,omitempty"`
	// SystemMessages are the hooks' messages for the user.
	SystemMessages []string `json:"system_messages,omitempty"`
	// Stop means a hook ended the turn (continue: false), with StopReason.
	Stop       bool   `json:"stop,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
	// Runs are the hooks that ran or were skipped, in order.
	Runs []HookRun `json:"runs,omitempty"`
}

// HookApproval is an approval policy's decision on a call a hook asked
// about.
type HookApproval struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	Policy  string `json:"policy,omitempty"`
}

// ApprovalRequest records a tool call a hook asked a person to approve,
// under the "ask" approval policy: the call (its ToolCall entry comes
// before) did not run, and the session paused. It stays pending until an
// ApprovalDecision for CallID follows it; a resumed run then journals the
// call again (a ToolCall entry after this one) before it runs it, so that
// an approved call runs once even if that run crashes.
type ApprovalRequest struct {
	// CallID and Tool name the pending call.
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Preview is the start of the call's arguments, for a person to read
	// (the whole arguments are in the ToolCall entry).
	Preview string `json:"preview,omitempty"`
	// Hooks are the hooks that asked, and Reason their reasons.
	Hooks  []string `json:"hooks,omitempty"`
	Reason string   `json:"reason,omitempty"`
	// AgentID, in the request a parent's run ends on, is the subagent
	// (its session id) whose call it is and whose journal holds the
	// request; empty for a session's own call. Not journaled.
	AgentID string `json:"-"`
}

// ApprovalDecision records a person's decision on the pending call CallID
// (an ApprovalRequest): allowed, it runs when the session resumes; denied,
// the model gets an error result with Reason.
type ApprovalDecision struct {
	CallID  string `json:"call_id"`
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	// By says where the decision came from: "aerie approve",
	// "spec.approvals", "approvals.toml", "approvalTimeout".
	By string `json:"by,omitempty"`
}

// HookRun is one hook of a HookVerdict.
type HookRun struct {
	// Hook identifies the hook: its file and its place in it.
	Hook string `json:"hook"`
	// Exit is the exit code, -1 for a hook killed, never started or
	// skipped.
	Exit     int           `json:"exit"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Decision and Reason are what this hook answered.
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Failed says why the hook failed (a timeout, an exit code other than
	// 0 and 2, invalid output).
	Failed string `json:"failed,omitempty"`
	// Ignored says what of its answer had no effect.
	Ignored string `json:"ignored,omitempty"`
	// Skipped says why it did not run: its file or a script it runs
	// changed since its trust was checked.
	Skipped   string `json:"skipped,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// WorkspaceDiff records what a run changed in its workspace, when the
// workspace is a git work tree: the stat and the patch of the work tree
// (untracked files included, ignored ones not) against the commit the run
// started from, taken after the loop ended and its processes were torn
// down. Each run of a session appends one; the last is the session's work.
// The patch is capped: Bytes is its full size, Truncated says that only
// its first Cap bytes are kept. It plays no part in resuming.
type WorkspaceDiff struct {
	// Base is the commit the run started from (the empty tree's id in a
	// repository without commits).
	Base string `json:"base"`
	// Stat is git diff --stat against Base.
	Stat string `json:"stat,omitempty"`
	// Patch is git diff --binary against Base, at most Cap bytes of it,
	// with any bytes that are not UTF-8 (a file in another encoding)
	// replaced by "?".
	Patch string `json:"patch,omitempty"`
	// Bytes is the size of the whole patch.
	Bytes int64 `json:"bytes,omitempty"`
	// Cap is the patch's limit in bytes when the diff was taken.
	Cap int64 `json:"cap,omitempty"`
	// Truncated means Patch is the first Cap bytes of Bytes.
	Truncated bool `json:"truncated,omitempty"`
	// Error says why the diff could not be taken whole (a git command
	// that failed); what was taken is kept.
	Error string `json:"error,omitempty"`
}

// Result records the structured result a run was asked for (aerie run
// --output-schema, an AgentSession's spec.result.schema) once the model
// submitted a value that the schema accepts: the value, as JSON, and the
// digest of the schema it was checked against. It is a record only:
// resuming a session does not replay it.
type Result struct {
	// Value is the accepted result, compact JSON.
	Value json.RawMessage `json:"value"`
	// SchemaDigest is the content digest ("sha256:…") of the schema.
	SchemaDigest string `json:"schema_digest,omitempty"`
}

func (UserMessage) EntryKind() EntryKind      { return KindUserMessage }
func (AssistantMessage) EntryKind() EntryKind { return KindAssistantMessage }
func (ToolResult) EntryKind() EntryKind       { return KindToolResult }
func (ToolCall) EntryKind() EntryKind         { return KindToolCall }
func (ToolCompletion) EntryKind() EntryKind   { return KindToolCompletion }
func (ProviderChange) EntryKind() EntryKind   { return KindProviderChange }
func (ModelChange) EntryKind() EntryKind      { return KindModelChange }
func (PersonaChange) EntryKind() EntryKind    { return KindPersonaChange }
func (ReasoningChange) EntryKind() EntryKind  { return KindReasoningChange }
func (Usage) EntryKind() EntryKind            { return KindUsage }
func (Checkpoint) EntryKind() EntryKind       { return KindCheckpoint }
func (Compaction) EntryKind() EntryKind       { return KindCompaction }
func (Fork) EntryKind() EntryKind             { return KindFork }
func (SubagentOutcome) EntryKind() EntryKind  { return KindSubagentOutcome }
func (Layers) EntryKind() EntryKind           { return KindLayers }
func (HookVerdict) EntryKind() EntryKind      { return KindHookVerdict }
func (ApprovalRequest) EntryKind() EntryKind  { return KindApprovalRequest }
func (ApprovalDecision) EntryKind() EntryKind { return KindApprovalDecision }
func (WorkspaceDiff) EntryKind() EntryKind    { return KindWorkspaceDiff }
func (Result) EntryKind() EntryKind           { return KindResult }

func (m UserMessage) validate() error      { return validateBlocks(m.Content) }
func (m AssistantMessage) validate() error { return validateBlocks(m.Content) }

func (r ToolResult) validate() error {
	if r.CallID == "" {
		return errors.New("tool result without call id")
	}
	return validateBlocks(r.Content)
}

func (c ToolCall) validate() error {
	switch {
	case c.CallID == "":
		return errors.New("tool call without call id")
	case c.Name == "":
		return errors.New("tool call without tool name")
	}
	return nil
}

func (c ToolCompletion) validate() error {
	switch {
	case c.CallID == "":
		return errors.New("tool completion without call id")
	case c.Status == "":
		return errors.New("tool completion without status")
	}
	return nil
}

func (c ProviderChange) validate() error {
	if c.Provider == "" {
		return errors.New("provider change without provider")
	}
	return nil
}

func (c ModelChange) validate() error {
	if c.Model == "" {
		return errors.New("model change without model")
	}
	return nil
}

func (PersonaChange) validate() error   { return nil }
func (ReasoningChange) validate() error { return nil }
func (Usage) validate() error           { return nil }

func (c Checkpoint) validate() error {
	if c.Outcome == "" {
		return errors.New("checkpoint without outcome")
	}
	return nil
}

func (c Compaction) validate() error {
	if c.FirstKept < 1 {
		return fmt.Errorf("compaction first kept sequence %d, want at least 1", c.FirstKept)
	}
	return validateBlocks(c.Replacement)
}

func (f Fork) validate() error {
	switch {
	case f.Source == uuid.Nil:
		return errors.New("fork without source session")
	case f.SourceSeq < 0:
		return fmt.Errorf("fork source sequence %d is negative", f.SourceSeq)
	}
	return nil
}

func (l Layers) validate() error {
	for i, x := range l.Layers {
		switch {
		case x.Name == "":
			return fmt.Errorf("layer %d has no name", i)
		case x.Kind == "":
			return fmt.Errorf("layer %d (%s) has no kind", i, x.Name)
		}
	}
	return nil
}

func (o SubagentOutcome) validate() error {
	switch {
	case o.Session == uuid.Nil:
		return errors.New("subagent outcome without session")
	case o.Outcome == "":
		return errors.New("subagent outcome without outcome")
	}
	return nil
}

func (v HookVerdict) validate() error {
	if v.Event == "" {
		return errors.New("hook verdict without event")
	}
	for i, r := range v.Runs {
		if r.Hook == "" {
			return fmt.Errorf("hook verdict run %d without hook", i)
		}
	}
	return nil
}

func (r ApprovalRequest) validate() error {
	switch {
	case r.CallID == "":
		return errors.New("approval request without call id")
	case r.Tool == "":
		return errors.New("approval request without tool name")
	}
	return nil
}

func (d ApprovalDecision) validate() error {
	if d.CallID == "" {
		return errors.New("approval decision without call id")
	}
	return nil
}

func (d WorkspaceDiff) validate() error {
	switch {
	case d.Base == "":
		return errors.New("workspace diff without base commit")
	case d.Bytes < int64(len(d.Patch)):
		return fmt.Errorf("workspace diff of %d bytes holds a longer patch (%d bytes)", d.Bytes, len(d.Patch))
	case d.Truncated && d.Bytes == int64(len(d.Patch)):
		return fmt.Errorf("workspace diff truncated with all of its %d bytes kept", d.Bytes)
	}
	return nil
}

func (r Result) validate() error {
	if len(bytes.TrimSpace(r.Value)) == 0 {
		return errors.New("result without value")
	}
	if !json.Valid(r.Value) {
		return errors.New("result value is not JSON")
	}
	return nil
}

func validateBlocks(blocks []Block) error {
	for i, b := range blocks {
		if b.Type == "" {
			return fmt.Errorf("content block %d has no type", i)
		}
	}
	return nil
}

// decodePayload decodes data as the payload of kind. A kind missing here is
// unknown: the entry is reported corrupt rather than guessed at.
func decodePayload(kind EntryKind, data []byte) (Payload, error) {
	switch kind {
	case KindUserMessage:
		return decodeAs[UserMessage](data)
	case KindAssistantMessage:
		return decodeAs[AssistantMessage](data)
	case KindToolResult:
		return decodeAs[ToolResult](data)
	case KindToolCall:
		return decodeAs[ToolCall](data)
	case KindToolCompletion:
		return decodeAs[ToolCompletion](data)
	case KindProviderChange:
		return decodeAs[ProviderChange](data)
	case KindModelChange:
		return decodeAs[ModelChange](data)
	case KindPersonaChange:
		return decodeAs[PersonaChange](data)
	case KindReasoningChange:
		return decodeAs[ReasoningChange](data)
	case KindUsage:
		return decodeAs[Usage](data)
	case KindCheckpoint:
		return decodeAs[Checkpoint](data)
	case KindCompaction:
		return decodeAs[Compaction](data)
	case KindFork:
		return decodeAs[Fork](data)
	case KindSubagentOutcome:
		return decodeAs[SubagentOutcome](data)
	case KindLayers:
		return decodeAs[Layers](data)
	case KindHookVerdict:
		return decodeAs[HookVerdict](data)
	case KindApprovalRequest:
		return decodeAs[ApprovalRequest](data)
	case KindApprovalDecision:
		return decodeAs[ApprovalDecision](data)
	case KindWorkspaceDiff:
		return decodeAs[WorkspaceDiff](data)
	case KindResult:
		return decodeAs[Result](data)
	}
	return nil, errors.New("unknown entry kind")
}

func decodeAs[P Payload](data []byte) (Payload, error) {
	// Payloads are always JSON objects. Checking that first rejects null,
	// which json.Unmarshal would silently accept as a zero payload.
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("payload is not a JSON object")
	}
	var p P
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// DecodeEntry decodes the stored payload of an entry of the given kind:
// entry seq of session, named in its errors. Unknown kinds, malformed JSON
// and payloads missing required fields are errors of type *EntryError; they
// match ErrCorruptEntry.
//
// Decoded strings may share payload's memory, so that a long text is not
// copied again: a payload read for its entry alone costs one copy.
func DecodeEntry(session uuid.UUID, seq int64, kind EntryKind, payload string) (Payload, error) {
	if p, ok := fastDecode(kind, payload); ok && p.validate() == nil {
		return p, nil
	}
	// Whatever the fast decoder does not take, corrupt payloads included,
	// encoding/json decodes, or rejects with its own error.
	p, err := decodePayload(kind, []byte(payload))
	if err != nil {
		return nil, &EntryError{Session: session, Seq: seq, Kind: string(kind), Err: err}
	}
	return p, nil
}

// EncodePayload returns the JSON stored for p. It refuses payloads that
// DecodeEntry would reject, so nothing unreadable is ever written.
func EncodePayload(p Payload) ([]byte, error) {
	if p == nil {
		return nil, errors.New("encode payload: nil payload")
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", p.EntryKind(), err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", p.EntryKind(), err)
	}
	return b, nil
}

// EntryError reports a stored entry that cannot be decoded. Only the
// session holding it is affected; the stored row is left as it is.
type EntryError struct {
	Session uuid.UUID
	Seq     int64
	Kind    string
	Err     error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("session %s: entry %d (kind %q): %v", e.Session, e.Seq, e.Kind, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// Is makes every EntryError match ErrCorruptEntry.
func (e *EntryError) Is(target error) bool { return target == ErrCorruptEntry }
