package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// compactBefore asks the Compactor, before a request, whether to compact,
// and applies the compaction it makes. A compaction that fails is a
// warning: the conversation goes on as it is; one skipped by a gate is
// only logged. It reports whether the summary requests used tokens, which
// the session's usage counts, made or failed.
func (l *Loop) compactBefore(ctx context.Context) bool {
	if l.cfg.Compactor == nil {
		return false
	}
	res, ok, err := l.cfg.Compactor.Before(ctx, l.messages, l.usage)
	if err == nil && ok {
		err = l.applyCompaction(res)
	}
	l.toolUsage(res.Usage)
	l.compactionFailed(ctx, err)
	return res.Usage != (provider.Usage{})
}

// Compact compacts the conversation at the user's request (a manual
// compaction, with instructions, if any, for the summary) and ends the run
// without a model request, the way `/compact` does: the run completes
// with the compaction in Result.Compactions. A gate that does not let it
// run (too short a conversation, child agents running) also completes the
// run, with nothing compacted and the gate's error as Err and, in words,
// Reason; a failed summary is a model error; a spent time budget is the
// budget's outcome.
func (l *Loop) Compact(ctx context.Context, instructions string) Result {
	if l.cfg.MaxDuration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, l.cfg.MaxDuration, ErrDeadline)
		defer cancel()
	}
	if l.cfg.Compactor == nil {
		err := errors.New("this session has no compactor")
		return l.end(ctx, Result{Outcome: transcript.OutcomeFailed, Reason: err.Error(), Err: err})
	}
	res, err := l.cfg.Compactor.Manual(ctx, l.messages, instructions)
	if err == nil {
		err = l.applyCompaction(res)
	}
	l.toolUsage(res.Usage)
	switch {
	case err == nil:
		p := res.Provenance
		return l.end(ctx, Result{Outcome: transcript.OutcomeCompleted, Reason: fmt.Sprintf(
			"compacted %d messages: %d estimated tokens before, %d after", p.Messages, p.TokensBefore, p.TokensAfter)})
	case ctx.Err() != nil:
		return l.end(ctx, stopped(ctx))
	case errors.Is(err, compaction.ErrBudget):
		return l.end(ctx, Result{
			Outcome: transcript.OutcomeDeadlineExceeded, Reason: "nothing compacted: " + err.Error(), Err: err,
		})
	case errors.Is(err, compaction.ErrNoCut), errors.Is(err, compaction.ErrChildrenActive):
		return l.end(ctx, Result{Outcome: transcript.OutcomeCompleted, Reason: "nothing compacted: " + err.Error(), Err: err})
	}
	l.compactionFailed(ctx, err)
	return l.end(ctx, Result{Outcome: transcript.OutcomeModelError, Reason: "compaction failed: " + err.Error(), Err: err})
}

// compactionFailed reports a compaction that did not happen.
func (l *Loop) compactionFailed(ctx context.Context, err error) {
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, compaction.ErrChildrenActive),
		errors.Is(err, compaction.ErrBudget),
		errors.Is(err, compaction.ErrNoCut):
		l.cfg.Logger.Info("compaction skipped", "turn", l.turns, "reason", err.Error())
	default:
		l.cfg.Logger.Warn("compaction failed: the conversation is kept as it is", "turn", l.turns, "err", err)
		l.emit(events.Event{Type: events.Warning, Turn: l.turns, Reason: "compaction: " + err.Error()})
	}
}

// requestRecovering sends the request, and when the model refuses it as
// larger than its context window, compacts the conversation and sends it
// once more. A second refusal, or a compaction that cannot be made, is the
// request's error, saying so.
func (l *Loop) requestRecovering(ctx context.Context) (provider.Response, error) {
	resp, err := l.request(ctx)
	if err == nil || l.cfg.Compactor == nil || ctx.Err() != nil || !errors.Is(err, provider.ErrContextOverflow) {
		return resp, err
	}
	res, cerr := l.cfg.Compactor.Overflow(ctx, l.messages)
	if cerr == nil {
		cerr = l.applyCompaction(res)
	}
	l.toolUsage(res.Usage)
	if cerr != nil {
		l.compactionFailed(ctx, cerr)
		return provider.Response{}, fmt.Errorf("%w; compacting the conversation to fit failed: %v", err, cerr)
	}
	resp, err = l.request(ctx)
	if errors.Is(err, provider.ErrContextOverflow) {
		return provider.Response{}, fmt.Errorf(
			"the request still exceeds the model's context window after the conversation was compacted: %w", err)
	}
	return resp, err
}

// applyCompaction journals a compaction's checkpoint, replaces the
// conversation with the compacted one and reports it (a compaction event).
// The checkpoint's FirstKept is the first entry of the first message kept,
// or, when nothing is kept, the checkpoint itself; a journaled
// conversation whose kept message's entry is unknown (a history without
// HistorySeqs) cannot be compacted.
func (l *Loop) applyCompaction(res compaction.Result) error {
	cut := res.Cut.Index
	if cut < 1 || cut > len(l.messages) || len(res.Messages) != 1+len(l.messages)-cut {
		return fmt.Errorf("compaction: a result that does not fit the conversation (cut %d of %d messages, %d after)",
			cut, len(l.messages), len(res.Messages))
	}
	var first int64
	if l.cfg.Journal != nil {
		if cut < len(l.messages) {
			first = l.seqs[cut]
		} else if l.appended > 0 {
			first = l.appended + 1 // the checkpoint's own: the journal numbers entries in order
		}
		if first == 0 {
			return errors.New("compaction: the journal entries of the kept messages are not known")
		}
	}
	seq := l.append(transcript.Compaction{
		Replacement: []transcript.Block{{Type: transcript.BlockText, Text: res.Replacement}},
		FirstKept:   first,
		Provenance:  res.Provenance,
	})
	l.seqs = append([]int64{seq}, l.seqs[cut:]...)
	l.messages = res.Messages
	prov := res.Provenance
	l.compactions = append(l.compactions, prov)
	l.emit(events.Event{Type: events.Compaction, Seq: seq, Turn: l.turns, Compaction: &prov})
	return nil
}
