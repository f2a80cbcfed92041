// Package agent runs the agent loop: it sends the conversation to a model,
// runs the tool calls the model makes, hands their results back, and repeats
// until the model ends its turn or a stop condition ends the run: a budget of
// turns, tokens or wall time, or a cancel.
//
// Every message, tool call, tool completion and usage snapshot is appended to
// the session's journal as it happens, and a turn-complete barrier follows each
// turn. A tool call is made durable before it runs (a barrier per call), so
// that a crash can lose a call only before it starts; once the journal has
// failed, no call runs and the run ends. The loop knows nothing
// about where the model, the tools or the journal live: hooks, permissions
// and output capping wrap the Tools it is given, budgets are
// StopConditions, and a Compactor compacts the conversation between turns
// (and once after a request over the model's context window), so the loop
// does not grow a flag per feature.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Model is the model the loop talks to; every provider.Provider is one.
type Model interface {
	Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error]
}

// Tools are the tools offered to the model; *tools.Registry is one. Run never
// fails: an unknown tool, malformed arguments and failures of the tool itself
// are error results for the model to read.
type Tools interface {
	Definitions() []provider.Tool
	Run(ctx context.Context, id, name string, args json.RawMessage) tools.Result
}

// Journal records the session's entries in order; *journal.Writer is one.
// Append never waits for storage; Barrier waits until everything appended so
// far is durable.
type Journal interface {
	Append(p transcript.Payload) int64
	Barrier(ctx context.Context) error
}

// SyncJournal is a Journal that can also wait for the entries up to a
// sequence number, and have those after it written in the background;
// *journal.Writer is one. The loop's turn-complete barrier then waits for
// the previous turn's entries only (the spec's rule), which leaves the
// storage of this turn's off the path to the next model request. With a
// plain Journal it waits for everything, as at the end of a run.
type SyncJournal interface {
	Journal
	Sync(ctx context.Context, seq int64) error
}

// Compactor compacts the conversation between turns; *compaction.Policy is
// one. Before is asked before every model request, with the conversation
// (without the system prompt) and the session's usage, and compacts it when
// its policy says so (false: not now). Overflow is asked once when the
// model refused a request as larger than its context window, to compact it
// whatever the policy, so that the loop can send it again. Manual is the
// user's request (see Loop.Compact), with focus instructions for the
// summary. Each may fail or skip for a reason (see package compaction);
// the conversation is then kept as it is.
type Compactor interface {
	Before(ctx context.Context, msgs []provider.Message, u transcript.Usage) (compaction.Result, bool, error)
	Overflow(ctx context.Context, msgs []provider.Message) (compaction.Result, error)
	Manual(ctx context.Context, msgs []provider.Message, instructions string) (compaction.Result, error)
}

// StopHook is asked when the model ends its turn whether the run may end. It
// returns a reason and true to keep the loop going: the reason becomes the
// next user message. Lifecycle Stop hooks plug in here.
type StopHook func(ctx context.Context, answer string) (reason string, block bool)

// Config is what a Loop runs with.
type Config struct {
	// Model answers the requests.
	Model Model
	// Tools run the model's tool calls; nil offers no tools.
	Tools Tools
	// Journal records the entries; nil records nothing.
	Journal Journal
	// System is the system prompt, sent first in every request.
	System string
	// Stop are checked before every model request; the first that fires
	// ends the run with its outcome.
	Stop []StopCondition
	// MaxDuration bounds the wall time of Run; zero means no bound. When it
	// passes, the current model call or tool is cancelled and the run ends
	// OutcomeDeadlineExceeded.
	MaxDuration time.Duration
	// MaxOutputTokens caps each response; zero is the provider's default.
	MaxOutputTokens int64
	// BeforeRequest, when set, runs before every model request; an error
	// fails the run (a required MCP server that cannot be reconnected).
	BeforeRequest func(ctx context.Context) error
	// Compactor, when set, compacts the conversation between turns and
	// recovers from a request over the model's context window.
	Compactor Compactor
	// HistorySeqs are the journal sequence numbers of the first entry of
	// each message of the history New continues (see HistoryWithSeqs): a
	// compaction that keeps a history message journals where the kept tail
	// starts. Without them only the messages of this run can start a tail.
	HistorySeqs []int64
	// PromptSeq is the sequence number of the prompt Run is given when
	// the prompt is journaled already, as UserEntry makes it: a new
	// session's prompt is stored with the session. Run then adds it to the
	// conversation without appending it again. Zero: Run journals it.
	PromptSeq int64
	// Concurrent, when set, names the tools whose consecutive calls in one
	// response run at the same time (spawn_agent); the other calls run one
	// after another, in order. Tools must then be safe for concurrent use.
	Concurrent func(tool string) bool
	// OnStop, when set, may keep the loop going after the model ends its
	// turn (see StopHook). It is asked at most MaxStopContinues times.
	OnStop StopHook
	// Observe receives the events of the run, synchronously, on the loop's
	// goroutine; it must not block for long. Nil discards them.
	Observe func(events.Event)
	// Logger receives what goes wrong without stopping the run (a failed
	// journal barrier). Nil discards.
	Logger *slog.Logger
}

// MaxStopContinues bounds how often a StopHook can keep a run going, so that a
// hook that always blocks cannot loop forever without a turn budget.
const MaxStopContinues = 8

// Loop is one agent conversation. It is not safe for concurrent use: one Run
// at a time.
type Loop struct {
	cfg      Config
	messages []provider.Message
	// seqs[i] is the sequence number of the first journal entry of
	// messages[i], or 0 when it is not known.
	seqs  []int64
	usage transcript.Usage
	turns int
	// appended is the sequence number of the last entry appended, and
	// turnEnd that of the last entry of the previous turn.
	appended, turnEnd int64
	// journalErr is the first journal failure, reported once.
	journalErr error
	// compactions are the compactions made so far.
	compactions []transcript.Provenance
}

// New returns a loop that continues the conversation history (empty for a new
// session; see History for a resumed one) with the cumulative usage so far.
func New(cfg Config, history []provider.Message, usage transcript.Usage) *Loop {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	seqs := make([]int64, len(history))
	if len(cfg.HistorySeqs) == len(history) {
		copy(seqs, cfg.HistorySeqs)
	}
	return &Loop{cfg: cfg, messages: append([]provider.Message(nil), history...), seqs: seqs, usage: usage}
}

// SetSystem replaces the system prompt from the next model request on, and
// SetTools the tools offered and run. Call them only between turns — from
// Config.BeforeRequest, or while Run is not running — so that a turn never
// changes under the model: a session's reload coordinator swaps its
// extensions there.
func (l *Loop) SetSystem(system string) { l.cfg.System = system }

// SetTools: see SetSystem.
func (l *Loop) SetTools(t Tools) { l.cfg.Tools = t }

// Messages returns the conversation so far, without the system prompt.
func (l *Loop) Messages() []provider.Message { return append([]provider.Message(nil), l.messages...) }

// Result is how a run ended.
type Result struct {
	Outcome transcript.Outcome
	// Reason says why, in words, for outcomes other than OutcomeCompleted.
	Reason string
	// Answer is the text of the model's last message.
	Answer string
	// Turns counts the model requests of this run.
	Turns int
	// Usage is the session's cumulative usage at the end of the run.
	Usage transcript.Usage
	// Err is the error behind an OutcomeModelError or OutcomeFailed.
	Err error
	// JournalErr is the journal's failure, if it failed during the run.
	// A failure before the end ends the run OutcomeFailed; one at the
	// final barrier leaves the outcome as it was, but the stored
	// transcript lacks the last entries.
	JournalErr error
	// Compactions are the compactions made during the run, in order.
	Compactions []transcript.Provenance
	// Approval is the tool call the run paused on, with
	// OutcomeAwaitingApproval.
	Approval *transcript.ApprovalRequest
}

// Errors that end a run, as context causes. Cancel the context of Run with
// context.WithCancelCause(ErrCancelled) (or any other cause) to stop a run.
var (
	// ErrDeadline is the cause of a run's context when MaxDuration passed.
	ErrDeadline = errors.New("the session's time budget is spent")
	// ErrCancelled is a generic cause for a cancel.
	ErrCancelled = errors.New("the session was cancelled")
)

// Run adds prompt as a user message (unless it is empty, to continue a resumed
// conversation as it stands) and runs turns until the run ends.
func (l *Loop) Run(ctx context.Context, prompt string) Result {
	if l.cfg.MaxDuration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, l.cfg.MaxDuration, ErrDeadline)
		defer cancel()
	}
	if prompt != "" {
		seq := l.cfg.PromptSeq
		if seq == 0 {
			seq = l.append(UserEntry(prompt))
		}
		l.addUser(prompt, seq)
	}
	continues := 0
	for {
		if ctx.Err() != nil {
			return l.end(ctx, stopped(ctx))
		}
		if r, ok := l.checkStop(); ok {
			return l.end(ctx, r)
		}
		if l.cfg.BeforeRequest != nil {
			if err := l.cfg.BeforeRequest(ctx); err != nil {
				if ctx.Err() != nil {
					return l.end(ctx, stopped(ctx))
				}
				return l.end(ctx, Result{Outcome: transcript.OutcomeFailed, Reason: err.Error(), Err: err})
			}
		}
		if l.compactBefore(ctx) {
			// The summary's tokens may have spent the budget.
			if r, ok := l.checkStop(); ok {
				return l.end(ctx, r)
			}
		}
		resp, err := l.requestRecovering(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return l.end(ctx, stopped(ctx))
			}
			return l.end(ctx, Result{Outcome: transcript.OutcomeModelError, Reason: err.Error(), Err: err})
		}
		calls := resp.Message.ToolCalls()
		if len(calls) > 0 {
			endTurn, await := l.runTools(ctx, calls)
			l.turnBarrier(ctx)
			if await != nil {
				return l.end(ctx, awaiting(*await))
			}
			if endTurn != "" && ctx.Err() == nil {
				// A hook ended the turn: the run is over, as the model's
				// own end of turn would have it, and says why.
				return l.end(ctx, Result{Outcome: transcript.OutcomeCompleted, Reason: endTurn})
			}
			continue
		}
		r := answered(resp)
		if r.Outcome == transcript.OutcomeCompleted && l.cfg.OnStop != nil && continues < MaxStopContinues {
			if reason, block := l.cfg.OnStop(ctx, r.Answer); block {
				continues++
				l.addUser(reason, l.append(UserEntry(reason)))
				l.turnBarrier(ctx)
				continue
			}
		}
		return l.end(ctx, r)
	}
}

// answered is the result of a response without tool calls.
func answered(resp provider.Response) Result {
	r := Result{Answer: resp.Message.Text()}
	switch resp.StopReason {
	case provider.StopEndTurn, provider.StopSequence, "":
		r.Outcome = transcript.OutcomeCompleted
	case provider.StopMaxTokens:
		r.Outcome, r.Reason = transcript.OutcomeModelError, "the answer was cut off at the output token limit"
	case provider.StopRefusal:
		r.Outcome, r.Reason = transcript.OutcomeModelError, "the model refused to answer"
	case provider.StopContextWindow:
		r.Outcome, r.Reason = transcript.OutcomeModelError, "the conversation filled the model's context window"
	case provider.StopToolUse:
		// A tool_use stop without a complete tool call: nothing to run.
		r.Outcome, r.Reason = transcript.OutcomeModelError, "the model stopped for a tool call but sent none"
	default:
		r.Outcome = transcript.OutcomeModelError
		r.Reason = fmt.Sprintf("the model stopped for an unknown reason %q", resp.StopReason)
	}
	if r.Outcome == transcript.OutcomeModelError {
		r.Err = errors.New(r.Reason)
	}
	return r
}

// stopped is the result of a run whose context ended.
func stopped(ctx context.Context) Result {
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrDeadline) {
		return Result{Outcome: transcript.OutcomeDeadlineExceeded, Reason: cause.Error()}
	}
	return Result{Outcome: transcript.OutcomeCancelled, Reason: cause.Error(), Err: cause}
}

func (l *Loop) checkStop() (Result, bool) {
	if l.journalErr != nil {
		return journalStopped(l.journalErr), true
	}
	s := Status{Turns: l.turns, Usage: l.usage}
	for _, stop := range l.cfg.Stop {
		if out, reason, ok := stop(s); ok {
			return Result{Outcome: out, Reason: reason}, true
		}
	}
	return Result{}, false
}

// end records the outcome and finishes the run. The journal barrier runs even
// when ctx has ended, so that a cancelled run is still recorded whole.
func (l *Loop) end(ctx context.Context, r Result) Result {
	r.Turns, r.Usage, r.Compactions = l.turns, l.usage, l.compactions
	if r.Answer == "" {
		r.Answer = l.lastAnswer()
	}
	seq := l.append(transcript.Checkpoint{Turn: int64(l.turns), Outcome: r.Outcome, Result: r.Answer})
	l.barrier(context.WithoutCancel(ctx))
	r.JournalErr = l.journalErr
	l.emit(events.Event{
		Type: events.End, Seq: seq, Turn: l.turns,
		Outcome: r.Outcome, Text: r.Answer, Reason: r.Reason, Usage: &r.Usage,
	})
	return r
}

func (l *Loop) lastAnswer() string {
	for i := len(l.messages) - 1; i >= 0; i-- {
		if l.messages[i].Role == provider.RoleAssistant {
			return l.messages[i].Text()
		}
	}
	return ""
}

// UserEntry is the journal entry of a user message of text.
func UserEntry(text string) transcript.UserMessage {
	return transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: text}}}
}

// addUser adds a user message, journaled with sequence number seq, to the
// conversation.
func (l *Loop) addUser(text string, seq int64) {
	l.addMessage(provider.UserMessage(text), seq)
	l.emit(events.Event{Type: events.UserMessage, Seq: seq, Turn: l.turns + 1, Text: text})
}

// request sends the conversation and streams the answer, forwarding its text
// as it arrives. The assistant message and the usage are recorded.
func (l *Loop) request(ctx context.Context) (provider.Response, error) {
	l.turns++
	turn := l.turns
	l.emit(events.Event{Type: events.TurnStart, Turn: turn})
	req := provider.Request{Messages: l.conversation(), MaxOutputTokens: l.cfg.MaxOutputTokens}
	if l.cfg.Tools != nil {
		req.Tools = l.cfg.Tools.Definitions()
	}
	start := time.Now()
	var acc provider.Accumulator
	for part, err := range l.cfg.Model.Stream(ctx, req) {
		if err != nil {
			return provider.Response{}, fmt.Errorf("model request: %w", err)
		}
		if err := acc.Add(part); err != nil {
			return provider.Response{}, fmt.Errorf("model response: %w", err)
		}
		switch part.Type {
		case provider.PartTextDelta:
			l.emit(events.Event{Type: events.TextDelta, Turn: turn, Text: part.Text})
		case provider.PartReasoningDelta:
			l.emit(events.Event{Type: events.ReasoningDelta, Turn: turn, Text: part.Text})
		}
	}
	resp, err := acc.Response()
	if err != nil {
		return provider.Response{}, fmt.Errorf("model response: %w", err)
	}
	seq := l.append(assistantEntry(resp))
	l.addMessage(resp.Message, seq)
	l.emit(events.Event{
		Type: events.AssistantMessage, Seq: seq, Turn: turn,
		Text: resp.Message.Text(), StopReason: string(resp.StopReason), Duration: time.Since(start),
	})

	l.usage = addUsage(l.usage, resp.Usage)
	useq := l.append(l.usage)
	u := l.usage
	l.emit(events.Event{Type: events.Usage, Seq: useq, Turn: turn, Usage: &u})
	return resp, nil
}

func (l *Loop) conversation() []provider.Message {
	msgs := make([]provider.Message, 0, len(l.messages)+1)
	if l.cfg.System != "" {
		msgs = append(msgs, provider.SystemMessage(l.cfg.System))
	}
	return append(msgs, l.messages...)
}

// toolUsage adds what a tool's own model requests (a mixture of agents)
// or a compaction's summary requests used to the session's usage,
// journaled and reported as a response's is, so that the token and cost
// budgets count it. They are not the session's turns: the request count
// and the context size stay as they are.
func (l *Loop) toolUsage(r provider.Usage) {
	if r == (provider.Usage{}) {
		return
	}
	l.usage.InputTokens += r.InputTokens
	l.usage.OutputTokens += r.OutputTokens
	l.usage.CacheReadTokens += r.CacheReadTokens
	l.usage.CacheWriteTokens += r.CacheWriteTokens
	l.usage.CostUSD += r.CostUSD
	useq := l.append(l.usage)
	u := l.usage
	l.emit(events.Event{Type: events.Usage, Seq: useq, Turn: l.turns, Usage: &u})
}

func addUsage(u transcript.Usage, r provider.Usage) transcript.Usage {
	u.InputTokens += r.InputTokens
	u.OutputTokens += r.OutputTokens
	u.CacheReadTokens += r.CacheReadTokens
	u.CacheWriteTokens += r.CacheWriteTokens
	u.CostUSD += r.CostUSD
	u.Requests++
	u.ContextTokens = r.InputTokens + r.OutputTokens
	return u
}

// runTools runs the calls in order and adds their results as one message. A
// call left unrun because the run was stopped, or because a call before it
// ended the turn, still gets a result, so the conversation stays
// well-formed for a resume. endTurn is the reason of the call that ended
// the turn, if one did. A call that awaits a person's approval gets no
// result but an ApprovalRequest entry, and the calls after it are not
// run: await is that request, and the run pauses on it (a resumed run
// answers it, see ResolveApproval).
//
// Consecutive calls to tools Config.Concurrent names run at the same time:
// their calls are journaled (and made durable) together first, then their
// results in call order once all have returned, so that the journal's
// order does not depend on which finished first.
func (l *Loop) runTools(
	ctx context.Context, calls []provider.Content,
) (endTurn string, await *transcript.ApprovalRequest) {
	results := make([]provider.Content, 0, len(calls))
	var first int64
	for i := 0; i < len(calls); {
		if await != nil && endTurn == "" {
			endTurn = fmt.Sprintf("the session paused for a person to approve call %s (%s); "+
				"make this call again if it is still needed", await.CallID, await.Tool)
		}
		group := calls[i : i+l.concurrentRun(calls[i:])]
		i += len(group)
		for _, c := range group {
			seq := l.append(transcript.ToolCall{CallID: c.ToolCallID, Name: c.ToolName, Input: storedArguments(c.Arguments)})
			if first == 0 {
				first = seq
			}
			l.emit(events.Event{
				Type: events.ToolCall, Turn: l.turns, CallID: c.ToolCallID, Tool: c.ToolName, Arguments: c.Arguments,
			})
		}
		for j, done := range l.runGroup(ctx, group, endTurn) {
			if endTurn == "" {
				endTurn = done.res.EndTurn
			}
			if req, ok := suspended(ctx, done.res); ok {
				// No result: the resumed session continues the call.
				if await == nil {
					await = req
				}
				continue
			}
			if done.res.Await != nil && await == nil && ctx.Err() == nil {
				await = l.requestApproval(group[j], *done.res.Await)
				continue
			}
			results = append(results, l.recordCall(group[j], done))
		}
	}
	if len(results) > 0 {
		l.addMessage(provider.Message{Role: provider.RoleTool, Content: results}, first)
	}
	return endTurn, await
}

// suspended reports whether res is a suspended call's (see
// tools.Result.Suspended) that the loop leaves pending: the run is being
// stopped, or the call waits on a request another session of the tree
// journaled, which it returns.
func suspended(ctx context.Context, res tools.Result) (*transcript.ApprovalRequest, bool) {
	if !res.Suspended {
		return nil, false
	}
	if a := res.Await; a != nil && a.Request != nil {
		return a.Request, true
	}
	return nil, ctx.Err() != nil
}

// concurrentRun returns how many calls at the start of calls run together:
// the run of consecutive calls to concurrent tools, or 1.
func (l *Loop) concurrentRun(calls []provider.Content) int {
	if l.cfg.Concurrent == nil {
		return 1
	}
	n := 0
	for n < len(calls) && l.cfg.Concurrent(calls[n].ToolName) {
		n++
	}
	return max(n, 1)
}

// called is how a tool call went.
type called struct {
	res    tools.Result
	status transcript.ToolStatus
	d      time.Duration
}

func notRun(reason string) called {
	return called{res: tools.Result{Content: "not run: " + reason, IsError: true}, status: transcript.ToolCancelled}
}

// runGroup runs calls whose entries are journaled, together when there are
// several, after a barrier: a call is durable before it starts (see
// runTools), so that after a crash while it runs the resumed session finds
// it and answers it as interrupted (see Unanswered), instead of a model
// that never saw it making it again. endTurn is the reason a call before
// them ended the turn, if one did: they are then not run.
func (l *Loop) runGroup(ctx context.Context, calls []provider.Content, endTurn string) []called {
	out := make([]called, len(calls))
	var run []int
	for i, c := range calls {
		switch {
		case ctx.Err() != nil:
			out[i] = notRun(context.Cause(ctx).Error())
		case endTurn != "":
			out[i] = notRun(endTurn)
		case l.cfg.Tools == nil:
			out[i] = called{
				res:    tools.Result{Content: fmt.Sprintf("unknown tool %q: no tools are available", c.ToolName), IsError: true},
				status: transcript.ToolError,
			}
		default:
			run = append(run, i)
		}
	}
	if len(run) == 0 {
		return out
	}
	l.barrier(ctx)
	if ctx.Err() != nil || l.journalErr != nil {
		reason := errNotRecorded.Error()
		if ctx.Err() != nil {
			reason = context.Cause(ctx).Error()
		}
		for _, i := range run {
			out[i] = notRun(reason)
		}
		return out
	}
	one := func(c provider.Content) called {
		start := time.Now()
		res := l.cfg.Tools.Run(ctx, c.ToolCallID, c.ToolName, json.RawMessage(c.Arguments))
		return called{res: res, status: toolStatus(ctx, res), d: time.Since(start)}
	}
	if len(run) == 1 {
		out[run[0]] = one(calls[run[0]])
		return out
	}
	var wg sync.WaitGroup
	for _, i := range run {
		wg.Go(func() { out[i] = one(calls[i]) })
	}
	wg.Wait()
	return out
}

// recordCall journals what a call returned — the entries it carries, its
// result and its completion — and returns its result for the model.
func (l *Loop) recordCall(c provider.Content, done called) provider.Content {
	res := done.res
	for _, e := range res.Entries {
		l.append(e)
	}
	seq := l.append(transcript.ToolResult{
		CallID:  c.ToolCallID,
		Content: []transcript.Block{{Type: transcript.BlockText, Text: res.Content}},
		IsError: res.IsError,
	})
	comp := transcript.ToolCompletion{CallID: c.ToolCallID, Status: done.status, Duration: done.d}
	if res.IsError {
		comp.Error = CompletionError(res.Content)
	}
	l.append(comp)
	l.emit(events.Event{
		Type: events.ToolResult, Seq: seq, Turn: l.turns, CallID: c.ToolCallID, Tool: c.ToolName,
		Text: res.Content, IsError: res.IsError, Status: string(done.status), Duration: done.d, Process: res.Process,
	})
	l.toolUsage(res.Usage)
	return provider.ToolResult(c.ToolCallID, res.Content, res.IsError)
}

// addMessage adds a message to the conversation, with the sequence number
// of its first journal entry.
func (l *Loop) addMessage(m provider.Message, seq int64) {
	l.messages = append(l.messages, m)
	l.seqs = append(l.seqs, seq)
}

func toolStatus(ctx context.Context, res tools.Result) transcript.ToolStatus {
	switch {
	case ctx.Err() != nil:
		if errors.Is(context.Cause(ctx), ErrDeadline) {
			return transcript.ToolTimeout
		}
		return transcript.ToolCancelled
	case res.IsError:
		return transcript.ToolError
	}
	return transcript.ToolOK
}

// CompletionError is the error a ToolCompletion records for a failed
// result: the first line of its content, at most 200 bytes.
func CompletionError(s string) string {
	const max = 200
	for i, r := range s {
		if r == '\n' || i >= max {
			return s[:i]
		}
	}
	return s
}

func (l *Loop) append(p transcript.Payload) int64 {
	if l.cfg.Journal == nil {
		return 0
	}
	l.appended = l.cfg.Journal.Append(p)
	return l.appended
}

// turnBarrier completes a turn: the previous turn's entries are made
// durable, and this turn's go to storage in the background (SyncJournal);
// with a plain Journal, everything is made durable.
func (l *Loop) turnBarrier(ctx context.Context) {
	prev := l.turnEnd
	l.turnEnd = l.appended
	if j, ok := l.cfg.Journal.(SyncJournal); ok {
		l.journalFailed(ctx, j.Sync(ctx, prev))
		return
	}
	l.barrier(ctx)
}

// barrier makes everything appended so far durable, as at the end of a
// run.
func (l *Loop) barrier(ctx context.Context) {
	if l.cfg.Journal == nil {
		return
	}
	l.journalFailed(ctx, l.cfg.Journal.Barrier(ctx))
}

// errNotRecorded is why a call is not run once the journal has failed.
var errNotRecorded = errors.New("the journal failed, so the call could not be recorded before it ran")

// journalStopped is the result of a run whose journal failed.
func journalStopped(err error) Result {
	return Result{
		Outcome: transcript.OutcomeFailed,
		Reason: fmt.Sprintf("the journal failed (%v): the agent stopped so that nothing runs unrecorded; "+
			"a resume continues from the last stored entry", err),
		Err: err,
	}
}

// journalFailed handles the error of a barrier: logged once, reported in
// the Result, and the end of the run. The spec lets the agent go on without
// storing; aerie stops it at the next call or request instead, because a
// call made after the journal failed is not on record, and a resume would
// make it again.
func (l *Loop) journalFailed(ctx context.Context, err error) {
	if err == nil || l.journalErr != nil {
		return
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return // the run was stopped while waiting: not a journal failure
	}
	l.journalErr = err
	l.cfg.Logger.Error("the journal failed: the agent stops", "turn", l.turns, "err", err)
	l.emit(events.Event{Type: events.Warning, Turn: l.turns, Reason: "journal: " + err.Error()})
}

func (l *Loop) emit(e events.Event) {
	if l.cfg.Observe == nil {
		return
	}
	e.Time = time.Now()
	l.cfg.Observe(e)
}
