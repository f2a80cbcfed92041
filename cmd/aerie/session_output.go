package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/atomicfile"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/export"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// outputFlags are aerie session output's options.
type outputFlags struct {
	output, db, namespace, rawDir string
}

func newSessionOutputCmd(a *app) *cobra.Command {
	var f outputFlags
	cmd := &cobra.Command{
		Use:   "output SESSION CALL_ID [-o FILE]",
		Short: "Print the byte-exact original of a tool result the model saw shortened",
		Long: `Output prints the full output of the tool call CALL_ID of SESSION, as the tool
produced it, when the model saw it shortened: capped (head and tail kept) or
compressed (a view of its structure). A shortened result names its call in
retrieve(handle=CALL_ID), and aerie session export marks it.

The original is read from the session store (where a runner pod keeps it,
so it outlives the pod), then, for a session of this directory, from the
sidecar file its result names or from $AERIE_HOME/raw (--raw-dir DIR when
the run wrote them elsewhere, with --tool-result-raw-dir). Sidecar files are
swept after seven days.

-o FILE replaces FILE atomically; without it, or with -o -, the bytes go to
standard output. A cluster session takes --namespace and --db (or
$AERIE_DATABASE_URL), as export does.`,
		Example: `  aerie session output main toolu_01AbC
  aerie session output 3f2a0c1e-... call_7 --namespace agents -o build.log`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sessionOutput(cmd, args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "",
		"write to `FILE`, replacing it atomically (default, or -: standard output)")
	fl.StringVar(&f.db, "db", "",
		"the session database `URL` (default: $"+runconfig.DatabaseURLEnv+", then database_url of the global config)")
	fl.StringVar(&f.namespace, "namespace", "",
		"a cluster session: the `namespace` its entries are stored under (default: this directory's sessions)")
	fl.StringVar(&f.rawDir, "raw-dir", "",
		"also look for the sidecar file in `DIR` (the run's --tool-result-raw-dir)")
	return cmd
}

// sessionOutput is aerie session output.
func (a *app) sessionOutput(cmd *cobra.Command, ref, callID string, f outputFlags) error {
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
	sess, err := resolveExported(ctx, st, tenant, ref)
	if err != nil {
		return err
	}
	entries, err := st.Entries(ctx, tenant, sess.ID)
	if err != nil {
		return fmt.Errorf("read %s: %w", describeSession(sess), err)
	}
	o := originals{st: st, tenant: tenant, session: sess.ID, entries: entries, sidecars: a.sidecarDirs(f)}
	data, err := o.original(ctx, callID)
	if err != nil {
		return fmt.Errorf("%s: %w", describeSession(sess), err)
	}
	if f.output == "" || f.output == "-" {
		_, err := cmd.OutOrStdout().Write(data)
		return err
	}
	if err := atomicfile.Write(f.output, data, 0o600); err != nil {
		return fmt.Errorf("output: -o %s: %w (choose a file in a writable directory, or - for standard output)",
			f.output, err)
	}
	return nil
}

// outputCommand returns the command that prints the original of a call
// of the session id (in namespace, for a cluster session).
func outputCommand(id uuid.UUID, namespace string) func(callID string) string {
	return func(callID string) string {
		c := fmt.Sprintf("aerie session output %s %s", id, callID)
		if namespace != "" {
			c += " --namespace " + namespace
		}
		return c
	}
}

// sidecarDirs are the directories a local session's sidecar files may be
// in: --raw-dir, then $AERIE_HOME/raw. A cluster session has none: a
// pod's originals are in the store.
func (a *app) sidecarDirs(f outputFlags) []string {
	if f.namespace != "" {
		return nil
	}
	var dirs []string
	if f.rawDir != "" {
		dirs = append(dirs, f.rawDir)
	}
	if home := config.Home(a.env); home != "" {
		dirs = append(dirs, filepath.Join(home, "raw"))
	}
	return dirs
}

// originals finds the originals of one stored session's shortened results.
type originals struct {
	st       exportStore
	tenant   string
	session  uuid.UUID
	entries  []transcript.Entry
	sidecars []string
}

// sidecarPath finds the file a capped result names as its full output's.
var sidecarPath = regexp.MustCompile(` bytes dropped; full output in (.+?) \.\.\.\]`)

// original returns the original of the call's result: from the store,
// then from a sidecar file. Its errors say whether the call exists, was
// shortened, and where its original was looked for.
func (o originals) original(ctx context.Context, callID string) ([]byte, error) {
	data, err := o.st.ToolOutput(ctx, o.tenant, o.session, callID)
	if err == nil {
		return data, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("read the original of call %s: %w", callID, err)
	}
	result, found := o.result(callID)
	if !found {
		return nil, fmt.Errorf("no tool call %q in this session (aerie session export lists its calls and their ids)", callID)
	}
	looked := []string{"the session store"}
	if m := sidecarPath.FindStringSubmatch(result); m != nil && filepath.IsAbs(m[1]) {
		if b, err := os.ReadFile(m[1]); err == nil {
			return b, nil
		}
		looked = append(looked, m[1])
	}
	for _, d := range o.sidecars {
		s, err := tools.Sidecars{Dir: d, Session: o.session.String()}.Original(ctx, callID)
		if err == nil {
			return []byte(s), nil
		}
		looked = append(looked, d)
	}
	if !export.Shortened(result, callID) {
		return nil, fmt.Errorf("call %s: no original output is kept: the model saw its result whole "+
			"(aerie session export shows it)", callID)
	}
	return nil, fmt.Errorf("call %s: its result was shortened, but its original is in none of %s "+
		"(a sidecar file is swept after seven days; give the run's --tool-result-raw-dir with --raw-dir): %w",
		callID, strings.Join(looked, ", "), tools.ErrNoOriginal)
}

// result returns the text of the call's result, and whether the session
// has the call at all.
func (o originals) result(callID string) (string, bool) {
	found := false
	var text strings.Builder
	for _, e := range o.entries {
		switch p := e.Payload.(type) {
		case transcript.ToolCall:
			found = found || p.CallID == callID
		case transcript.ToolResult:
			if p.CallID != callID {
				continue
			}
			found = true
			for _, b := range p.Content {
				text.WriteString(b.Text)
			}
		}
	}
	return text.String(), found
}
