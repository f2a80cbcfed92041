package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/atif"
	"github.com/aerie-run/aerie/runner/atomicfile"
	"github.com/aerie-run/aerie/runner/export"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// exportFlags are aerie session export's options.
type exportFlags struct {
	format, output string
	// db and namespace reach a cluster session: its store and its tenant.
	db, namespace string
	// originals inlines the originals of shortened results (Markdown).
	originals bool
	// tree adds the subagent sessions' lines to a jsonl export.
	tree bool
}

// exportStore is what export needs of runner/store.
type exportStore interface {
	Resolve(ctx context.Context, tenant, ref string) (store.Session, error)
	Entries(ctx context.Context, tenant string, session uuid.UUID) ([]transcript.Entry, error)
	ToolOutput(ctx context.Context, tenant string, session uuid.UUID, callID string) ([]byte, error)
	List(ctx context.Context, tenant string, opts store.ListOptions) ([]store.Session, error)
}

func newSessionExportCmd(a *app) *cobra.Command {
	f := exportFlags{format: string(export.Markdown)}
	cmd := &cobra.Command{
		Use:   "export SESSION [--format atif|jsonl|markdown] [-o FILE]",
		Short: "Write a session's whole transcript as ATIF, JSON Lines or Markdown",
		Long: `Export renders SESSION from its stored entries: the whole history in order,
entries a compaction replaced in the model's context included (marked
compacted), so it works for any session the store holds, one that ran in a
cluster's pod too.

Formats:
  markdown  a transcript for a person: the user's and the model's messages,
            each tool call with its arguments and its result, compaction
            checkpoints with their summaries, and the usage at the end.
  jsonl     one JSON object per entry, in order:
            {"session": ID, "seq": N, "kind": KIND, "created_at": TIME,
             "compacted_by": SEQ or null, "payload": {...}}
            where payload is the entry as stored; the shape is stable.
  atif      an ATIF v1.7 trajectory, as aerie run --atif-output writes it,
            except that the store keeps neither the system prompt nor the
            tools a run offered: the first step says the prompt is not
            recorded and no tool definitions are listed.

A tool result the model saw shortened (capped, or compressed with
compress_context) is marked in the Markdown transcript with the aerie session
output command that prints its byte-exact original; --originals shows each
original in full under its result instead.

Subagents: the sessions of kind subagent under SESSION (its children, theirs,
and so on; aerie session tree shows them) come with it. atif embeds each as
an ATIF v1.7 subagent trajectory (subagent_trajectories, trajectory_id = the
child's session id), which the spawning call's observation result refers to
(subagent_trajectory_ref); markdown nests each child's transcript as a
quoted section under its subagent outcome, right after the call that spawned
it (a child with no outcome yet comes at the end). jsonl is SESSION's lines
only, unless --tree: then each child's lines follow its parent's, depth
first, each line naming its session.

-o FILE replaces FILE atomically (a reader never sees a part of it); without
-o, or with -o -, the export goes to standard output.

A session that ran in a cluster is stored under its namespace, in the
cluster's session database: pass --namespace and --db (or set
$AERIE_DATABASE_URL). aerie logs NAME --transcript does this for an
AgentSession.`,
		Example: `  aerie session export main -o main.md
  aerie session export 3f2a --format atif -o trajectory.json
  AERIE_DATABASE_URL=postgres://... aerie session export 3f2a0c1e-... --namespace agents`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.exportSession(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", f.format, "the `format`: atif, jsonl or markdown")
	fl.StringVarP(&f.output, "output", "o", "",
		"write to `FILE`, replacing it atomically (default, or -: standard output)")
	fl.StringVar(&f.db, "db", "",
		"the session database `URL` (default: $"+runconfig.DatabaseURLEnv+", then database_url of the global config)")
	fl.BoolVar(&f.tree, "tree", false,
		"jsonl: add the lines of the subagent sessions under SESSION (atif and markdown always include them)")
	fl.StringVar(&f.namespace, "namespace", "",
		"export a cluster session: the `namespace` its entries are stored under (default: this directory's sessions)")
	fl.BoolVar(&f.originals, "originals", false,
		"markdown: show the original of each shortened tool result under it")
	return cmd
}

// exportSession is aerie session export: the flags are checked before the
// store is opened, and the output is written only once the whole export is
// rendered, so a failure leaves no part of it in FILE.
func (a *app) exportSession(cmd *cobra.Command, ref string, f exportFlags) error {
	format, err := export.ParseFormat(f.format)
	if err != nil {
		return fmt.Errorf("export: --format: %w", err)
	}
	if f.tree && format != export.JSONL {
		return fmt.Errorf("export: --tree is for --format jsonl: %s always includes the subagent sessions", format)
	}
	if err := checkOutput(f.output); err != nil {
		return err
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
	var out bytes.Buffer
	if f.originals && format != export.Markdown {
		return fmt.Errorf("export: --originals is for --format markdown (aerie session output prints one original)")
	}
	if err := a.renderSession(ctx, &out, st, tenant, ref, format, f); err != nil {
		return err
	}
	if f.output == "" || f.output == "-" {
		_, err := cmd.OutOrStdout().Write(out.Bytes())
		return err
	}
	if err := atomicfile.Write(f.output, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("export: -o %s: %w (choose a file in a writable directory, or - for standard output)",
			f.output, err)
	}
	return nil
}

// renderSession writes the export of the session ref names in tenant,
// with its subagent sessions unless it is jsonl without --tree.
func (a *app) renderSession(
	ctx context.Context, w io.Writer, st exportStore, tenant, ref string, format export.Format, f exportFlags,
) error {
	sess, err := resolveExported(ctx, st, tenant, ref)
	if err != nil {
		return err
	}
	decorate := func(s store.Session, entries []transcript.Entry, in *export.Input) {
		in.OriginalCommand = outputCommand(s.ID, f.namespace)
		if f.originals {
			o := originals{st: st, tenant: tenant, session: s.ID, entries: entries,
				sidecars: a.sidecarDirs(outputFlags{namespace: f.namespace})}
			in.Original = func(callID string) ([]byte, error) { return o.original(ctx, callID) }
		}
	}
	return export.WriteStored(ctx, w, st, tenant, sess, format, f.tree,
		atif.AgentInfo{Version: a.version}, // named aerie by default
		decorate)
}

// resolveExported finds the session ref names in tenant. Its errors are
// resolve's, with the way to a cluster session.
func resolveExported(ctx context.Context, st exportStore, tenant, ref string) (store.Session, error) {
	sess, err := st.Resolve(ctx, tenant, ref)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Session{}, fmt.Errorf("no session %q in %s (aerie session list shows this directory's sessions; "+
			"a cluster session takes --namespace and --db): %w", ref, tenant, store.ErrNotFound)
	case err != nil:
		return store.Session{}, err // an *AmbiguousError lists the candidates
	}
	return sess, nil
}

// exportDatabase is the URL of the session database to export from: --db,
// then $AERIE_DATABASE_URL (the runner's), then the global configuration's.
// A SQLite file that does not exist holds no session: it is an error, not a
// new empty database.
func (a *app) exportDatabase(cmd *cobra.Command, dir, flag string) (string, error) {
	url, from := flag, "--db"
	if url == "" {
		url, from = a.getenv(runconfig.DatabaseURLEnv), "$"+runconfig.DatabaseURLEnv
	}
	if url == "" {
		loaded, err := a.loadConfig(cmd, dir, "")
		if err != nil {
			return "", err
		}
		url, from = loaded.Config.DatabaseURL, "the configuration's database_url"
	}
	u, err := store.ParseURL(url)
	if err != nil {
		return "", fmt.Errorf("export: %s: %w", from, err)
	}
	if u.Database == store.SQLite {
		if _, err := os.Stat(u.Path); errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("export: no session database at %s (%s): give the database that holds the session with --db",
				u.Path, from)
		}
	}
	return url, nil
}

// openExported opens the session database that exportDatabase names.
func (a *app) openExported(cmd *cobra.Command, dir, flag string) (store.Store, error) {
	url, err := a.exportDatabase(cmd, dir, flag)
	if err != nil {
		return nil, err
	}
	return openStore(cmd.Context(), url)
}

// checkOutput refuses an -o whose directory does not exist before anything
// is read.
func checkOutput(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("export: -o %s: not a regular file (choose a file path, or - for standard output)", path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return fmt.Errorf("export: -o %s: its directory %s does not exist (create it first, or choose another path)",
			path, filepath.Dir(path))
	}
	return nil
}
