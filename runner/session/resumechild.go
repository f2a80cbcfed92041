package session

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// A session's children are resumed with it. A spawn_agent call is durable
// before it runs and its child's session id is subagent.ChildID of the
// parent and the call, so a parent resumed with the call pending (no
// result) finds the child: one whose journal ends with its outcome gets
// that outcome delivered and does not run again; one that had not
// finished is resumed from its own journal, its own pending calls treated
// the same way (its children resumed, its other calls answered as
// interrupted); one never created runs fresh. The parent journals the
// outcome as the call's result, once.

// storedTree returns the stored descendants of the session root — its
// children, theirs, and so on — and their usage added up, for the tree
// of a resumed run to count from.
func storedTree(ctx context.Context, st Store, tenant string, root uuid.UUID) ([]uuid.UUID, transcript.Usage, error) {
	all, err := st.List(ctx, tenant, store.ListOptions{})
	if err != nil {
		return nil, transcript.Usage{}, fmt.Errorf("list the session's subagents: %w", err)
	}
	kids := map[uuid.UUID][]uuid.UUID{}
	for _, s := range all {
		if s.Kind == store.SessionSubagent && s.ID != s.ParentID {
			kids[s.ParentID] = append(kids[s.ParentID], s.ID)
		}
	}
	var (
		ids   []uuid.UUID
		usage transcript.Usage
	)
	for next := kids[root]; len(next) > 0; {
		id := next[0]
		next = append(next[1:], kids[id]...)
		_, snap, err := st.Load(ctx, tenant, id)
		if err != nil {
			return nil, transcript.Usage{}, fmt.Errorf("load subagent %s: %w", id, err)
		}
		ids = append(ids, id)
		if u := snap.Usage; u != nil {
			usage = addUsage(usage, *u)
		}
	}
	return ids, usage, nil
}

func addUsage(a, b transcript.Usage) transcript.Usage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadTokens += b.CacheReadTokens
	a.CacheWriteTokens += b.CacheWriteTokens
	a.ReasoningTokens += b.ReasoningTokens
	a.Requests += b.Requests
	a.CostUSD += b.CostUSD
	return a
}

// pendingSpawns returns the spawn_agent calls of snap's last assistant
// message that were journaled (so may have started) and got no result.
func pendingSpawns(snap transcript.Snapshot) []transcript.ToolCall {
	var calls []transcript.ToolCall
	for _, c := range agent.Started(snap) {
		if c.Name == subagent.Name {
			calls = append(calls, c)
		}
	}
	return calls
}

// answerPending journals the answers to the calls snap's last run left
// open and returns snap's entries with them: each pending spawn_agent call
// is run again through spawn, which resumes or delivers its child (see
// spawner.Spawn), at once as they first ran; every other open call is
// answered by answerUnanswered. spawn nil (no subagents allowed) leaves
// every call to answerUnanswered. A child suspended again (see
// subagent.Suspended) leaves its call pending, unanswered: await is the
// request of the first that paused for approval, which the run pauses on.
// A child's outcome goes through engine's PostToolUse hooks, as the call's
// would have had the run not stopped; its PreToolUse hooks ran before it
// was journaled, and do not run again.
func answerPending(
	ctx context.Context, w *journal.Writer, session uuid.UUID, snap transcript.Snapshot, spawn tools.Tool,
	engine *hooks.Engine, log *slog.Logger,
) (_ []transcript.Entry, await *transcript.ApprovalRequest) {
	calls := pendingSpawns(snap)
	if spawn == nil || len(calls) == 0 {
		return answerUnanswered(w, session, snap, log, nil), nil
	}
	results := make([]tools.Result, len(calls))
	starts := make([]time.Time, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		log.Info("resuming the subagent of a pending spawn_agent call", "session", session.String(), "call", c.CallID)
		wg.Go(func() {
			starts[i] = time.Now()
			cctx := tools.WithCallID(ctx, c.CallID)
			res := spawn.Run(cctx, c.Input)
			if !res.Suspended {
				res = engine.AfterTool(cctx, subagent.Name, c.Input, res, "")
			}
			results[i] = res
		})
	}
	wg.Wait()
	es := slices.Clip(snap.Entries)
	add := func(p transcript.Payload) {
		es = append(es, transcript.Entry{Seq: w.Append(p), Payload: p, CreatedAt: time.Now()})
	}
	open := map[string]bool{}
	for i, c := range calls {
		res := results[i]
		if res.Suspended {
			open[c.CallID] = true
			if a := res.Await; a != nil && a.Request != nil && await == nil {
				await = a.Request
			}
			continue
		}
		for _, e := range res.Entries {
			add(e)
		}
		add(transcript.ToolResult{
			CallID: c.CallID, IsError: res.IsError,
			Content: []transcript.Block{{Type: transcript.BlockText, Text: res.Content}},
		})
		comp := transcript.ToolCompletion{CallID: c.CallID, Status: transcript.ToolOK, Duration: time.Since(starts[i])}
		if res.IsError {
			comp.Status, comp.Error = transcript.ToolError, agent.CompletionError(res.Content)
		}
		add(comp)
	}
	snap.Entries = es
	return answerUnanswered(w, session, snap, log, open), await
}

// finished reports whether a stored child ended, and how: its state is
// final, or its journal ends with the completion checkpoint of its loop
// (a crash before the state was recorded).
func finished(sess store.Session, snap transcript.Snapshot) (agent.Result, bool) {
	ended := sess.State == store.StateCompleted || sess.State == store.StateFailed || sess.State == store.StateCancelled
	if n := len(snap.Entries); n > 0 {
		if _, ok := snap.Entries[n-1].Payload.(transcript.Checkpoint); ok {
			ended = true
		}
	}
	if !ended || snap.Checkpoint == nil || resumable(snap.Checkpoint.Outcome) {
		return agent.Result{}, false
	}
	res := agent.Result{Outcome: snap.Checkpoint.Outcome, Answer: snap.Checkpoint.Result, Turns: int(snap.Checkpoint.Turn)}
	if snap.Usage != nil {
		res.Usage = *snap.Usage
	}
	return res, true
}

// resumable reports whether a child that ended with outcome goes on when
// its parent resumes: it paused for approval, or it was stopped with its
// run (see subagent.Suspended), and its parent's call is still pending.
func resumable(outcome transcript.Outcome) bool {
	return outcome == transcript.OutcomeAwaitingApproval || outcome == transcript.OutcomeCancelled
}

// answeredAlready is the result of a child whose conversation ends with
// the model's answer, without the checkpoint its loop writes next (a crash
// between the two): its answer stands, and no model is asked again.
func answeredAlready(history []provider.Message, snap transcript.Snapshot) (agent.Result, bool) {
	n := len(history)
	if n == 0 || history[n-1].Role != provider.RoleAssistant || len(history[n-1].ToolCalls()) > 0 {
		return agent.Result{}, false
	}
	res := agent.Result{Outcome: transcript.OutcomeCompleted, Answer: history[n-1].Text()}
	if snap.Usage != nil {
		res.Usage = *snap.Usage
	}
	return res, true
}
