package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// diffFlags are aerie session diff's options.
type diffFlags struct {
	stat, json bool
	// db and namespace reach a cluster session: its store and its tenant.
	db, namespace string
}

// errNoDiff: the session holds no workspace diff.
var errNoDiff = errors.New("no workspace diff")

func newSessionDiffCmd(a *app) *cobra.Command {
	var f diffFlags
	cmd := &cobra.Command{
		Use:   "diff SESSION [--stat] [--json]",
		Short: "Print what a session changed in its git workspace, from the store",
		Long: `Diff prints the workspace diff of SESSION's last run, as the run journaled it
when it ended: the patch of the git work tree (untracked files included,
ignored ones not) against the commit the run started from, commits the run
made included. It is read from the session store, so it works after the
workspace is gone, for a session that ran in a cluster's pod too.

The patch is what git diff --binary prints (git apply takes it). A patch
larger than the cap (1 MiB) is stored cut at the cap: diff prints what was
kept and says on standard error how large the whole patch was. --stat prints
git diff --stat instead; --json the whole record:
  {"session": ID, "seq": N, "base": COMMIT, "stat": TEXT, "patch": TEXT,
   "bytes": SIZE, "cap": CAP, "truncated": BOOL, "error": TEXT}

A session whose workspace was no git work tree has no diff: that is an error.

A session that ran in a cluster is stored under its namespace, in the
cluster's session database: pass --namespace and --db (or set
$AERIE_DATABASE_URL). kubectl aerie get NAME --diff does this for an
AgentSession.`,
		Example: `  aerie session diff main --stat
  aerie session diff 3f2a | git apply`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sessionDiff(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.stat, "stat", false, "print the diff's stat (git diff --stat) instead of the patch")
	fl.BoolVar(&f.json, "json", false, "print the whole record as JSON")
	fl.StringVar(&f.db, "db", "",
		"the session database `URL` (default: $"+runconfig.DatabaseURLEnv+", then database_url of the global config)")
	fl.StringVar(&f.namespace, "namespace", "",
		"a cluster session: the `namespace` its entries are stored under (default: this directory's sessions)")
	return cmd
}

// diffJSON is aerie session diff --json's record.
type diffJSON struct {
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
	transcript.WorkspaceDiff
}

// sessionDiff is aerie session diff.
func (a *app) sessionDiff(cmd *cobra.Command, ref string, f diffFlags) error {
	if f.stat && f.json {
		return errors.New("diff: --stat and --json are exclusive: the JSON record holds the stat")
	}
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
	sess, e, err := lastDiff(ctx, st, tenant, ref)
	if err != nil {
		return err
	}
	d := e.Payload.(transcript.WorkspaceDiff)
	if f.json {
		return cli.WriteJSON(cmd.OutOrStdout(), diffJSON{Session: sess.ID.String(), Seq: e.Seq, WorkspaceDiff: d})
	}
	return printDiff(cmd.OutOrStdout(), cmd.ErrOrStderr(), d, f.stat)
}

// lastDiff finds the last workspace diff of the session ref names.
func lastDiff(ctx context.Context, st exportStore, tenant, ref string) (store.Session, transcript.Entry, error) {
	sess, err := resolveExported(ctx, st, tenant, ref)
	if err != nil {
		return store.Session{}, transcript.Entry{}, err
	}
	entries, err := st.Entries(ctx, tenant, sess.ID)
	if err != nil {
		return store.Session{}, transcript.Entry{}, fmt.Errorf("read %s: %w", describeSession(sess), err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if _, ok := entries[i].Payload.(transcript.WorkspaceDiff); ok {
			return sess, entries[i], nil
		}
	}
	return store.Session{}, transcript.Entry{}, fmt.Errorf("%s has %w: its workspace was no git work tree, "+
		"or no run of it has ended yet", describeSession(sess), errNoDiff)
}

// printDiff writes the patch (or the stat) to out, and to errs what a
// person should know of it: a patch cut at the cap, a diff git could not
// take whole, no change at all.
func printDiff(out, errs io.Writer, d transcript.WorkspaceDiff, stat bool) error {
	text := d.Patch
	if stat {
		text = d.Stat
	}
	if _, err := io.WriteString(out, text); err != nil {
		return err
	}
	switch {
	case d.Error != "":
		_, _ = fmt.Fprintf(errs, "aerie: the diff is incomplete: %s\n", d.Error) // a note; the patch is out
	case d.Bytes == 0 && d.Stat == "":
		_, _ = fmt.Fprintf(errs, "aerie: no changes against %s\n", d.Base)
	}
	if d.Truncated && !stat {
		_, _ = fmt.Fprintf(errs, "aerie: the patch is cut at %d bytes, the cap, of %d: the stat (--stat) lists every file\n",
			len(d.Patch), d.Bytes)
	}
	return nil
}
