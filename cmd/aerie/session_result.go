package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/transcript"
)

// resultFlags are aerie session result's options.
type resultFlags struct {
	// db and namespace reach a cluster session: its store and its tenant.
	db, namespace string
	// seq selects the result entry; 0 is the session's last.
	seq int64
}

func newSessionResultCmd(a *app) *cobra.Command {
	var f resultFlags
	cmd := &cobra.Command{
		Use:   "result SESSION [--seq N]",
		Short: "Print the structured result a session was asked for (JSON)",
		Long: `Result prints the structured result SESSION got for its result schema
(aerie run --output-schema, an AgentSession's spec.result): the value the
model submitted and the schema accepted, as JSON on one line. --seq picks
the result entry with that sequence number (an AgentSession's
status.result.structuredRef.seq); the default is the session's last result.

A session that ran in a cluster is stored under its namespace, in the
cluster's session database: pass --namespace and --db (or set
$AERIE_DATABASE_URL). aerie get NAME --result does this for an AgentSession.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sessionResult(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.db, "db", "",
		"the session database `URL` (default: $"+runconfig.DatabaseURLEnv+", then database_url of the global config)")
	fl.StringVar(&f.namespace, "namespace", "",
		"a cluster session: the `namespace` its entries are stored under (default: this directory's sessions)")
	fl.Int64Var(&f.seq, "seq", 0, "the result entry's sequence `number` (default: the last result)")
	return cmd
}

// sessionResult is aerie session result.
func (a *app) sessionResult(cmd *cobra.Command, ref string, f resultFlags) error {
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
	sess, err := resolveExported(ctx, st, tenant, ref)
	if err != nil {
		return err
	}
	entries, err := st.Entries(ctx, tenant, sess.ID)
	if err != nil {
		return fmt.Errorf("read %s: %w", describeSession(sess), err)
	}
	var found *transcript.Result
	for _, e := range entries {
		r, ok := e.Payload.(transcript.Result)
		if ok && (f.seq == 0 || e.Seq == f.seq) {
			found = &r
		}
	}
	switch {
	case found == nil && f.seq != 0:
		return fmt.Errorf("%s has no result entry %d", describeSession(sess), f.seq)
	case found == nil:
		return fmt.Errorf("%s has no structured result: it was not asked for one, or ended without a valid one",
			describeSession(sess))
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", found.Value)
	return err
}
