package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// sessionStore is what the session commands need of runner/store.
type sessionStore interface {
	List(ctx context.Context, tenant string, opts store.ListOptions) ([]store.Session, error)
	Resolve(ctx context.Context, tenant, ref string) (store.Session, error)
	Session(ctx context.Context, tenant string, id uuid.UUID) (store.Session, error)
	SetState(ctx context.Context, tenant string, id uuid.UUID, state store.State) error
	Delete(ctx context.Context, tenant string, id uuid.UUID) error
	Fork(ctx context.Context, tenant string, source uuid.UUID, opts store.ForkOptions) (store.Session, error)
	Entries(ctx context.Context, tenant string, session uuid.UUID) ([]transcript.Entry, error)
	Load(ctx context.Context, tenant string, session uuid.UUID) (store.Session, transcript.Snapshot, error)
}

// sessions is an open session database scoped to one tenant.
type sessions struct {
	st     sessionStore
	tenant string
}

func newSessionCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "List, fork, switch, delete, compact and diff the sessions of the current directory",
		Long: `The session commands work on the session database of the global config
(database_url in $AERIE_HOME/config.toml; by default the SQLite file
$AERIE_HOME/sessions.db), and only on the sessions of the current directory:
sessions started in other directories are neither listed nor found (export
and diff also reach a cluster session's, with --namespace and --db).

SESSION is a full session id, a unique prefix of one, or a label (a branch
label given by fork --label). A prefix or label that matches several sessions
is an error listing them.

Every subcommand takes --json for scripts; the field names are stable.

Exit status: 0 on success; 130 when a delete confirmation is canceled (the
typed id does not match, empty input, Ctrl-D, Ctrl-C); 1 for every other
failure, such as an unknown or ambiguous SESSION or an invalid fork cut.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(
		newSessionListCmd(a),
		newSessionTreeCmd(a),
		newSessionForkCmd(a),
		newSessionSwitchCmd(a),
		newSessionDeleteCmd(a),
		newSessionExportCmd(a),
		newSessionOutputCmd(a),
		newSessionDiffCmd(a),
		newSessionCompactCmd(a),
		newSessionResultCmd(a),
	)
	return cmd
}

func newSessionListCmd(a *app) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   listCmd,
		Short: "List the sessions of the current directory, most recently updated first",
		Long: `List shows each session's id, label, state, number of entries and how long ago
it was last updated, most recently updated first, with its COST in US dollars
from its stored usage (- when its models' prices are unknown). Subagent sessions (kind
subagent: child agents of another session) and deleted sessions are left out
unless --all; tree shows the subagents under their parents.

--json prints {"tenant": DIR, "sessions": [SESSION, ...]}, where SESSION has
id, label, state, kind, entries, last_seq, parent_id, root_id, dir,
provider, model, created_at, updated_at, deleted_at and cost_usd (left out
when unknown).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withSessions(cmd, a, func(ctx context.Context, s sessions) error {
				list, err := s.st.List(ctx, s.tenant, store.ListOptions{IncludeDeleted: all})
				if err != nil {
					return err
				}
				if !all {
					list = slices.DeleteFunc(list, func(s store.Session) bool { return s.Kind == store.SessionSubagent })
				}
				costs := sessionCosts(ctx, s, list)
				if asJSON {
					out := sessionListJSON{Tenant: s.tenant, Sessions: make([]sessionJSON, 0, len(list))}
					for _, sess := range list {
						j := toSessionJSON(sess)
						if c, ok := costs[sess.ID]; ok {
							j.CostUSD = &c
						}
						out.Sessions = append(out.Sessions, j)
					}
					return cli.WriteJSON(cmd.OutOrStdout(), out)
				}
				if len(list) == 0 {
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "No sessions in %s.\n", s.tenant)
					return err
				}
				return printSessionTable(cmd.OutOrStdout(), list, costs, time.Now())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "include subagent and deleted sessions")
	return cmd
}

func newSessionTreeCmd(a *app) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "tree",
		Short: "Show the sessions of the current directory as trees of forks and subagents",
		Long: `Tree shows the sessions of the current directory under the sessions they were
forked from or are subagents of, oldest first at every level. A session whose
parent was deleted is shown as a root.

KIND is how a session came to be (user, headless, fork, subagent). For a
subagent, AGENT is its agent type (its persona; - for the parent session's
own), and OUTCOME, TOKENS (input plus output) and COST (in US dollars,
- when its model's price is unknown) are what its parent
recorded when it ended; a subagent still running, or whose parent never
recorded its end, shows - there and its STATE says where it is.

--json prints {"tenant": DIR, "sessions": [NODE, ...]}, where NODE has the
fields of a session in list --json plus "agent_type", "outcome" (null
but for a subagent whose end its parent recorded), "usage" (likewise: the
subagent's input_tokens, output_tokens, cache_read_tokens,
cache_write_tokens, reasoning_tokens, requests, cost_usd) and
"children": [NODE, ...].`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withSessions(cmd, a, func(ctx context.Context, s sessions) error {
				list, err := s.st.List(ctx, s.tenant, store.ListOptions{IncludeDeleted: all})
				if err != nil {
					return err
				}
				roots := store.BuildTree(list)
				outcomes, err := store.SubagentOutcomes(ctx, s.st, s.tenant, roots)
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(),
						sessionTreeJSON{Tenant: s.tenant, Sessions: toTreeJSON(roots, outcomes)})
				}
				if len(roots) == 0 {
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "No sessions in %s.\n", s.tenant)
					return err
				}
				return printSessionTree(cmd.OutOrStdout(), roots, outcomes, time.Now())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "include deleted sessions")
	return cmd
}

func newSessionForkCmd(a *app) *cobra.Command {
	var (
		asJSON bool
		at     int64
		label  string
	)
	cmd := &cobra.Command{
		Use:   "fork SESSION [--at SEQUENCE]",
		Short: "Copy a session through one of its entries into a new child session",
		Long: `Fork copies SESSION's entries through entry SEQUENCE (by default its latest)
into a new session, a child of SESSION, and prints the new session's id. The
source is unchanged.

The cut must not fall inside an open tool call: every tool call at or before
SEQUENCE must have its completion at or before SEQUENCE. A session that is in
the middle of a tool call cannot be forked at its latest entry; pass --at
with an entry before the call.

--json prints {"session": NEW, "source": SOURCE, "at": SEQUENCE}, with the
sessions in the shape of list --json.`,
		Example: `  aerie session fork main --at 12 --label try-b
  aerie session fork 3f2a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("at") && at < 1 {
				return fmt.Errorf("fork: --at %d: want the sequence number of an entry, 1 or more", at)
			}
			return withSessions(cmd, a, func(ctx context.Context, s sessions) error {
				src, err := s.resolve(ctx, args[0])
				if err != nil {
					return err
				}
				cut := at
				if cut == 0 {
					cut = src.LastSeq
				}
				if cut > src.LastSeq {
					return fmt.Errorf("fork %s: --at %d is past its last entry, %d", describeSession(src), cut, src.LastSeq)
				}
				child, err := s.st.Fork(ctx, s.tenant, src.ID, store.ForkOptions{At: at, Label: label})
				if errors.Is(err, store.ErrInvalidCut) {
					return fmt.Errorf("%s cannot be forked at entry %d, inside an open tool call "+
						"(pass --at with an entry before the call or after its completion): %w",
						describeSession(src), cut, err)
				}
				if err != nil {
					return fmt.Errorf("fork %s: %w", describeSession(src), err)
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), sessionForkJSON{
						Session: toSessionJSON(child), Source: toSessionJSON(src), At: cut,
					})
				}
				// The id alone on stdout, so that id=$(aerie session fork ...)
				// works; the explanation is for the person.
				_, err = fmt.Fprintf(cmd.ErrOrStderr(), "Forked %s through entry %d.\n", describeSession(src), cut)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), child.ID)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().Int64Var(&at, "at", 0, "copy through entry `SEQUENCE` (default: the latest)")
	cmd.Flags().StringVar(&label, "label", "", "label the new session `NAME`, usable as SESSION later")
	return cmd
}

func newSessionSwitchCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "switch SESSION",
		Short: "Make a session the active session of the current directory",
		Long: `Switch marks SESSION active. It is the current directory's one active
session: any other active session of the directory is marked idle. The active
session cannot be deleted.

--json prints {"session": SESSION, "deactivated": [ID, ...]}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSessions(cmd, a, func(ctx context.Context, s sessions) error {
				sess, err := s.resolve(ctx, args[0])
				if err != nil {
					return err
				}
				sess, deactivated, err := s.activate(ctx, sess)
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), sessionSwitchJSON{Session: toSessionJSON(sess), Deactivated: deactivated})
				}
				out := cli.NewWriter(cmd.OutOrStdout())
				for _, id := range deactivated {
					fmt.Fprintf(out, "Session %s is now idle.\n", id)
				}
				fmt.Fprintf(out, "Session %s is now active.\n", idAndLabel(sess))
				return out.Err()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func newSessionDeleteCmd(a *app) *cobra.Command {
	var (
		asJSON  bool
		confirm string
	)
	cmd := &cobra.Command{
		Use:   "delete SESSION",
		Short: "Delete a session (soft deletion: its records are kept)",
		Long: `Delete hides SESSION from every session command (list --all still shows it);
its records stay in the database. The active session cannot be deleted:
switch to another session first.

The deletion must be confirmed with the session's complete id, even when
SESSION is a label or a prefix: on a terminal delete asks for it; scripts
pass it with --confirm. Without a terminal and without --confirm, delete
fails rather than wait for an answer.

Exit status: 0 when the confirmation matched and the session was deleted;
130 when the confirmation was canceled (a different id, including a
different --confirm, empty input, Ctrl-D, Ctrl-C); 1 otherwise.

--json prints {"deleted": SESSION}.`,
		Example: `  aerie session delete try-b
  aerie session delete 3f2a --confirm 3f2a0c1e-8d4b-4b7a-9a41-2f6c0d9e7b15 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			confirmed := cmd.Flags().Changed("confirm")
			return withSessions(cmd, a, func(ctx context.Context, s sessions) error {
				sess, err := s.resolve(ctx, args[0])
				if err != nil {
					return err
				}
				if sess.State == store.StateActive {
					return fmt.Errorf("delete %s: it is the active session of %s; "+
						"switch to another session first (aerie session switch SESSION)", describeSession(sess), s.tenant)
				}
				answer := confirm
				if !confirmed {
					if a.isTerminal == nil || !a.isTerminal() {
						return fmt.Errorf("delete %s: stdin is not a terminal, so delete cannot ask for confirmation; "+
							"pass --confirm with the session's complete id", describeSession(sess))
					}
					// Under --json, stdout carries only the JSON document.
					say := cmd.OutOrStdout()
					if asJSON {
						say = cmd.ErrOrStderr()
					}
					if answer, err = askDeleteConfirmation(ctx, cmd.InOrStdin(), say, sess); err != nil {
						return fmt.Errorf("delete %s: %w", describeSession(sess), err)
					}
				}
				// Only the complete id confirms, however SESSION was given:
				// typing it is the deliberate act the confirmation asks for.
				if !strings.EqualFold(strings.TrimSpace(answer), sess.ID.String()) {
					return fmt.Errorf("delete %s: the confirmation %q is not its complete id; nothing was deleted: %w",
						describeSession(sess), answer, errCanceled)
				}
				if err := s.st.Delete(ctx, s.tenant, sess.ID); err != nil {
					return fmt.Errorf("delete %s: %w", describeSession(sess), err)
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), sessionDeleteJSON{Deleted: toSessionJSON(s.deleted(ctx, sess))})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted session %s.\n", idAndLabel(sess))
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().StringVar(&confirm, "confirm", "", "confirm without a prompt: the session's complete `ID`")
	return cmd
}

// askDeleteConfirmation shows the session and returns the id the user types.
func askDeleteConfirmation(ctx context.Context, in io.Reader, w io.Writer, sess store.Session) (string, error) {
	out := cli.NewWriter(w)
	fmt.Fprintf(out, "Delete session %s (%s, %d entries, updated %s)?\n",
		sess.ID, labelOrDash(sess.Label), sess.EntryCount, cli.Age(time.Now(), sess.UpdatedAt))
	fmt.Fprintln(out, "It will be hidden from the session commands; its records stay in the database.")
	p := &prompter{in: bufio.NewReader(in), out: out}
	return p.ask(ctx, "Type the session's complete id to confirm", "")
}

// withSessions opens the session database for the current directory, runs
// fn, and closes the database (for SQLite, checkpointing its write-ahead log).
func withSessions(cmd *cobra.Command, a *app, fn func(ctx context.Context, s sessions) error) error {
	ctx := cmd.Context()
	dir, err := a.workDir()
	if err != nil {
		return fmt.Errorf("find the current directory: %w", err)
	}
	loaded, err := a.loadConfig(cmd, dir, "")
	if err != nil {
		return err
	}
	st, err := openStore(ctx, loaded.Config.DatabaseURL)
	if err != nil {
		return err
	}
	defer closeStore(cmd, st)
	return fn(ctx, sessions{st: st, tenant: dir})
}

// loadConfig loads the global and the project configuration for dir
// (searching no higher than workspace; empty: dir), printing the warnings.
func (a *app) loadConfig(cmd *cobra.Command, dir, workspace string) (config.Loaded, error) {
	loaded, err := config.Load(config.Options{Home: config.Home(a.env), WorkDir: dir, Workspace: workspace})
	if err != nil {
		return config.Loaded{}, fmt.Errorf("load configuration: %w", err)
	}
	for _, w := range loaded.Warnings {
		warn(cmd, "%v", w)
	}
	return loaded, nil
}

// openStore opens the session database at url, with its password kept out
// of the error.
func openStore(ctx context.Context, url string) (store.Store, error) {
	st, err := dburl.Open(ctx, url)
	if err != nil {
		// Drivers do not print passwords, but the URL may end up quoted.
		if msg := redactIn(err.Error(), url); msg != err.Error() {
			return nil, fmt.Errorf("open session database %s: %s", store.RedactURL(url), msg)
		}
		return nil, fmt.Errorf("open session database %s: %w", store.RedactURL(url), err)
	}
	return st, nil
}

// closeStore closes st. The command's outcome stands: a failed checkpoint
// loses nothing, the log is applied by the next open.
func closeStore(cmd *cobra.Command, st io.Closer) {
	if err := st.Close(); err != nil {
		warn(cmd, "%v", err)
	}
}

// workDir returns the current directory, the tenant of local sessions.
func (a *app) workDir() (string, error) {
	getwd := a.getwd
	if getwd == nil {
		getwd = os.Getwd
	}
	dir, err := getwd()
	if err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}

// resolve finds the session ref names, with errors that say what to do.
func (s sessions) resolve(ctx context.Context, ref string) (store.Session, error) {
	sess, err := s.st.Resolve(ctx, s.tenant, ref)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Session{}, fmt.Errorf("no session %q in %s (aerie session list shows this directory's sessions): %w",
			ref, s.tenant, store.ErrNotFound)
	case err != nil:
		return store.Session{}, err // an *AmbiguousError lists the candidates
	}
	return sess, nil
}

// activate marks sess active and every other active session of the tenant
// idle, returning sess as stored and the sessions it made idle. Activating
// first means the directory is never left without an active session.
func (s sessions) activate(ctx context.Context, sess store.Session) (store.Session, []uuid.UUID, error) {
	if err := s.st.SetState(ctx, s.tenant, sess.ID, store.StateActive); err != nil {
		return store.Session{}, nil, fmt.Errorf("switch to %s: %w", describeSession(sess), err)
	}
	list, err := s.st.List(ctx, s.tenant, store.ListOptions{})
	if err != nil {
		return store.Session{}, nil, fmt.Errorf("switch to %s: %w", describeSession(sess), err)
	}
	deactivated := []uuid.UUID{}
	for _, other := range list {
		if other.ID == sess.ID || other.State != store.StateActive {
			continue
		}
		err := s.st.SetState(ctx, s.tenant, other.ID, store.StateIdle)
		switch {
		case errors.Is(err, store.ErrNotFound): // deleted meanwhile
		case err != nil:
			return store.Session{}, nil, fmt.Errorf("switch to %s: make %s idle: %w", describeSession(sess), other.ID, err)
		default:
			deactivated = append(deactivated, other.ID)
		}
	}
	if sess, err = s.st.Session(ctx, s.tenant, sess.ID); err != nil {
		return store.Session{}, nil, fmt.Errorf("switch to %s: %w", describeSession(sess), err)
	}
	return sess, deactivated, nil
}

// deleted returns sess as stored after its deletion, or sess itself when it
// cannot be read back: the deletion is done either way.
func (s sessions) deleted(ctx context.Context, sess store.Session) store.Session {
	list, err := s.st.List(ctx, s.tenant, store.ListOptions{IncludeDeleted: true})
	if err != nil {
		return sess
	}
	for _, d := range list {
		if d.ID == sess.ID {
			return d
		}
	}
	return sess
}

// describeSession names a session in messages: its id and label.
func describeSession(s store.Session) string { return "session " + idAndLabel(s) }

func idAndLabel(s store.Session) string {
	if s.Label == "" {
		return s.ID.String()
	}
	return fmt.Sprintf("%s (%s)", s.ID, s.Label)
}

// sessionJSON is a session in --json output. Every field is always present
// (parent_id and deleted_at are null when unset), so scripts can rely on it.
type sessionJSON struct {
	ID        uuid.UUID  `json:"id"`
	Label     string     `json:"label"`
	State     string     `json:"state"`
	Kind      string     `json:"kind"`
	Entries   int64      `json:"entries"`
	LastSeq   int64      `json:"last_seq"`
	ParentID  *uuid.UUID `json:"parent_id"`
	RootID    uuid.UUID  `json:"root_id"`
	Dir       string     `json:"dir"`
	Provider  string     `json:"provider"`
	Model     string     `json:"model"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at"`
	// CostUSD is the session's cost from its stored usage (list only);
	// null when its models' prices were unknown or it made no request.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

type sessionNodeJSON struct {
	sessionJSON
	// AgentType is a subagent's persona; empty for the parent's own and
	// for every other kind of session.
	AgentType string `json:"agent_type"`
	// Outcome and Usage are a subagent's, as its parent recorded them when
	// it ended; null otherwise.
	Outcome  *string           `json:"outcome"`
	Usage    *transcript.Usage `json:"usage"`
	Children []sessionNodeJSON `json:"children"`
}

type sessionListJSON struct {
	Tenant   string        `json:"tenant"`
	Sessions []sessionJSON `json:"sessions"`
}

type sessionTreeJSON struct {
	Tenant   string            `json:"tenant"`
	Sessions []sessionNodeJSON `json:"sessions"`
}

type sessionForkJSON struct {
	Session sessionJSON `json:"session"`
	Source  sessionJSON `json:"source"`
	At      int64       `json:"at"`
}

type sessionSwitchJSON struct {
	Session     sessionJSON `json:"session"`
	Deactivated []uuid.UUID `json:"deactivated"`
}

type sessionDeleteJSON struct {
	Deleted sessionJSON `json:"deleted"`
}

func toSessionJSON(s store.Session) sessionJSON {
	j := sessionJSON{
		ID:        s.ID,
		Label:     s.Label,
		State:     string(s.State),
		Kind:      string(s.Kind),
		Entries:   s.EntryCount,
		LastSeq:   s.LastSeq,
		RootID:    s.RootID,
		Dir:       s.Dir,
		Provider:  s.Settings.Provider,
		Model:     s.Settings.Model,
		CreatedAt: s.CreatedAt,
		UpdatedAt: s.UpdatedAt,
	}
	if s.ParentID != uuid.Nil {
		j.ParentID = &s.ParentID
	}
	if !s.DeletedAt.IsZero() {
		j.DeletedAt = &s.DeletedAt
	}
	return j
}

func toTreeJSON(nodes []*store.Node, outcomes map[uuid.UUID]transcript.SubagentOutcome) []sessionNodeJSON {
	out := make([]sessionNodeJSON, 0, len(nodes))
	for _, n := range nodes {
		j := sessionNodeJSON{
			sessionJSON: toSessionJSON(n.Session),
			AgentType:   agentType(n.Session, outcomes),
			Children:    toTreeJSON(n.Children, outcomes),
		}
		if o, ok := outcomes[n.Session.ID]; ok {
			j.Outcome = ptrTo(string(o.Outcome))
			j.Usage = o.Usage
		}
		out = append(out, j)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// agentType is what tree shows of a subagent's agent type: its persona, as
// its record or else its outcome names it; empty for other sessions.
func agentType(s store.Session, outcomes map[uuid.UUID]transcript.SubagentOutcome) string {
	if s.Kind != store.SessionSubagent {
		return ""
	}
	if s.Settings.Persona != "" {
		return s.Settings.Persona
	}
	return outcomes[s.ID].AgentType
}

// sessionCosts are the costs of the sessions of list that have one in
// their latest stored usage; a session whose usage cannot be read (a
// deleted one) has none.
func sessionCosts(ctx context.Context, s sessions, list []store.Session) map[uuid.UUID]float64 {
	costs := make(map[uuid.UUID]float64, len(list))
	for _, sess := range list {
		if !sess.DeletedAt.IsZero() {
			continue
		}
		_, snap, err := s.st.Load(ctx, s.tenant, sess.ID)
		if err == nil && snap.Usage != nil && snap.Usage.CostUSD > 0 {
			costs[sess.ID] = snap.Usage.CostUSD
		}
	}
	return costs
}

// printSessionTable prints sessions as list shows them, with their costs,
// ages relative to now.
func printSessionTable(w io.Writer, list []store.Session, costs map[uuid.UUID]float64, now time.Time) error {
	tw := cli.NewTable(w)
	fmt.Fprintln(tw, "ID\tLABEL\tSTATE\tCOST\tENTRIES\tUPDATED")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.ID, labelOrDash(s.Label), stateOf(s),
			costOf(transcript.Usage{CostUSD: costs[s.ID]}), s.EntryCount, cli.Age(now, s.UpdatedAt))
	}
	return tw.Flush()
}

// printSessionTree prints trees as tree shows them, ages relative to now;
// outcomes are the subagents' as their parents recorded them.
func printSessionTree(
	w io.Writer, roots []*store.Node, outcomes map[uuid.UUID]transcript.SubagentOutcome, now time.Time,
) error {
	tw := cli.NewTable(w)
	fmt.Fprintln(tw, "ID\tLABEL\tKIND\tAGENT\tSTATE\tOUTCOME\tTOKENS\tCOST\tENTRIES\tUPDATED")
	var walk func(nodes []*store.Node, indent string, top bool)
	walk = func(nodes []*store.Node, indent string, top bool) {
		for i, n := range nodes {
			branch, next := "├── ", "│   "
			if i == len(nodes)-1 {
				branch, next = "└── ", "    "
			}
			if top {
				branch, next = "", ""
			}
			s := n.Session
			outcome, tokens, cost := "-", "-", "-"
			if o, ok := outcomes[s.ID]; ok {
				outcome = string(o.Outcome)
				if o.Usage != nil {
					tokens = strconv.FormatInt(o.Usage.InputTokens+o.Usage.OutputTokens, 10)
					cost = costOf(*o.Usage)
				}
			}
			fmt.Fprintf(tw, "%s%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", indent, branch, s.ID, labelOrDash(s.Label),
				s.Kind, labelOrDash(agentType(s, outcomes)), stateOf(s), outcome, tokens, cost, s.EntryCount,
				cli.Age(now, s.UpdatedAt))
			walk(n.Children, indent+next, false)
		}
	}
	walk(roots, "", true)
	return tw.Flush()
}

// costOf is usage's cost as the tree shows it, in US dollars to the
// fourth decimal; - when the price was unknown (no cost recorded).
func costOf(u transcript.Usage) string {
	if !(u.CostUSD > 0) {
		return "-"
	}
	return fmt.Sprintf("$%.4f", u.CostUSD)
}

func labelOrDash(label string) string {
	if label == "" {
		return "-"
	}
	return label
}

// stateOf is the state shown for a session; list --all shows deleted ones.
func stateOf(s store.Session) string {
	if !s.DeletedAt.IsZero() {
		return "deleted"
	}
	return string(s.State)
}

// openingStore is the session database while it opens. aerie run starts
// opening it as soon as its configuration names it, and goes on with its
// extensions, executor and MCP servers, and a new session with its first
// model request (session.Run stores the session in the background); each
// method waits for the open to finish.
type openingStore struct {
	done chan struct{}
	st   store.Store
	err  error
}

func openStoreAsync(ctx context.Context, url string) *openingStore {
	o := &openingStore{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.st, o.err = openStore(context.WithoutCancel(ctx), url)
	}()
	return o
}

// get waits for the open; it gives up with ctx.
func (o *openingStore) get(ctx context.Context) (store.Store, error) {
	select {
	case <-o.done:
		return o.st, o.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Close waits for the open and closes what it opened.
func (o *openingStore) Close() error {
	<-o.done
	if o.err != nil {
		return nil
	}
	return o.st.Close()
}

func (o *openingStore) Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error {
	st, err := o.get(ctx)
	if err != nil {
		return err
	}
	return st.Append(ctx, tenant, session, entries)
}

func (o *openingStore) Create(ctx context.Context, tenant string, s store.NewSession) (store.Session, error) {
	st, err := o.get(ctx)
	if err != nil {
		return store.Session{}, err
	}
	return st.Create(ctx, tenant, s)
}

func (o *openingStore) Resolve(ctx context.Context, tenant, ref string) (store.Session, error) {
	st, err := o.get(ctx)
	if err != nil {
		return store.Session{}, err
	}
	return st.Resolve(ctx, tenant, ref)
}

func (o *openingStore) List(ctx context.Context, tenant string, opts store.ListOptions) ([]store.Session, error) {
	st, err := o.get(ctx)
	if err != nil {
		return nil, err
	}
	return st.List(ctx, tenant, opts)
}

func (o *openingStore) Fork(
	ctx context.Context, tenant string, source uuid.UUID, opts store.ForkOptions,
) (store.Session, error) {
	st, err := o.get(ctx)
	if err != nil {
		return store.Session{}, err
	}
	return st.Fork(ctx, tenant, source, opts)
}

func (o *openingStore) Load(
	ctx context.Context, tenant string, session uuid.UUID,
) (store.Session, transcript.Snapshot, error) {
	st, err := o.get(ctx)
	if err != nil {
		return store.Session{}, transcript.Snapshot{}, err
	}
	return st.Load(ctx, tenant, session)
}

func (o *openingStore) SetState(ctx context.Context, tenant string, id uuid.UUID, state store.State) error {
	st, err := o.get(ctx)
	if err != nil {
		return err
	}
	return st.SetState(ctx, tenant, id, state)
}

func (o *openingStore) AddTrace(ctx context.Context, tenant string, tr store.Trace) (store.Trace, error) {
	st, err := o.get(ctx)
	if err != nil {
		return store.Trace{}, err
	}
	return st.AddTrace(ctx, tenant, tr)
}
