package atif

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/atomicfile"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Version is the schema_version of every trajectory this package writes.
const Version = "ATIF-v1.7"

// Step sources, as ATIF spells them.
const (
	sourceSystem = "system"
	sourceUser   = "user"
	sourceAgent  = "agent"
)

// trajectoryNotes tells a reader of the file how aerie fills the fields
// whose meaning ATIF leaves to the producer.
const trajectoryNotes = "Written by aerie from the session's journaled entries. " +
	"Per-step metrics are the differences between consecutive cumulative usage snapshots, " +
	"given to the last model response before each snapshot; usage with no response of its own " +
	"(a compaction summary, for example) is counted in final_metrics only. " +
	"Compacted entries stay in the trajectory; the compaction itself is a system step whose " +
	"extra.context_management says how it changed the context."

// Trajectory is an ATIF trajectory document (Harbor RFC 0001,
// "trajectory-format", version 1.7): the agent that ran, the ordered steps of
// the session and its totals. Field names and optionality follow Harbor's
// published models.
type Trajectory struct {
	SchemaVersion string `json:"schema_version"`
	// SessionID is the aerie session id.
	SessionID string `json:"session_id,omitempty"`
	// TrajectoryID identifies an embedded subagent trajectory within its
	// parent's SubagentTrajectories: the child session's id. It is empty
	// on the root.
	TrajectoryID string `json:"trajectory_id,omitempty"`
	Agent        Agent  `json:"agent"`
	// Steps has at least one element: the system prompt step comes first.
	Steps        []Step        `json:"steps"`
	Notes        string        `json:"notes,omitempty"`
	FinalMetrics *FinalMetrics `json:"final_metrics,omitempty"`
	// Extra holds the session's outcome, kind, fork origin and any entries
	// that could not be rendered.
	Extra map[string]any `json:"extra,omitempty"`
	// SubagentTrajectories embeds the trajectories of the session's
	// subagent sessions (ATIF v1.7's single-file form), each with its own
	// embedded children; a spawning call's observation result refers to
	// its child by TrajectoryID.
	SubagentTrajectories []*Trajectory `json:"subagent_trajectories,omitempty"`
}

// Agent is the agent block of a trajectory.
type Agent struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// ModelName is the default model of the trajectory; a step names its
	// model only when it differs.
	ModelName string `json:"model_name,omitempty"`
	// ToolDefinitions follow OpenAI's function-calling shape, as ATIF asks.
	ToolDefinitions []ToolDefinition `json:"tool_definitions,omitempty"`
	Extra           map[string]any   `json:"extra,omitempty"`
}

// ToolDefinition is one tool offered to the model, in OpenAI's
// function-calling shape.
type ToolDefinition struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is the function of a tool definition.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Step is one step of a trajectory: a system event, a user message or an
// agent turn (the model's response, the tool calls it made and their
// results).
type Step struct {
	StepID    int    `json:"step_id"`
	Timestamp string `json:"timestamp,omitempty"`
	Source    string `json:"source"`
	// ModelName, ReasoningEffort, ReasoningContent, ToolCalls and Metrics
	// are only set on agent steps.
	ModelName       string `json:"model_name,omitempty"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Message is required by ATIF, even when empty.
	Message          string       `json:"message"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall   `json:"tool_calls,omitempty"`
	Observation      *Observation `json:"observation,omitempty"`
	Metrics          *Metrics     `json:"metrics,omitempty"`
	// IsCopiedContext marks the steps a fork copied from its source session.
	IsCopiedContext bool `json:"is_copied_context,omitempty"`
	// LLMCallCount is 0 on an agent step the harness dispatched without a
	// model response; nil where aerie does not count calls.
	LLMCallCount *int           `json:"llm_call_count,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// ToolCall is a tool call of an agent step.
type ToolCall struct {
	ToolCallID   string `json:"tool_call_id"`
	FunctionName string `json:"function_name"`
	// Arguments is always a JSON object; arguments the model sent that are
	// not one are kept as text in Extra["raw_arguments"].
	Arguments json.RawMessage `json:"arguments"`
	Extra     map[string]any  `json:"extra,omitempty"`
}

// Observation holds the results of an agent step's tool calls.
type Observation struct {
	Results []Result `json:"results"`
}

// Result is the result of one tool call.
type Result struct {
	// SourceCallID names a tool call of the same step; it is empty for a
	// result whose call the trajectory does not have.
	SourceCallID string `json:"source_call_id,omitempty"`
	Content      string `json:"content"`
	// SubagentTrajectoryRef names the embedded trajectory of the child
	// session the call spawned.
	SubagentTrajectoryRef []SubagentRef `json:"subagent_trajectory_ref,omitempty"`
	// Extra holds is_error and the harness's completion record (status,
	// duration_ms, error).
	Extra map[string]any `json:"extra,omitempty"`
}

// SubagentRef refers to an embedded subagent trajectory: TrajectoryID
// resolves it among the SubagentTrajectories of the trajectory that holds
// the reference; SessionID is informational.
type SubagentRef struct {
	TrajectoryID string         `json:"trajectory_id"`
	SessionID    string         `json:"session_id,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// Metrics are the token counts and cost of one agent step. PromptTokens
// include cached tokens; CompletionTokens include reasoning tokens.
type Metrics struct {
	PromptTokens     *int64         `json:"prompt_tokens,omitempty"`
	CompletionTokens *int64         `json:"completion_tokens,omitempty"`
	CachedTokens     *int64         `json:"cached_tokens,omitempty"`
	CostUSD          *float64       `json:"cost_usd,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

// FinalMetrics are the totals of a trajectory.
type FinalMetrics struct {
	TotalPromptTokens     *int64         `json:"total_prompt_tokens,omitempty"`
	TotalCompletionTokens *int64         `json:"total_completion_tokens,omitempty"`
	TotalCachedTokens     *int64         `json:"total_cached_tokens,omitempty"`
	TotalCostUSD          *float64       `json:"total_cost_usd,omitempty"`
	TotalSteps            int            `json:"total_steps"`
	Extra                 map[string]any `json:"extra,omitempty"`
}

// AgentInfo names the program that ran the session.
type AgentInfo struct {
	// Name defaults to "aerie".
	Name string
	// Version is the program's version; it must not be empty.
	Version string
}

// SessionRecord is what a trajectory takes from a session's stored record.
type SessionRecord struct {
	ID uuid.UUID
	// Kind is how the session came to be: user, headless, fork or
	// subagent.
	Kind  string
	Label string
	// ParentID is the session this one was forked from or is a subagent
	// of, uuid.Nil for a root; RootID is the root of its tree.
	ParentID  uuid.UUID
	RootID    uuid.UUID
	CreatedAt time.Time
	// Settings are those the session was created with.
	Settings transcript.Settings
}

// TrajectoryInput is everything a trajectory is made from.
type TrajectoryInput struct {
	// Session is the session's record.
	Session SessionRecord
	// Entries is the whole stream, compacted entries included, in sequence
	// order: what the session store's Entries returns.
	Entries []transcript.Entry
	// SystemPrompt is the rendered system prompt. The trajectory holds its
	// SHA-256 digest, and the text itself only with IncludeSystemPrompt.
	SystemPrompt        string
	IncludeSystemPrompt bool
	// SystemPromptUnrecorded says the system prompt is not known: the
	// trajectory is made from the session store alone, which keeps the
	// entries but not the prompt each run rendered. Step 1 then says so,
	// and its extra.system_prompt is {"recorded": false}.
	SystemPromptUnrecorded bool
	Agent                  AgentInfo
	// Tools are the tools offered to the model.
	Tools []provider.Tool
	// Provider and Model are the settings the session started with; empty
	// means the session record's.
	Provider string
	Model    string
	// Outcome is the run's outcome; empty means the latest checkpoint's.
	Outcome string
	// Subagents are the session's subagent sessions, each with its own
	// Subagents: every one becomes an embedded trajectory, and the
	// observation result of the call that spawned it (the CallID of its
	// SubagentOutcome entry) refers to it. Their Agent, SystemPrompt,
	// IncludeSystemPrompt and SystemPromptUnrecorded default to the
	// parent's; Tools are theirs alone.
	Subagents []TrajectoryInput
}

// BuildTrajectory renders a session as an ATIF trajectory. It is a pure
// function of its input:
//
//   - Step 1 is a system step for the system prompt: its text with
//     IncludeSystemPrompt, otherwise a placeholder naming its digest;
//     extra.system_prompt always holds the SHA-256 digest and length.
//   - A user message is a user step. An assistant message is an agent step:
//     text blocks make the message, thinking blocks the reasoning_content,
//     tool_use blocks the tool_calls. Images become "[image: TYPE, N bytes]"
//     text, since ATIF references images by path and the session has no file.
//   - A tool result is an observation result of the agent step that made the
//     call, linked by source_call_id; the matching completion adds its status,
//     duration and error to the result's extra. A tool call the harness ran
//     without a model response is an agent step with llm_call_count 0.
//   - A usage snapshot gives the difference from the previous snapshot to
//     the last model response since then, as that step's metrics; the
//     latest snapshot makes final_metrics.
//   - Provider, model, persona and reasoning changes apply to the agent steps
//     that follow: model_name when the model differs from the agent's,
//     reasoning_effort, and extra.provider and extra.persona.
//   - A compaction is a system step whose message is the replacement summary
//     and whose extra.context_management is {type "compaction", boundary
//     "replace", tokens_before, tokens_after}; the compacted steps stay.
//   - In a fork, the steps copied from the source session are marked
//     is_copied_context, and extra.fork names the source.
//   - A subagent outcome is a system step; a checkpoint annotates the latest
//     step's extra.checkpoint.
//   - Each of Subagents is built the same way into subagent_trajectories,
//     with its session id as trajectory_id; the observation result of the
//     call that spawned it (its outcome's CallID) gets a
//     subagent_trajectory_ref naming it, or, for a call the trajectory
//     does not have, the outcome's step does. A child with no outcome yet
//     is embedded without a reference.
//   - The layers record of each run is no step: the trajectory's
//     extra.extension_layers lists them, each with its seq.
//   - A hook verdict joins extra.hooks of the tool call it was about, or
//     else of the latest step.
//
// Entries of any other type, or without a payload, are listed in
// extra.skipped_entries. Entries out of sequence order, an empty
// Agent.Version, and a subagent without a session id or given twice are
// errors.
func BuildTrajectory(in TrajectoryInput) (*Trajectory, error) {
	if in.Agent.Version == "" {
		return nil, errors.New("build trajectory: empty agent version: set TrajectoryInput.Agent.Version")
	}
	for i := 1; i < len(in.Entries); i++ {
		if prev, cur := in.Entries[i-1].Seq, in.Entries[i].Seq; cur <= prev {
			return nil, fmt.Errorf("build trajectory: entry %d comes after entry %d: "+
				"pass the entries in sequence order, as Store.Entries returns them", cur, prev)
		}
	}
	b := newBuilder(in)
	for _, sub := range in.Subagents {
		id := sub.Session.ID
		switch {
		case id == uuid.Nil:
			return nil, errors.New("build trajectory: a subagent without a session id: " +
				"set its TrajectoryInput.Session.ID (it is the embedded trajectory's id)")
		case b.embedded[id]:
			return nil, fmt.Errorf("build trajectory: subagent session %s is given twice: "+
				"an embedded trajectory id must be unique among its siblings", id)
		}
		b.embedded[id] = true
	}
	for _, e := range in.Entries {
		b.entry(e)
	}
	t := b.finish()
	for _, sub := range in.Subagents {
		child, err := BuildTrajectory(inheritFrom(in, sub))
		if err != nil {
			return nil, fmt.Errorf("subagent session %s: %w", sub.Session.ID, err)
		}
		child.TrajectoryID = sub.Session.ID.String()
		t.SubagentTrajectories = append(t.SubagentTrajectories, child)
	}
	return t, nil
}

// inheritFrom gives a subagent's input what it leaves to its parent's: the
// agent, and a system prompt that is not recorded when the parent's is
// not (a trajectory made from the store alone).
func inheritFrom(parent, sub TrajectoryInput) TrajectoryInput {
	if sub.Agent == (AgentInfo{}) {
		sub.Agent = parent.Agent
	}
	if parent.SystemPromptUnrecorded && sub.SystemPrompt == "" {
		sub.SystemPromptUnrecorded = true
	}
	return sub
}

// callRef is where a tool call lives in the trajectory: its step and, once
// known, its observation result.
type callRef struct {
	step   int
	result int // -1 until a result or completion arrives
}

// builder walks the entries once and keeps the state that the next entry
// needs: the settings in force, where each tool call is, and the usage seen.
type builder struct {
	in    TrajectoryInput
	t     *Trajectory
	seqs  []int64 // seqs[i] is the sequence number of the entry that made step i
	calls map[string]callRef

	// copiedThrough is the last sequence number a fork copied from its
	// source; 0 outside forks.
	copiedThrough int64

	rootModel, rootProvider string
	provider, model         string
	persona, effort         string
	pendingLLM              int // last agent step made by a model response since the last usage snapshot, or -1
	dispatch                int // the open agent step of harness-dispatched calls, or -1
	lastUsage               *transcript.Usage
	lastOutcome             string
	skipped                 []map[string]any
	layers                  []map[string]any
	fork                    *transcript.Fork
	// embedded are the subagent sessions whose trajectories are embedded.
	embedded map[uuid.UUID]bool
}

func newBuilder(in TrajectoryInput) *builder {
	b := &builder{
		in:         in,
		calls:      make(map[string]callRef),
		embedded:   make(map[uuid.UUID]bool),
		pendingLLM: -1,
		dispatch:   -1,
	}
	b.rootProvider = firstNonEmpty(in.Provider, in.Session.Settings.Provider)
	b.rootModel = firstNonEmpty(in.Model, in.Session.Settings.Model)
	b.provider, b.model = b.rootProvider, b.rootModel
	b.persona, b.effort = in.Session.Settings.Persona, in.Session.Settings.Reasoning

	// The Fork entry follows the prefix it copied, so find the last one
	// first: every step made from an entry at or before its SourceSeq is
	// copied context.
	for i := len(in.Entries) - 1; i >= 0; i-- {
		if f, ok := in.Entries[i].Payload.(transcript.Fork); ok {
			b.fork = &f
			b.copiedThrough = f.SourceSeq
			break
		}
	}

	b.t = &Trajectory{
		SchemaVersion: Version,
		Agent:         b.agent(),
		Notes:         trajectoryNotes,
	}
	if in.Session.ID != uuid.Nil {
		b.t.SessionID = in.Session.ID.String()
	}
	b.systemPrompt()
	return b
}

func (b *builder) agent() Agent {
	a := Agent{
		Name:      firstNonEmpty(b.in.Agent.Name, "aerie"),
		Version:   b.in.Agent.Version,
		ModelName: b.rootModel,
	}
	for _, tool := range b.in.Tools {
		fn := Function{Name: tool.Name, Description: tool.Description}
		// A schema that is not valid JSON cannot be embedded; the tool is
		// still listed by name.
		if s := bytes.TrimSpace(tool.InputSchema); len(s) > 0 && json.Valid(s) {
			fn.Parameters = s
		} else {
			fn.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		a.ToolDefinitions = append(a.ToolDefinitions, ToolDefinition{Type: "function", Function: fn})
	}
	extra := map[string]any{}
	if b.rootProvider != "" {
		extra["provider"] = b.rootProvider
	}
	if p := b.in.Session.Settings.Persona; p != "" {
		extra["persona"] = p
	}
	if r := b.in.Session.Settings.Reasoning; r != "" {
		extra["reasoning_effort"] = r
	}
	if len(extra) > 0 {
		a.Extra = extra
	}
	return a
}

// systemPrompt adds step 1. It is there even for an empty prompt, so that a
// session without entries still makes a valid trajectory (ATIF requires a
// step) and the digest has a place next to where the prompt would be.
func (b *builder) systemPrompt() {
	if b.in.SystemPromptUnrecorded {
		b.add(0, Step{
			Timestamp: timestamp(b.in.Session.CreatedAt),
			Source:    sourceSystem,
			Message:   "[system prompt not recorded: the session store keeps the entries, not the prompt a run rendered]",
			Extra:     map[string]any{"system_prompt": map[string]any{"recorded": false}},
		})
		return
	}
	sum := sha256.Sum256([]byte(b.in.SystemPrompt))
	digest := hex.EncodeToString(sum[:])
	msg := fmt.Sprintf("[system prompt not included: sha256:%s, %d bytes]", digest, len(b.in.SystemPrompt))
	if b.in.IncludeSystemPrompt {
		msg = b.in.SystemPrompt
	}
	b.add(0, Step{
		Timestamp: timestamp(b.in.Session.CreatedAt),
		Source:    sourceSystem,
		Message:   msg,
		Extra: map[string]any{"system_prompt": map[string]any{
			"sha256":    digest,
			"bytes":     len(b.in.SystemPrompt),
			"plaintext": b.in.IncludeSystemPrompt,
		}},
	})
}

// add appends a step made from the entry with sequence number seq and
// returns its index.
func (b *builder) add(seq int64, s Step) int {
	s.StepID = len(b.t.Steps) + 1
	if seq > 0 && seq <= b.copiedThrough {
		s.IsCopiedContext = true
	}
	b.t.Steps = append(b.t.Steps, s)
	b.seqs = append(b.seqs, seq)
	b.dispatch = -1
	return len(b.t.Steps) - 1
}

func (b *builder) entry(e transcript.Entry) {
	switch p := e.Payload.(type) {
	case transcript.UserMessage:
		text, _, _ := renderBlocks(p.Content)
		b.add(e.Seq, Step{Timestamp: timestamp(e.CreatedAt), Source: sourceUser, Message: text})
	case transcript.AssistantMessage:
		b.assistant(e, p)
	case transcript.ToolCall:
		b.toolCall(e, p)
	case transcript.ToolResult:
		b.toolResult(p)
	case transcript.ToolCompletion:
		b.toolCompletion(p)
	case transcript.ProviderChange:
		b.provider = p.Provider
	case transcript.ModelChange:
		b.model = p.Model
	case transcript.PersonaChange:
		b.persona = p.Persona
	case transcript.ReasoningChange:
		b.effort = p.Effort
	case transcript.Usage:
		b.usage(p)
	case transcript.Checkpoint:
		b.lastOutcome = string(p.Outcome)
		last := &b.t.Steps[len(b.t.Steps)-1]
		setExtra(&last.Extra, "checkpoint", map[string]any{"turn": p.Turn, "outcome": p.Outcome})
	case transcript.Compaction:
		b.compaction(e, p)
	case transcript.Fork:
		// Found by newBuilder: it marks the copied steps and the root's
		// extra.fork, and is no step of its own.
	case transcript.SubagentOutcome:
		b.subagent(e, p)
	case transcript.Layers:
		// No step: what the run was made with, for the trajectory's
		// extra, one record per run.
		b.layers = append(b.layers, map[string]any{"seq": e.Seq, "layers": p.Layers})
	case transcript.HookVerdict:
		b.hookVerdict(e, p)
	default:
		kind := "none"
		if e.Payload != nil {
			kind = fmt.Sprintf("%T", e.Payload)
		}
		b.skipped = append(b.skipped, map[string]any{"seq": e.Seq, "payload": kind})
	}
}

// agentStep returns an agent step with the settings in force. The model's
// settings are left off a step the harness dispatched (llm false): no model
// made it.
func (b *builder) agentStep(e transcript.Entry, llm bool) Step {
	s := Step{Timestamp: timestamp(e.CreatedAt), Source: sourceAgent}
	if llm {
		s.ReasoningEffort = b.effort
		if b.model != b.rootModel {
			s.ModelName = b.model
		}
	}
	if b.provider != b.rootProvider {
		setExtra(&s.Extra, "provider", b.provider)
	}
	if b.persona != b.in.Session.Settings.Persona {
		setExtra(&s.Extra, "persona", b.persona)
	}
	return s
}

func (b *builder) assistant(e transcript.Entry, m transcript.AssistantMessage) {
	s := b.agentStep(e, true)
	var uses []transcript.Block
	s.Message, s.ReasoningContent, uses = renderBlocks(m.Content)
	if m.StopReason != "" {
		setExtra(&s.Extra, "stop_reason", m.StopReason)
	}
	ids := make(map[string]bool, len(uses))
	for i, u := range uses {
		id := u.ID
		if id == "" {
			// A call without an id cannot be answered; give it one so the
			// step stays well-formed.
			id = fmt.Sprintf("aerie-%d-%d", e.Seq, i+1)
		}
		for ids[id] {
			id += "'"
		}
		ids[id] = true
		s.ToolCalls = append(s.ToolCalls, toolCall(id, u.Name, u.Input))
	}
	step := b.add(e.Seq, s)
	for _, c := range s.ToolCalls {
		b.calls[c.ToolCallID] = callRef{step: step, result: -1}
	}
	b.pendingLLM = step
}

// toolCall records a call the harness is about to run. A call the model
// made is already in its agent step; any other (a call of the harness's
// own) joins an agent step with llm_call_count 0, ATIF's deterministic
// dispatch.
func (b *builder) toolCall(e transcript.Entry, c transcript.ToolCall) {
	if _, ok := b.calls[c.CallID]; ok {
		return
	}
	if b.dispatch < 0 {
		s := b.agentStep(e, false)
		zero := 0
		s.LLMCallCount = &zero
		b.dispatch = b.add(e.Seq, s)
	}
	step := &b.t.Steps[b.dispatch]
	step.ToolCalls = append(step.ToolCalls, toolCall(c.CallID, c.Name, c.Input))
	b.calls[c.CallID] = callRef{step: b.dispatch, result: -1}
}

func (b *builder) toolResult(r transcript.ToolResult) {
	text, _, _ := renderBlocks(r.Content)
	res := b.result(r.CallID)
	res.Content = text
	if r.IsError {
		setExtra(&res.Extra, "is_error", true)
	}
}

func (b *builder) toolCompletion(c transcript.ToolCompletion) {
	res := b.result(c.CallID)
	setExtra(&res.Extra, "status", string(c.Status))
	if c.Duration > 0 {
		setExtra(&res.Extra, "duration_ms", float64(c.Duration.Microseconds())/1000)
	}
	if c.Error != "" {
		setExtra(&res.Extra, "error", c.Error)
	}
}

// Hook is a hook verdict in a trajectory: what lifecycle hooks decided,
// with the sequence number of its entry.
type Hook struct {
	Seq int64 `json:"seq"`
	transcript.HookVerdict
}

// hookVerdict adds what the hooks decided to extra.hooks of what it was
// about: the tool call of a tool event; otherwise the latest step, such as
// the answer a Stop hook saw, or the system step for the hooks that ran
// before the first message (SessionStart, UserPromptSubmit).
func (b *builder) hookVerdict(e transcript.Entry, v transcript.HookVerdict) {
	h := Hook{Seq: e.Seq, HookVerdict: v}
	if ref, ok := b.calls[v.CallID]; ok && v.CallID != "" {
		calls := b.t.Steps[ref.step].ToolCalls
		for i := range calls {
			if calls[i].ToolCallID == v.CallID {
				appendExtra(&calls[i].Extra, "hooks", h)
				return
			}
		}
	}
	appendExtra(&b.t.Steps[len(b.t.Steps)-1].Extra, "hooks", h)
}

// result returns the observation result of a call, creating it in the
// call's step. The result of a call the trajectory does not have goes to
// the latest step, without a source_call_id (ATIF's reference must name a
// call of the same step) and with extra.call_id.
func (b *builder) result(callID string) *Result {
	ref, ok := b.calls[callID]
	if ok && ref.result >= 0 {
		return &b.t.Steps[ref.step].Observation.Results[ref.result]
	}
	res := Result{SourceCallID: callID}
	if !ok {
		ref.step = len(b.t.Steps) - 1
		res = Result{Extra: map[string]any{"call_id": callID}}
	}
	step := &b.t.Steps[ref.step]
	if step.Observation == nil {
		step.Observation = &Observation{}
	}
	step.Observation.Results = append(step.Observation.Results, res)
	ref.result = len(step.Observation.Results) - 1
	// Remembered even for an unknown call, so that its completion joins
	// its result.
	b.calls[callID] = ref
	return &step.Observation.Results[ref.result]
}

func (b *builder) usage(u transcript.Usage) {
	prev := b.lastUsage
	if prev == nil {
		prev = &transcript.Usage{}
	}
	b.lastUsage = &u
	if b.pendingLLM < 0 {
		return
	}
	step := &b.t.Steps[b.pendingLLM]
	b.pendingLLM = -1
	m := &Metrics{
		PromptTokens:     ptr(delta(u.InputTokens, prev.InputTokens)),
		CompletionTokens: ptr(delta(u.OutputTokens, prev.OutputTokens)),
		CachedTokens:     ptr(delta(u.CacheReadTokens, prev.CacheReadTokens)),
	}
	if finite(u.CostUSD) && finite(prev.CostUSD) && u.CostUSD > 0 {
		d := u.CostUSD - prev.CostUSD
		if d < 0 {
			d = u.CostUSD
		}
		m.CostUSD = ptr(roundCost(d))
	}
	if u.CacheWriteTokens > 0 {
		setExtra(&m.Extra, "cache_write_tokens", delta(u.CacheWriteTokens, prev.CacheWriteTokens))
	}
	if u.ReasoningTokens > 0 {
		setExtra(&m.Extra, "reasoning_tokens", delta(u.ReasoningTokens, prev.ReasoningTokens))
	}
	if u.Requests > 0 {
		setExtra(&m.Extra, "requests", delta(u.Requests, prev.Requests))
	}
	if u.ContextTokens > 0 {
		setExtra(&m.Extra, "context_tokens", u.ContextTokens)
	}
	step.Metrics = m
}

func (b *builder) compaction(e transcript.Entry, c transcript.Compaction) {
	text, _, _ := renderBlocks(c.Replacement)
	cm := map[string]any{"type": "compaction", "boundary": "replace"}
	if c.Provenance.TokensBefore > 0 {
		cm["tokens_before"] = c.Provenance.TokensBefore
	}
	if c.Provenance.TokensAfter > 0 {
		cm["tokens_after"] = c.Provenance.TokensAfter
	}
	detail := map[string]any{"first_kept_seq": c.FirstKept}
	// The kept tail starts at the first step made from an entry at or after
	// FirstKept; the steps before it are what the summary replaced.
	if i := sort.Search(len(b.seqs), func(i int) bool { return b.seqs[i] >= c.FirstKept }); i < len(b.seqs) {
		detail["first_kept_step_id"] = i + 1
	}
	provenance := map[string]any{
		"trigger":  c.Provenance.Trigger,
		"provider": c.Provenance.Provider,
		"model":    c.Provenance.Model,
	}
	for k, v := range provenance {
		if v != "" {
			detail[k] = v
		}
	}
	if c.Provenance.Messages > 0 {
		detail["messages"] = c.Provenance.Messages
	}
	if len(c.Provenance.PendingChildren) > 0 {
		detail["pending_children"] = uuidStrings(c.Provenance.PendingChildren)
	}
	b.add(e.Seq, Step{
		Timestamp: timestamp(e.CreatedAt),
		Source:    sourceSystem,
		Message:   text,
		Extra:     map[string]any{"context_management": cm, "compaction": detail},
	})
}

func (b *builder) subagent(e transcript.Entry, o transcript.SubagentOutcome) {
	msg := fmt.Sprintf("Subagent %s: %s.", o.Session, o.Outcome)
	if o.Summary != "" {
		msg += "\n\n" + o.Summary
	}
	detail := map[string]any{"session_id": o.Session.String(), "outcome": o.Outcome}
	if o.Usage != nil {
		detail["usage"] = usageMap(*o.Usage)
	}
	for k, v := range map[string]string{"call_id": o.CallID, "agent_type": o.AgentType, "answer_digest": o.AnswerDigest} {
		if v != "" {
			detail[k] = v
		}
	}
	step := b.add(e.Seq, Step{
		Timestamp: timestamp(e.CreatedAt),
		Source:    sourceSystem,
		Message:   msg,
		Extra:     map[string]any{"subagent": detail},
	})
	if !b.embedded[o.Session] {
		return
	}
	ref := SubagentRef{TrajectoryID: o.Session.String(), SessionID: o.Session.String()}
	if _, ok := b.calls[o.CallID]; ok && o.CallID != "" {
		// The spawning call's result refers to the child; the tool result
		// that follows fills its content.
		res := b.result(o.CallID)
		res.SubagentTrajectoryRef = append(res.SubagentTrajectoryRef, ref)
		return
	}
	// A call the trajectory does not have: the outcome's own step refers
	// to the child.
	b.t.Steps[step].Observation = &Observation{Results: []Result{{
		Content: o.Summary, SubagentTrajectoryRef: []SubagentRef{ref},
	}}}
}

func (b *builder) finish() *Trajectory {
	t := b.t
	fm := &FinalMetrics{TotalSteps: len(t.Steps)}
	if u := b.lastUsage; u != nil {
		fm.TotalPromptTokens = ptr(u.InputTokens)
		fm.TotalCompletionTokens = ptr(u.OutputTokens)
		fm.TotalCachedTokens = ptr(u.CacheReadTokens)
		if finite(u.CostUSD) && u.CostUSD > 0 {
			fm.TotalCostUSD = ptr(roundCost(u.CostUSD))
		}
		extra := map[string]any{}
		for k, v := range map[string]int64{
			"total_cache_write_tokens": u.CacheWriteTokens,
			"total_reasoning_tokens":   u.ReasoningTokens,
			"total_requests":           u.Requests,
			"context_tokens":           u.ContextTokens,
		} {
			if v > 0 {
				extra[k] = v
			}
		}
		if len(extra) > 0 {
			fm.Extra = extra
		}
	}
	t.FinalMetrics = fm

	extra := map[string]any{}
	if outcome := firstNonEmpty(b.in.Outcome, b.lastOutcome); outcome != "" {
		extra["outcome"] = outcome
	}
	s := b.in.Session
	session := map[string]any{}
	if s.Kind != "" {
		session["kind"] = s.Kind
	}
	if s.Label != "" {
		session["label"] = s.Label
	}
	if s.ParentID != uuid.Nil {
		session["parent_id"] = s.ParentID.String()
	}
	if s.RootID != uuid.Nil && s.RootID != s.ID {
		session["root_id"] = s.RootID.String()
	}
	if len(session) > 0 {
		extra["session"] = session
	}
	if b.fork != nil {
		extra["fork"] = map[string]any{"source_session_id": b.fork.Source.String(), "source_seq": b.fork.SourceSeq}
	}
	if len(b.layers) > 0 {
		extra["extension_layers"] = b.layers
	}
	if len(b.skipped) > 0 {
		extra["skipped_entries"] = b.skipped
	}
	if len(extra) > 0 {
		t.Extra = extra
	}
	return t
}

// renderBlocks splits message content into its text, its reasoning and its
// tool_use blocks. Blocks are separated by a blank line. A block type this
// runner does not know contributes its text, if it has any.
func renderBlocks(blocks []transcript.Block) (text, reasoning string, uses []transcript.Block) {
	var texts, thoughts []string
	for _, bl := range blocks {
		switch bl.Type {
		case transcript.BlockThinking:
			if bl.Text != "" {
				thoughts = append(thoughts, bl.Text)
			}
		case transcript.BlockToolUse:
			uses = append(uses, bl)
		case transcript.BlockImage:
			texts = append(texts,
				fmt.Sprintf("[image: %s, %d bytes]", firstNonEmpty(bl.MediaType, "unknown type"), len(bl.Data)))
		default:
			if bl.Text != "" {
				texts = append(texts, bl.Text)
			}
		}
	}
	return strings.Join(texts, "\n\n"), strings.Join(thoughts, "\n\n"), uses
}

// toolCall makes an ATIF tool call. ATIF's arguments are a JSON object.
// Arguments held as a JSON string (the text the model produced, as the
// OpenAI APIs give it) are unwrapped; anything that is still not an object
// (malformed or truncated JSON, an array) is kept as text in
// extra.raw_arguments, so that nothing the model did is lost.
func toolCall(id, name string, input json.RawMessage) ToolCall {
	c := ToolCall{ToolCallID: id, FunctionName: name, Arguments: json.RawMessage(`{}`)}
	in := bytes.TrimSpace(input)
	raw := string(input)
	var s string
	if len(in) > 0 && in[0] == '"' && json.Unmarshal(in, &s) == nil {
		in, raw = bytes.TrimSpace([]byte(s)), s
	}
	switch {
	case len(in) == 0:
	case in[0] == '{' && json.Valid(in):
		var compact bytes.Buffer
		if json.Compact(&compact, in) == nil {
			c.Arguments = compact.Bytes()
		}
	default:
		c.Extra = map[string]any{"raw_arguments": raw}
	}
	return c
}

func usageMap(u transcript.Usage) map[string]any {
	m := map[string]any{}
	for k, v := range map[string]int64{
		"input_tokens":       u.InputTokens,
		"output_tokens":      u.OutputTokens,
		"cache_read_tokens":  u.CacheReadTokens,
		"cache_write_tokens": u.CacheWriteTokens,
		"reasoning_tokens":   u.ReasoningTokens,
		"requests":           u.Requests,
	} {
		if v > 0 {
			m[k] = v
		}
	}
	if finite(u.CostUSD) && u.CostUSD > 0 {
		m["cost_usd"] = roundCost(u.CostUSD)
	}
	return m
}

// delta is cur-prev for a cumulative counter; a counter that went down was
// reset, and then all of cur is new.
func delta(cur, prev int64) int64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// roundCost drops the noise of float subtraction (0.030 - 0.0125 is
// 0.017499999999999998) at a nanodollar. A cost too large to scale is
// returned as it is.
func roundCost(v float64) float64 {
	if r := math.Round(v*1e9) / 1e9; finite(r) {
		return r
	}
	return v
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// timestamp formats t as ISO 8601 with a fixed six-digit fraction, which
// every ISO 8601 parser (Python's fromisoformat before 3.11 included)
// accepts; the store keeps microseconds anyway.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// appendExtra appends h to the list under key.
func appendExtra(m *map[string]any, key string, h Hook) {
	list, _ := (*m)[key].([]Hook)
	setExtra(m, key, append(list, h))
}

func setExtra(m *map[string]any, key string, value any) {
	if *m == nil {
		*m = map[string]any{}
	}
	(*m)[key] = value
}

func uuidStrings(ids []uuid.UUID) []string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return s
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

// MarshalTrajectory returns the JSON of a trajectory as WriteTrajectory
// writes it: indented, without HTML escaping (tool output is full of < and
// >), ending in a newline.
func MarshalTrajectory(t *Trajectory) ([]byte, error) {
	if t == nil {
		return nil, errors.New("marshal trajectory: nil trajectory")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(t); err != nil {
		return nil, fmt.Errorf("marshal trajectory: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteTrajectory writes t to path as JSON, replacing any file there
// atomically: the JSON goes to a temporary file in the same directory, is
// synced, renamed over path, and the directory is synced, so a reader or a
// crash sees the old file or the new one, never a part. Missing parent
// directories are created. An existing file keeps its permissions; a new one
// gets 0644. An error before the rename leaves the old file as it was and
// removes the temporary file; only a failure to sync the directory comes
// after the file is replaced.
//
// The caller decides what a failure means; for `aerie run` it is a warning
// that leaves the run's outcome alone.
func WriteTrajectory(path string, t *Trajectory) error {
	if path == "" {
		return errors.New("write trajectory: empty path")
	}
	data, err := MarshalTrajectory(t)
	if err != nil {
		return fmt.Errorf("write trajectory %s: %w", path, err)
	}
	if err := writeTrajectoryFile(path, data); err != nil {
		return fmt.Errorf("write trajectory %s: %w", path, err)
	}
	return nil
}

// writeTrajectoryFile creates path's directories and replaces path,
// keeping an existing file's permissions.
func writeTrajectoryFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		perm = fi.Mode().Perm()
	}
	return atomicfile.Write(path, data, perm)
}
