package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/decide"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/transcript"
)

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
	st, err := a.openExported(cmd, dir, f.db)
	if err != nil {
		return err
	}
	defer closeStore(cmd, st)
	d := transcript.ApprovalDecision{CallID: call, Allowed: !f.deny, Reason: f.reason, By: approvedBy}
	got, err := decide.Record(ctx, st, tenant, ref, d)
	if err != nil {
		return err
	}
	p := got.Pending
	verb := "approved"
	if f.deny {
		verb = "denied"
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s call %s (%s %s) of session %s; continue it with: aerie run --resume %s\n",
		verb, p.Call.CallID, p.Request.Tool, p.Request.Preview, got.Session.ID, got.Root.ID)
	return err
}
