package session

import (
	"context"
	"slices"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/transcript"
)

// resolveApproval answers the tool call the session paused on, p, when a
// decision for it is known: the journal's last, or the last of
// Options.Approvals (journaled first, unless the journal has it). The
// approved call runs with the decision in its context, so that the hook
// that asked gets it; a denied one gets an error result. It returns the
// snapshot with the answer's entries, or paused when nobody has decided:
// the run then pauses again without a model request.
func (eq *equipment) resolveApproval(
	ctx context.Context, w *journal.Writer, snap transcript.Snapshot, p agent.Pending,
) (_ transcript.Snapshot, paused bool) {
	return resolveApproval(ctx, eq.opts.Approvals, eq.loopTools(), w, snap, p, eq.opts.Observe)
}

// resolveApproval is equipment.resolveApproval for any agent of the tree:
// approvals are the decisions given with the run, t the agent's tools.
func resolveApproval(
	ctx context.Context, approvals []transcript.ApprovalDecision, t agent.Tools, w *journal.Writer,
	snap transcript.Snapshot, p agent.Pending, observe func(events.Event),
) (_ transcript.Snapshot, paused bool) {
	var given *transcript.ApprovalDecision
	for _, d := range approvals {
		if d.CallID == p.Call.CallID {
			given = &d
		}
	}
	if given != nil && (p.Decision == nil || *p.Decision != *given) {
		seq := w.Append(*given)
		snap.Entries = append(slices.Clip(snap.Entries), transcript.Entry{Seq: seq, Payload: *given})
		p.Decision = given
	}
	if p.Decision == nil {
		return snap, true
	}
	d := p.Decision
	ctx = hooks.WithDecision(ctx, hooks.Approval{Allowed: d.Allowed, Reason: d.Reason, Policy: decidedBy(d)})
	done := agent.ResolveApproval(ctx, t, w, p, observe)
	snap.Entries = append(slices.Clip(snap.Entries), done...)
	return snap, false
}

// decidedBy names who decided, as the hook verdict records it.
func decidedBy(d *transcript.ApprovalDecision) string {
	if d.By != "" {
		return d.By
	}
	return "person"
}
