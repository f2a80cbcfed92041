// Package compaction decides when and where to compact a conversation, and
// makes the replacement: the spec's conversation compaction, as logic the
// agent loop consults between turns. It knows nothing of the loop, the
// journal or the provider behind its Summarizer.
//
// A Policy follows one conversation. Observe, before every model request,
// brings its estimate of the next request's tokens up to date in time
// proportional to what was added (see Tracker); Due says whether automatic
// compaction should run: the window is known and the estimate has reached
// 85 % of it (Threshold), and the last compaction saved at least 10 %
// (anti-thrash). Compact then applies the gates every trigger shares —
// child agents, the session's remaining time, a viable cut (SelectCut) —
// asks the Summarizer for a summary of the messages before the cut (at
// most MaxSummaryInput bytes of them, within SummaryTimeout), and returns
// the new conversation, the replacement followed by the tail, with its
// provenance. Any failure leaves the caller's conversation as it was.
//
// Before and Overflow are the two questions the agent loop asks (its
// Compactor): before each request, and once after a request the model
// refused as larger than its context window. Manual is the user's request
// (aerie session compact, /compact), with optional focus instructions for
// the summarizer; Hooks are told of every compaction.
//
// Triggers differ as the spec says: manual compaction bypasses the 85 %
// and anti-thrash rules; provider-overflow recovery also runs when the
// window is unknown, and waits up to OverflowChildWait for active child
// agents where the others skip, naming those still running in the summary.
package compaction

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Trigger says what started a compaction; the values are those
// transcript.Provenance stores.
type Trigger string

// The triggers of a compaction.
const (
	TriggerAuto     Trigger = "auto"
	TriggerManual   Trigger = "manual"
	TriggerOverflow Trigger = "overflow"
)

// The spec's limits.
const (
	// Threshold is the share of the usable window at which automatic
	// compaction starts, in percent.
	Threshold = 85
	// MinSaving is the share of the tokens, in percent, a compaction must
	// save for the next automatic one to run.
	MinSaving = 10
	// SummaryTimeout bounds the summary request.
	SummaryTimeout = 120 * time.Second
	// MinBudget is the least session time left for a compaction to start.
	MinBudget = 60 * time.Second
	// OverflowChildWait is how long overflow recovery waits for active
	// child agents.
	OverflowChildWait = 3 * time.Second
	// MaxAutoFailures is how many automatic compactions in a row may fail
	// (the summarizer's failures, not the gates' skips) before automatic
	// compaction stops trying, until a manual or overflow compaction
	// succeeds: each attempt costs a summary request of up to
	// SummaryTimeout, which a broken summarizer would spend every turn.
	MaxAutoFailures = 3
)

// The reasons a compaction does not run. The caller's conversation stays
// as it was; so it does when the summarizer fails.
var (
	// ErrChildrenActive: child agents are running (automatic and manual
	// compaction).
	ErrChildrenActive = errors.New("child agents are still running")
	// ErrBudget: less than MinBudget of the session's time is left.
	ErrBudget = errors.New("less than a minute of the session's time budget is left")
	// ErrNoCut: the conversation has no viable cut (fewer than MinRemoved
	// messages).
	ErrNoCut = errors.New("the conversation is too short to compact")
)

// Children are the session's child agents, for the gates; nil means the
// session has none. Subagents implement it.
type Children interface {
	// Active returns the ids of the child sessions still running.
	Active() []uuid.UUID
	// Wait returns when no child is running, or when ctx ends.
	Wait(ctx context.Context)
}

// Config is what a Policy works with.
type Config struct {
	// Window is the usable context window in tokens (see UsableWindow); 0
	// means unknown, which disables automatic compaction.
	Window int64
	// Summarizer makes the summaries.
	Summarizer Summarizer
	// Provider and Model name the summarizer's provider and model, for the
	// provenance.
	Provider, Model string
	// Children are the session's child agents; nil means none.
	Children Children
	// Now is the clock the budget gate reads; nil is time.Now.
	Now func() time.Time
	// SummaryTimeout bounds the summary request; zero is SummaryTimeout,
	// the spec's.
	SummaryTimeout time.Duration
	// Restore, when set, returns what the replacement must bring back
	// besides the summary, given the messages a compaction replaces and
	// the tail it keeps: context the replaced messages carried that the
	// tail does not (the project instructions found deeper in the tree,
	// the skills read). "" is nothing.
	Restore func(compacted, tail []provider.Message) string

	// Hooks, when set, are told of each compaction (the lifecycle hooks
	// PreCompact and SessionStart with source compact).
	Hooks Hooks
}

// Hooks are told of the compactions a Policy makes. Pre runs once the
// gates passed, before the summary is asked for, with the trigger and the
// focus instructions of a manual compaction; it only observes. Post runs
// after the summary was made, and what it returns (empty: nothing) is
// added to the replacement, for the model to read after the cut.
type Hooks interface {
	Pre(ctx context.Context, trigger Trigger, instructions string)
	Post(ctx context.Context, trigger Trigger) string
}

// UsableWindow returns the part of a model's context window a request's
// input may fill: the window less the tokens reserved for the answer
// (maxOutput, the request's output cap, at most a quarter of the window);
// 0 when the window is unknown.
func UsableWindow(window, maxOutput int64) int64 {
	if window <= 0 {
		return 0
	}
	return window - min(max(maxOutput, 0), window/4)
}

// Policy decides and makes the compactions of one conversation. It is not
// safe for concurrent use: the loop consults it between turns.
type Policy struct {
	cfg     Config
	tracker Tracker
	// thrash is set when the last compaction saved less than MinSaving
	// percent: the next automatic one is skipped.
	thrash bool
	// failures counts the automatic compactions that failed in a row.
	failures int
}

// New returns a policy for a conversation.
func New(cfg Config) *Policy {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SummaryTimeout <= 0 {
		cfg.SummaryTimeout = SummaryTimeout
	}
	return &Policy{cfg: cfg}
}

// SetFixed sets what every request carries besides the messages: the
// system prompt and the tools. Call it when they change.
func (p *Policy) SetFixed(system string, tools []provider.Tool) {
	p.tracker.SetFixed(EstimateText(system) + EstimateTools(tools))
}

// Observe brings the estimate up to msgs, the conversation without its
// system prompt, with u the session's usage after the last response (see
// Tracker.Observe). It costs time proportional to the messages added since
// the last call.
func (p *Policy) Observe(msgs []provider.Message, u transcript.Usage) { p.tracker.Observe(msgs, u) }

// Tokens returns the estimated tokens of the next request.
func (p *Policy) Tokens() int64 { return p.tracker.Tokens() }

// Due reports whether automatic compaction should run before the next
// request: the window is known, the estimate has reached Threshold percent
// of it, the last compaction, if any, saved at least MinSaving percent, and
// fewer than MaxAutoFailures automatic compactions in a row have failed.
func (p *Policy) Due() bool {
	return p.cfg.Window > 0 && !p.thrash && p.failures < MaxAutoFailures &&
		p.tracker.Tokens()*100 >= p.cfg.Window*Threshold
}

// Before is the loop's question before a request: it brings the estimate
// up to msgs and u (see Observe) and, when automatic compaction is Due,
// compacts (TriggerAuto). It returns false when compaction is not due.
func (p *Policy) Before(ctx context.Context, msgs []provider.Message, u transcript.Usage) (Result, bool, error) {
	p.Observe(msgs, u)
	if !p.Due() {
		return Result{}, false, nil
	}
	res, err := p.Compact(ctx, msgs, TriggerAuto)
	return res, err == nil, err
}

// Overflow compacts msgs after the model refused them as larger than its
// context window (TriggerOverflow), whether or not the window is known.
func (p *Policy) Overflow(ctx context.Context, msgs []provider.Message) (Result, error) {
	return p.Compact(ctx, msgs, TriggerOverflow)
}

// Manual compacts msgs at the user's request (TriggerManual): the 85 %
// and anti-thrash rules do not apply, the gates do (see Compact).
// instructions, when not empty, tell the summarizer what to focus on.
func (p *Policy) Manual(ctx context.Context, msgs []provider.Message, instructions string) (Result, error) {
	return p.compact(ctx, msgs, TriggerManual, instructions)
}

// Result is a compaction made.
type Result struct {
	// Messages is the new conversation: the replacement as a user message,
	// then the tail as it was.
	Messages []provider.Message
	// Cut is where the old conversation was cut.
	Cut Cut
	// Replacement is the text of the replacement message (see Replacement).
	Replacement string
	// Provenance says how it was made.
	Provenance transcript.Provenance
	// Usage is what the summary requests used, each attempt's. A
	// compaction that failed after a summarizer answered returns it with
	// its error, and nothing else: the tokens were spent all the same.
	Usage provider.Usage
}

// Compact compacts msgs (the conversation without its system prompt; it is
// not modified), started by trigger, after the gates: for automatic and
// manual compaction no child agent may be running, and overflow recovery
// waits up to OverflowChildWait for them; at least MinBudget must be left
// before ctx's deadline (the session's time budget); the conversation must
// have a viable cut. It returns the new conversation, or an error (one of
// this package's, or the summarizer's) with msgs to be kept as they are.
//
// Compact does not check Due: the caller asks for automatic compaction when
// Due says so.
func (p *Policy) Compact(ctx context.Context, msgs []provider.Message, trigger Trigger) (Result, error) {
	return p.compact(ctx, msgs, trigger, "")
}

// compact is Compact, with the focus instructions of a manual compaction.
func (p *Policy) compact(
	ctx context.Context, msgs []provider.Message, trigger Trigger, instructions string,
) (Result, error) {
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(p.cfg.Now()) < MinBudget {
		return Result{}, ErrBudget
	}
	pending, err := p.children(ctx, trigger)
	if err != nil {
		return Result{}, err
	}
	p.tracker.extend(msgs)
	cut, ok := SelectCut(msgs, p.tracker.Tail, p.cfg.Window/2)
	if !ok {
		return Result{}, ErrNoCut
	}

	if p.cfg.Hooks != nil {
		p.cfg.Hooks.Pre(ctx, trigger, instructions)
	}
	sctx, cancel := context.WithTimeout(ctx, p.cfg.SummaryTimeout)
	defer cancel()
	summary, used, err := p.summarize(sctx, msgs[:cut.Index], instructions)
	if err != nil && trigger == TriggerAuto && ctx.Err() == nil {
		p.failures++
	}
	if err != nil {
		if ctx.Err() == nil && sctx.Err() != nil {
			err = fmt.Errorf("summarize %d messages: no summary within %s: %w", cut.Index, p.cfg.SummaryTimeout, err)
		} else {
			err = fmt.Errorf("summarize %d messages: %w", cut.Index, err)
		}
		return Result{Usage: used}, err
	}

	before := p.tracker.Tokens()
	text := Replacement(summary, cut.Index, pending)
	if p.cfg.Restore != nil {
		if r := p.cfg.Restore(msgs[:cut.Index], msgs[cut.Index:]); r != "" {
			text += "\n\n" + r
		}
	}
	if p.cfg.Hooks != nil {
		if extra := p.cfg.Hooks.Post(ctx, trigger); extra != "" {
			text += "\n\n" + extra
		}
	}
	out := make([]provider.Message, 0, 1+len(msgs)-cut.Index)
	out = append(out, provider.UserMessage(text))
	out = append(out, msgs[cut.Index:]...)
	p.tracker.restart()
	p.tracker.extend(out)
	after := p.tracker.Tokens()
	p.thrash = before <= 0 || (before-after)*100 < before*MinSaving
	p.failures = 0

	return Result{
		Messages:    out,
		Cut:         cut,
		Replacement: text,
		Usage:       used,
		Provenance: transcript.Provenance{
			Trigger:         string(trigger),
			Provider:        p.cfg.Provider,
			Model:           p.cfg.Model,
			Messages:        cut.Index,
			TokensBefore:    before,
			TokensAfter:     after,
			PendingChildren: pending,
		},
	}, nil
}

// summarize asks for the summary of prefix. The summary request must fit
// the window itself: with the window known, half of it is for the input
// and at most a quarter for the summary; unknown, the input is at most half
// the conversation's size, since the conversation is what overflowed. A
// summary request the model refuses as too large too is made again with
// half the input, twice at most. instructions, when not empty, are the
// user's focus for the summary. It returns the summary and what every
// attempt used.
func (p *Policy) summarize(
	ctx context.Context, prefix []provider.Message, instructions string,
) (string, provider.Usage, error) {
	limit, maxOutput := MaxSummaryInput, int64(maxSummaryOutput)
	if w := p.cfg.Window; w > 0 {
		limit = int(min(int64(limit), w/2*BytesPerToken))
		maxOutput = min(maxOutput, w/4)
	} else {
		limit = int(min(int64(limit), p.tracker.Tokens()*BytesPerToken/2))
	}
	var used provider.Usage
	for attempt := 0; ; attempt++ {
		summary, u, err := summarize(ctx, p.cfg.Summarizer, Render(prefix, limit), instructions, maxOutput)
		used = used.Add(u)
		if err == nil || attempt == 2 || !errors.Is(err, provider.ErrContextOverflow) {
			return summary, used, err
		}
		limit /= 2
	}
}

// children applies the child gate of trigger and returns the children
// still running that the summary names.
func (p *Policy) children(ctx context.Context, trigger Trigger) ([]uuid.UUID, error) {
	if p.cfg.Children == nil {
		return nil, nil
	}
	if trigger != TriggerOverflow {
		if len(p.cfg.Children.Active()) > 0 {
			return nil, ErrChildrenActive
		}
		return nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, OverflowChildWait)
	defer cancel()
	p.cfg.Children.Wait(wctx)
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	return p.cfg.Children.Active(), nil
}
