package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// approveStore is what aerie approve needs of runner/store.
type approveStore interface {
	Resolve(ctx context.Context, tenant, ref string) (store.Session, error)
	Load(ctx context.Context, tenant string, session uuid.UUID) (store.Session, transcript.Snapshot, error)
	Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error
}

type approveFlags struct {
	deny      bool
	reason    string
	db        string
	namespace string
}

// approvedBy is who an aerie approve decision records.
const approvedBy = "aerie approve"

func newApproveCmd(a *app) *cobra.Command {
	var f approveFlags
	cmd := &cobra.Command{
		Use:   "approve SESSION [CALL]",
		Short: "Approve (or --deny) the tool call a session paused on, for aerie run --resume to go on",
		Long: `A run with --hook-approval ask pauses when a hook asks a person to approve a
tool call: the call is journaled as pending, the run prints what is asked and
exits 5 (awaiting_approval). approve records the decision in the session;
aerie run --resume SESSION then runs the approved call (once) or gives the
model an error result with the reason of a denial, and goes on.

CALL is the pending call's id, as the run printed it; without it, the call the
session paused on. A call of a subagent pauses the whole tree: SESSION is the
session the run resumes, and the decision goes to the subagent's session. A
session with nothing pending is an error. Deciding again before the resume
replaces the decision.

Exit status: 0 the decision is recorded; 1 otherwise (an unknown session,
nothing pending, another call named).`,
		Example: `  aerie approve 3f2a
  aerie approve 3f2a toolu_01 --deny --reason "not on main"`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			call := ""
			if len(args) == 2 {
				call = args[1]
			}
			return a.approve(cmd, args[0], call, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.deny, "deny", false, "deny the call: the model gets an error result with the reason")
	fl.StringVar(&f.reason, "reason", "", "the `text` of the decision, which the model reads for a denial")
	fl.StringVar(&f.db, "db", "",
		"the session database `URL` (default: $"+runconfig.DatabaseURLEnv+", then database_url of the global config)")
	fl.StringVar(&f.namespace, "namespace", "",
		"decide for a cluster session: the `namespace` its entries are stored under (default: this directory's sessions)")
	return cmd
}

func (a *app) approve(cmd *cobra.Command, ref, call string, f approveFlags) error {
	ctx := cmd.Context()
	dir, err := a.workDir()
	if err != nil {
		return fmt.Errorf("find the current directory: %w", err)
	}
	tenant := f.namespace
	if tenant == "" {
		tenant = dir
	}
	url, err := a.exportDatabase(cmd, dir, f.db)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, url)
	if err != nil {
		return err
	}
	defer closeStore(cmd, st)
	d := transcript.ApprovalDecision{CallID: call, Allowed: !f.deny, Reason: f.reason, By: approvedBy}
	root, sess, p, err := recordDecision(ctx, st, tenant, ref, d)
	if err != nil {
		return err
	}
	verb := "approved"
	if f.deny {
		verb = "denied"
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s call %s (%s %s) of session %s; continue it with: aerie run --resume %s\n",
		verb, p.Call.CallID, p.Request.Tool, p.Request.Preview, sess.ID, root.ID)
	return err
}

// errNothingPending: the session has no tool call awaiting approval.
var errNothingPending = errors.New("no tool call awaits approval")

// recordDecision journals d for the call the session ref names paused
// on, or the subagent of its tree that paused (see pendingApproval); d.CallID
// empty means that call, else it must name it. It returns the session ref
// names and the one whose call it is.
func recordDecision(
	ctx context.Context, st approveStore, tenant, ref string, d transcript.ApprovalDecision,
) (root, sess store.Session, _ agent.Pending, _ error) {
	root, err := st.Resolve(ctx, tenant, ref)
	if err != nil {
		return store.Session{}, store.Session{}, agent.Pending{}, fmt.Errorf("approve %q: %w", ref, err)
	}
	if root.State == store.StateActive {
		return store.Session{}, store.Session{}, agent.Pending{}, fmt.Errorf(
			"approve: session %s is active: a run is using it; decide once it has paused", root.ID)
	}
	_, snap, err := st.Load(ctx, tenant, root.ID)
	if err != nil {
		return store.Session{}, store.Session{}, agent.Pending{}, fmt.Errorf("approve: load session %s: %w", root.ID, err)
	}
	sess, snap, p, ok, err := pendingApproval(ctx, st, tenant, root, snap)
	switch {
	case err != nil:
		return store.Session{}, store.Session{}, agent.Pending{}, fmt.Errorf("approve: session %s: %w", root.ID, err)
	case !ok:
		return store.Session{}, store.Session{}, agent.Pending{}, fmt.Errorf(
			"approve: session %s: %w (only a run with --hook-approval ask that exited 5 leaves one)", root.ID, errNothingPending)
	case d.CallID != "" && d.CallID != p.Call.CallID:
		return store.Session{}, store.Session{}, agent.Pending{}, fmt.Errorf(
			"approve: session %s: call %s does not await approval; the pending call is %s (%s)",
			root.ID, d.CallID, p.Call.CallID, p.Request.Tool)
	}
	d.CallID = p.Call.CallID
	e := transcript.Entry{Seq: snap.LastSeq + 1, Payload: d, CreatedAt: time.Now()}
	if err := st.Append(ctx, tenant, sess.ID, []transcript.Entry{e}); err != nil {
		return store.Session{}, store.Session{}, agent.Pending{}, fmt.Errorf(
			"approve: record the decision in session %s: %w", sess.ID, err)
	}
	return root, sess, p, nil
}

// pendingApproval finds the call the tree of session sess, whose entries
// snap holds, paused on: its own, or, below a spawn_agent call it left
// pending, its subagent's (and so on down), which the whole tree waits on.
func pendingApproval(
	ctx context.Context, st approveStore, tenant string, sess store.Session, snap transcript.Snapshot,
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
		if s, sn, p, ok, err := pendingApproval(ctx, st, tenant, child, csnap); err != nil || ok {
			return s, sn, p, ok, err
		}
	}
	return store.Session{}, transcript.Snapshot{}, agent.Pending{}, false, nil
}
