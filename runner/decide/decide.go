// Package decide records a person's decision on the tool call a paused
// session awaits: it finds the pending call (the session's own, or that of
// the subagent its whole tree waits on) and journals an ApprovalDecision in
// the session whose call it is. aerie approve and the web console both
// decide through it.
package decide

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Store is what deciding needs of runner/store.
type Store interface {
	Resolve(ctx context.Context, tenant, ref string) (store.Session, error)
	Load(ctx context.Context, tenant string, session uuid.UUID) (store.Session, transcript.Snapshot, error)
	Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error
}

// ErrNothingPending: the session has no tool call awaiting approval.
var ErrNothingPending = errors.New("no tool call awaits approval")

// Decided is what Record decided on: the session ref named, the one whose
// call it was (the root or one of its subagents), and the call.
type Decided struct {
	Root, Session store.Session
	Pending       agent.Pending
}

// Record journals d for the call the session ref names paused on, or the
// subagent of its tree that paused (see Find); d.CallID empty means that
// call, else it must name it. A session that is active (a run is using it)
// is refused.
func Record(ctx context.Context, st Store, tenant, ref string, d transcript.ApprovalDecision) (Decided, error) {
	root, err := st.Resolve(ctx, tenant, ref)
	if err != nil {
		return Decided{}, fmt.Errorf("approve %q: %w", ref, err)
	}
	if root.State == store.StateActive {
		return Decided{}, fmt.Errorf(
			"approve: session %s is active: a run is using it; decide once it has paused", root.ID)
	}
	sess, snap, p, ok, err := Find(ctx, st, tenant, root)
	switch {
	case err != nil:
		return Decided{}, fmt.Errorf("approve: session %s: %w", root.ID, err)
	case !ok:
		return Decided{}, fmt.Errorf(
			"approve: session %s: %w (only a run with --hook-approval ask that exited 5 leaves one)", root.ID, ErrNothingPending)
	case d.CallID != "" && d.CallID != p.Call.CallID:
		return Decided{}, fmt.Errorf(
			"approve: session %s: call %s does not await approval; the pending call is %s (%s)",
			root.ID, d.CallID, p.Call.CallID, p.Request.Tool)
	}
	d.CallID = p.Call.CallID
	e := transcript.Entry{Seq: snap.LastSeq + 1, Payload: d, CreatedAt: time.Now()}
	if err := st.Append(ctx, tenant, sess.ID, []transcript.Entry{e}); err != nil {
		return Decided{}, fmt.Errorf("approve: record the decision in session %s: %w", sess.ID, err)
	}
	return Decided{Root: root, Session: sess, Pending: p}, nil
}

// Find finds the call the tree of session sess paused on: its own, or,
// below a spawn_agent call it left pending, its subagent's (and so on
// down), which the whole tree waits on. It returns the session whose call
// it is, with its snapshot.
func Find(
	ctx context.Context, st Store, tenant string, sess store.Session,
) (store.Session, transcript.Snapshot, agent.Pending, bool, error) {
	_, snap, err := st.Load(ctx, tenant, sess.ID)
	if err != nil {
		return store.Session{}, transcript.Snapshot{}, agent.Pending{}, false, fmt.Errorf("load session %s: %w", sess.ID, err)
	}
	return find(ctx, st, tenant, sess, snap)
}

func find(
	ctx context.Context, st Store, tenant string, sess store.Session, snap transcript.Snapshot,
) (store.Session, transcript.Snapshot, agent.Pending, bool, error) {
	if p, ok := agent.PendingApproval(snap); ok {
		return sess, snap, p, true, nil
	}
	for _, c := range agent.Started(snap) {
		if c.Name != subagent.Name {
			continue
		}
		id := subagent.ChildID(sess.ID, c.CallID)
		child, csnap, err := st.Load(ctx, tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			continue // never created: nothing to decide in it
		}
		if err != nil {
			return store.Session{}, transcript.Snapshot{}, agent.Pending{}, false, fmt.Errorf("load subagent %s: %w", id, err)
		}
		if s, sn, p, ok, err := find(ctx, st, tenant, child, csnap); err != nil || ok {
			return s, sn, p, ok, err
		}
	}
	return store.Session{}, transcript.Snapshot{}, agent.Pending{}, false, nil
}
