package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestSessionSQLite runs the session commands against the default database:
// the SQLite file $AERIE_HOME/sessions.db, with no config file at all.
func TestSessionSQLite(t *testing.T) {
	t.Parallel()
	testSessionCommands(t, func(t *testing.T) string { return t.TempDir() })

	t.Run("the default database, closed with its log checkpointed", func(t *testing.T) {
		t.Parallel()
		f := seedSessions(t, t.TempDir(), t.TempDir())
		mustRun(t, f.harness(), "session", "list")
		db := filepath.Join(f.home, "sessions.db")
		if _, err := os.Stat(db); err != nil {
			t.Fatalf("default database: %v", err)
		}
		if fi, err := os.Stat(db + "-wal"); err == nil && fi.Size() > 0 {
			t.Errorf("write-ahead log left with %d bytes: the store was not closed", fi.Size())
		}
	})
}

// testSessionCommands is the suite both backends pass. newHome returns a
// fresh $AERIE_HOME whose global config selects the backend.
func testSessionCommands(t *testing.T, newHome func(t *testing.T) string) {
	// seed gives a subtest its own directory, hence its own tenant: on a
	// shared PostgreSQL database the subtests cannot see each other.
	seed := func(t *testing.T) sessionFixture {
		t.Helper()
		return seedSessions(t, newHome(t), t.TempDir())
	}

	t.Run("subagent trees", func(t *testing.T) {
		t.Parallel()
		testSubagentTrees(t, newHome)
	})

	t.Run("list --json", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		r := mustRun(t, f.harness(), "session", "list", "--json")
		var got sessionListJSON
		decodeJSON(t, r.stdout, &got)
		if got.Tenant != f.dir {
			t.Errorf("tenant = %q, want %q", got.Tenant, f.dir)
		}
		if diff := cmp.Diff(f.wantRows(), rowsOf(got.Sessions)); diff != "" {
			t.Errorf("sessions (-want +got):\n%s", diff)
		}
		// Most recently updated first: the twins were created last.
		if got.Sessions[0].ID != f.twinB.ID {
			t.Errorf("first listed is %s, want the latest updated %s", got.Sessions[0].ID, f.twinB.ID)
		}

		// Scripts rely on the field names: every one is always there.
		var raw struct{ Sessions []map[string]any }
		decodeJSON(t, r.stdout, &raw)
		want := []string{"created_at", "deleted_at", "dir", "entries", "id", "kind", "label",
			"last_seq", "model", "parent_id", "provider", "root_id", "state", "updated_at"}
		for _, s := range raw.Sessions {
			keys := make([]string, 0, len(s))
			for k := range s {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if diff := cmp.Diff(want, keys); diff != "" {
				t.Fatalf("fields of %v (-want +got):\n%s", s["id"], diff)
			}
		}
	})

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		r := mustRun(t, f.harness(), "session", "list")
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"ID", "LABEL", "STATE", "COST", "ENTRIES", "UPDATED"}) {
			t.Errorf("header = %q", lines[0])
		}
		got := map[string][]string{}
		for _, l := range lines[1:] {
			fields := strings.Fields(l)
			got[fields[0]] = fields[1:5] // the age is the rest
		}
		want := map[string][]string{
			f.main.ID.String():  {"main", "active", "-", "7"},
			f.other.ID.String(): {"other", "idle", "-", "2"},
			f.try.ID.String():   {"try", "idle", "-", "6"},
			f.twinA.ID.String(): {"dup", "idle", "-", "0"},
			f.twinB.ID.String(): {"dup", "idle", "-", "0"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rows (-want +got):\n%s\n%s", diff, r.stdout)
		}
	})

	t.Run("list --all shows the subagent sessions", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		r := mustRun(t, f.harness(), "session", "list", "--all", "--json")
		var got sessionListJSON
		decodeJSON(t, r.stdout, &got)
		want := f.wantRows()
		want[f.sub.ID] = sessionRow{State: "completed", Kind: "subagent", Parent: f.main.ID}
		if diff := cmp.Diff(want, rowsOf(got.Sessions)); diff != "" {
			t.Errorf("list --all --json (-want +got):\n%s", diff)
		}
		for _, s := range got.Sessions {
			if s.ID == f.sub.ID && s.RootID != f.main.ID {
				t.Errorf("the subagent's root_id = %s, want %s", s.RootID, f.main.ID)
			}
		}
		r = mustRun(t, f.harness(), "session", "list", "--all")
		if !strings.Contains(r.stdout, f.sub.ID.String()+"  -      completed") {
			t.Errorf("list --all does not show the subagent session:\n%s", r.stdout)
		}
	})

	t.Run("tree", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		r := mustRun(t, f.harness(), "session", "tree", "--json")
		var got sessionTreeJSON
		decodeJSON(t, r.stdout, &got)
		// Roots and children oldest first: main, other, the twins; the fork
		// and the subagent under main.
		want := []string{
			f.main.ID.String(),
			"  " + f.try.ID.String(),
			"  " + f.sub.ID.String(),
			f.other.ID.String(),
			f.twinA.ID.String(),
			f.twinB.ID.String(),
		}
		if diff := cmp.Diff(want, outline(got.Sessions, "")); diff != "" {
			t.Errorf("tree --json (-want +got):\n%s", diff)
		}
		if p := got.Sessions[0].Children[0].ParentID; p == nil || *p != f.main.ID {
			t.Errorf("fork's parent_id = %v, want %s", p, f.main.ID)
		}

		r = mustRun(t, f.harness(), "session", "tree")
		var lines []string // with the ages cut off
		for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")[1:] {
			fields := strings.Fields(l)
			lines = append(lines, strings.Join(fields[:len(fields)-2], " "))
		}
		wantLines := []string{
			f.main.ID.String() + " main user - active - - - 7",
			"├── " + f.try.ID.String() + " try fork - idle - - - 6",
			"└── " + f.sub.ID.String() + " - subagent - completed - - - 0",
			f.other.ID.String() + " other user - idle - - - 2",
			f.twinA.ID.String() + " dup user - idle - - - 0",
			f.twinB.ID.String() + " dup user - idle - - - 0",
		}
		if diff := cmp.Diff(wantLines, lines); diff != "" {
			t.Errorf("tree (-want +got):\n%s\n%s", diff, r.stdout)
		}
	})

	t.Run("resolution", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		tests := []struct {
			ref      string
			want     uuid.UUID
			wantErr  []string
			wantCode int
		}{
			{ref: f.other.ID.String(), want: f.other.ID},
			{ref: strings.ToUpper(f.other.ID.String()), want: f.other.ID},
			{ref: f.other.ID.String()[:8], want: f.other.ID},
			{ref: "other", want: f.other.ID},
			{ref: "try", want: f.try.ID},
			{ref: f.twinA.ID.String(), want: f.twinA.ID},
			{ref: f.twinA.ID.String()[:8], wantCode: 1, wantErr: []string{f.twinA.ID.String(), f.twinB.ID.String(), "use more of the id"}},
			{ref: "dup", wantCode: 1, wantErr: []string{f.twinA.ID.String(), f.twinB.ID.String()}},
			{ref: "nope", wantCode: 1, wantErr: []string{`no session "nope" in ` + f.dir, "aerie session list"}},
			{ref: uuid.NewString(), wantCode: 1, wantErr: []string{"no session"}},
		}
		// switch is the resolving command with the least to set up; it
		// is run one case after another on the same sessions.
		for _, tt := range tests {
			r := f.harness().aerie(t, "session", "switch", tt.ref, "--json")
			if r.code != tt.wantCode {
				t.Errorf("switch %s: exit %d, want %d: %v", tt.ref, r.code, tt.wantCode, r.err)
				continue
			}
			if tt.wantCode != 0 {
				for _, s := range tt.wantErr {
					if !strings.Contains(r.err.Error(), s) {
						t.Errorf("switch %s: error lacks %q: %v", tt.ref, s, r.err)
					}
				}
				continue
			}
			var got sessionSwitchJSON
			decodeJSON(t, r.stdout, &got)
			if got.Session.ID != tt.want {
				t.Errorf("switch %s switched to %s, want %s", tt.ref, got.Session.ID, tt.want)
			}
		}
	})

	t.Run("fork", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		before := f.entries(t, f.main.ID)

		r := mustRun(t, f.harness(), "session", "fork", "main", "--at", "5", "--label", "b2", "--json")
		var got sessionForkJSON
		decodeJSON(t, r.stdout, &got)
		if got.At != 5 || got.Source.ID != f.main.ID || got.Session.ParentID == nil || *got.Session.ParentID != f.main.ID ||
			got.Session.Label != "b2" || got.Session.Kind != "fork" || got.Session.Entries != 6 {
			t.Errorf("fork --json = %+v", got)
		}
		// The child holds entries 1..5 and the fork record; the source is
		// exactly as it was.
		child := f.entries(t, got.Session.ID)
		if len(child) != 6 || child[5].Kind() != transcript.KindFork {
			t.Errorf("child entries: %d, last %v; want 5 copied and a fork entry", len(child), child[len(child)-1].Kind())
		}
		if diff := cmp.Diff(before[:5], child[:5]); diff != "" {
			t.Errorf("copied entries (-source +child):\n%s", diff)
		}
		if diff := cmp.Diff(before, f.entries(t, f.main.ID)); diff != "" {
			t.Errorf("source changed by the fork (-before +after):\n%s", diff)
		}

		// Human output: the new id alone on stdout, usable as SESSION.
		r = mustRun(t, f.harness(), "session", "fork", "try", "--label", "retry")
		id, err := uuid.Parse(strings.TrimSpace(r.stdout))
		if err != nil || !strings.Contains(r.stderr, "through entry 6") {
			t.Fatalf("fork printed %q (stderr %q), want the new id", r.stdout, r.stderr)
		}
		r = mustRun(t, f.harness(), "session", "switch", "retry", "--json")
		var sw sessionSwitchJSON
		decodeJSON(t, r.stdout, &sw)
		if sw.Session.ID != id || *sw.Session.ParentID != f.try.ID {
			t.Errorf("retry is %s with parent %v, want %s with parent %s", sw.Session.ID, sw.Session.ParentID, id, f.try.ID)
		}
	})

	t.Run("fork refuses an invalid cut", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		before := f.entries(t, f.main.ID)
		tests := []struct {
			args    []string
			wantErr []string
		}{
			{args: []string{"--at", "3"}, wantErr: []string{"at entry 3", "open tool call", "c1 (entry 3)"}},
			{args: []string{"--at", "4"}, wantErr: []string{"at entry 4", "c1 (entry 3)"}},
			{args: []string{"--at", "7"}, wantErr: []string{"at entry 7", "c2 (entry 7)"}},
			// Without --at the cut is the latest entry, inside c2 here.
			{args: nil, wantErr: []string{"at entry 7", "c2 (entry 7)", "pass --at"}},
			{args: []string{"--at", "8"}, wantErr: []string{"--at 8 is past its last entry, 7"}},
			{args: []string{"--at", "0"}, wantErr: []string{"--at 0"}},
		}
		for _, tt := range tests {
			r := f.harness().aerie(t, append([]string{"session", "fork", "main"}, tt.args...)...)
			if r.code != 1 {
				t.Errorf("fork %v: exit %d, want 1 (stdout %q)", tt.args, r.code, r.stdout)
				continue
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(r.err.Error(), s) {
					t.Errorf("fork %v: error lacks %q: %v", tt.args, s, r.err)
				}
			}
		}
		if diff := cmp.Diff(before, f.entries(t, f.main.ID)); diff != "" {
			t.Errorf("source changed (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(f.wantRows(), f.rows(t)); diff != "" {
			t.Errorf("sessions changed (-want +got):\n%s", diff)
		}
	})

	t.Run("switch", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		r := mustRun(t, f.harness(), "session", "switch", "other", "--json")
		var got sessionSwitchJSON
		decodeJSON(t, r.stdout, &got)
		if got.Session.ID != f.other.ID || got.Session.State != "active" {
			t.Errorf("switch --json session = %+v", got.Session)
		}
		if diff := cmp.Diff([]uuid.UUID{f.main.ID}, got.Deactivated); diff != "" {
			t.Errorf("deactivated (-want +got):\n%s", diff)
		}
		want := f.wantRows()
		want[f.main.ID] = with(want[f.main.ID], func(r *sessionRow) { r.State = "idle" })
		want[f.other.ID] = with(want[f.other.ID], func(r *sessionRow) { r.State = "active" })
		if diff := cmp.Diff(want, f.rows(t)); diff != "" {
			t.Errorf("sessions after switch (-want +got):\n%s", diff)
		}

		r = mustRun(t, f.harness(), "session", "switch", "main")
		wantOut := "Session " + f.other.ID.String() + " is now idle.\nSession " + f.main.ID.String() + " (main) is now active.\n"
		if diff := cmpLines(wantOut, r.stdout); diff != "" {
			t.Errorf("switch output (-want +got):\n%s", diff)
		}
	})

	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name     string
			args     func(f sessionFixture) []string
			terminal bool
			stdin    func(f sessionFixture) string
			// cancelAtPrompt presses Ctrl-C while delete waits for the id.
			cancelAtPrompt bool
			wantCode       int
			wantErr        string
			wantDeleted    bool
		}{
			{
				name:     "typed id after lookup by label",
				args:     func(f sessionFixture) []string { return []string{"other"} },
				terminal: true, stdin: func(f sessionFixture) string { return f.other.ID.String() + "\n" },
				wantDeleted: true,
			},
			{
				name:     "typed id after lookup by prefix",
				args:     func(f sessionFixture) []string { return []string{f.other.ID.String()[:8]} },
				terminal: true, stdin: func(f sessionFixture) string { return f.other.ID.String() + "\n" },
				wantDeleted: true,
			},
			{
				name:     "typed id, --json",
				args:     func(f sessionFixture) []string { return []string{"other", "--json"} },
				terminal: true, stdin: func(f sessionFixture) string { return f.other.ID.String() + "\n" },
				wantDeleted: true,
			},
			{
				name:        "--confirm",
				args:        func(f sessionFixture) []string { return []string{"other", "--confirm", f.other.ID.String()} },
				wantDeleted: true,
			},
			{
				name:     "typed label instead of the id",
				args:     func(f sessionFixture) []string { return []string{"other"} },
				terminal: true, stdin: func(f sessionFixture) string { return "other\n" },
				wantCode: 130, wantErr: "not its complete id",
			},
			{
				name:     "typed prefix instead of the id",
				args:     func(f sessionFixture) []string { return []string{"other"} },
				terminal: true, stdin: func(f sessionFixture) string { return f.other.ID.String()[:35] + "\n" },
				wantCode: 130, wantErr: "not its complete id",
			},
			{
				name:     "empty answer",
				args:     func(f sessionFixture) []string { return []string{"other"} },
				terminal: true, stdin: func(f sessionFixture) string { return "\n" },
				wantCode: 130, wantErr: "not its complete id",
			},
			{
				name:     "end of input",
				args:     func(f sessionFixture) []string { return []string{"other"} },
				terminal: true, stdin: func(f sessionFixture) string { return "" },
				wantCode: 130, wantErr: "canceled",
			},
			{
				name:     "Ctrl-C",
				args:     func(f sessionFixture) []string { return []string{"other"} },
				terminal: true, cancelAtPrompt: true,
				wantCode: 130, wantErr: "canceled",
			},
			{
				name:     "--confirm with another id",
				args:     func(f sessionFixture) []string { return []string{"other", "--confirm", f.main.ID.String()} },
				wantCode: 130, wantErr: "not its complete id",
			},
			{
				name:     "no terminal and no --confirm",
				args:     func(f sessionFixture) []string { return []string{"other"} },
				wantCode: 1, wantErr: "pass --confirm",
			},
			{
				name:     "the active session",
				args:     func(f sessionFixture) []string { return []string{"main", "--confirm", f.main.ID.String()} },
				wantCode: 1, wantErr: "active session of",
			},
			{
				name:     "an ambiguous reference",
				args:     func(f sessionFixture) []string { return []string{"dup", "--confirm", f.twinA.ID.String()} },
				wantCode: 1, wantErr: "matches 2 sessions",
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				f := seed(t)
				h := f.harness()
				h.terminal = tt.terminal
				if tt.stdin != nil {
					h.stdin = strings.NewReader(tt.stdin(f))
				}
				if tt.cancelAtPrompt {
					ctx, cancel := context.WithCancel(t.Context())
					h.ctx = ctx
					h.stdin = cancelingReader{cancel: cancel, done: t.Context().Done()}
				}
				args := tt.args(f)
				r := h.aerie(t, append([]string{"session", "delete"}, args...)...)
				if r.code != tt.wantCode {
					t.Fatalf("exit %d, want %d: %v\nstdout:\n%s", r.code, tt.wantCode, r.err, r.stdout)
				}
				if tt.wantErr != "" && !strings.Contains(r.err.Error(), tt.wantErr) {
					t.Errorf("error lacks %q: %v", tt.wantErr, r.err)
				}
				// The prompt goes to stdout, or to stderr when stdout
				// carries JSON.
				prompt := r.stdout
				if slices.Contains(args, "--json") {
					prompt = r.stderr
					var got sessionDeleteJSON
					decodeJSON(t, r.stdout, &got)
				}
				if tt.terminal && !strings.Contains(prompt, "Delete session "+f.other.ID.String()) {
					t.Errorf("the prompt does not show the complete id:\n%s", prompt)
				}
				want := f.wantRows()
				if tt.wantDeleted {
					delete(want, f.other.ID)
				}
				if diff := cmp.Diff(want, f.rows(t)); diff != "" {
					t.Errorf("sessions afterwards (-want +got):\n%s", diff)
				}
			})
		}

		t.Run("--json, then list --all", func(t *testing.T) {
			t.Parallel()
			f := seed(t)
			r := mustRun(t, f.harness(), "session", "delete", "other", "--confirm", f.other.ID.String(), "--json")
			var got sessionDeleteJSON
			decodeJSON(t, r.stdout, &got)
			if got.Deleted.ID != f.other.ID || got.Deleted.DeletedAt == nil {
				t.Errorf("delete --json = %+v", got.Deleted)
			}
			r = mustRun(t, f.harness(), "session", "list", "--all")
			if !strings.Contains(r.stdout, f.other.ID.String()+"  other  deleted") {
				t.Errorf("list --all does not show the deleted session:\n%s", r.stdout)
			}
			// Deleted sessions resolve no more.
			if r := f.harness().aerie(t, "session", "switch", "other"); r.code != 1 {
				t.Errorf("switch to a deleted session: exit %d, want 1", r.code)
			}
		})
	})

	t.Run("other directories' sessions are invisible", func(t *testing.T) {
		t.Parallel()
		f := seed(t)
		elsewhere := f.harness()
		elsewhere.dir = t.TempDir()

		r := mustRun(t, elsewhere, "session", "list", "--json")
		var got sessionListJSON
		decodeJSON(t, r.stdout, &got)
		if got.Tenant != elsewhere.dir || got.Sessions == nil || len(got.Sessions) != 0 {
			t.Errorf("list --json elsewhere = %+v, want no sessions of %s", got, elsewhere.dir)
		}
		if r := mustRun(t, elsewhere, "session", "list"); r.stdout != "No sessions in "+elsewhere.dir+".\n" {
			t.Errorf("list elsewhere = %q", r.stdout)
		}
		if r := mustRun(t, elsewhere, "session", "tree"); r.stdout != "No sessions in "+elsewhere.dir+".\n" {
			t.Errorf("tree elsewhere = %q", r.stdout)
		}
		for _, args := range [][]string{
			{"switch", f.other.ID.String()},
			{"switch", "main"},
			{"fork", f.main.ID.String(), "--at", "5"},
			{"delete", f.other.ID.String(), "--confirm", f.other.ID.String()},
		} {
			r := elsewhere.aerie(t, append([]string{"session"}, args...)...)
			if r.code != 1 || !strings.Contains(r.err.Error(), "no session") {
				t.Errorf("%v elsewhere: exit %d, %v; want 1 and no session", args, r.code, r.err)
			}
		}
		if diff := cmp.Diff(f.wantRows(), f.rows(t)); diff != "" {
			t.Errorf("sessions changed from elsewhere (-want +got):\n%s", diff)
		}
	})
}

// sessionFixture is a directory's sessions, seeded through runner/store:
//
//	main   active, 7 entries: a completed tool call c1 (3..5) and an open one, c2 (7)
//	├── try     a fork of main through entry 5
//	└── (sub)   a completed subagent of main
//	other  idle, 2 entries
//	twinA, twinB  both labelled "dup", with ids sharing their first 8 characters
type sessionFixture struct {
	home, dir                           string
	main, other, try, sub, twinA, twinB store.Session
}

func (f sessionFixture) harness() harness { return harness{home: f.home, dir: f.dir} }

func seedSessions(t *testing.T, home, dir string) sessionFixture {
	t.Helper()
	ctx := t.Context()
	st := openTestStore(t, home)
	defer st.Close()
	create := func(ns store.NewSession) store.Session {
		t.Helper()
		ns.Dir = dir
		s, err := st.Create(ctx, dir, ns)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	text := []transcript.Block{{Type: transcript.BlockText, Text: "hello"}}
	call := func(id string) []transcript.Block {
		return []transcript.Block{{Type: transcript.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}}
	}
	now := time.Now()
	entries := func(payloads ...transcript.Payload) []transcript.Entry {
		es := make([]transcript.Entry, len(payloads))
		for i, p := range payloads {
			es[i] = transcript.Entry{Seq: int64(i + 1), Payload: p, CreatedAt: now}
		}
		return es
	}

	f := sessionFixture{home: home, dir: dir}
	f.main = create(store.NewSession{Label: "main", State: store.StateActive,
		Settings: transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5"}})
	if err := st.Append(ctx, dir, f.main.ID, entries(
		transcript.UserMessage{Content: text},
		transcript.AssistantMessage{Content: call("c1")},
		transcript.ToolCall{CallID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
		transcript.ToolResult{CallID: "c1", Content: text},
		transcript.ToolCompletion{CallID: "c1", Status: transcript.ToolOK},
		transcript.AssistantMessage{Content: call("c2")},
		transcript.ToolCall{CallID: "c2", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
	)); err != nil {
		t.Fatal(err)
	}
	f.other = create(store.NewSession{Label: "other", State: store.StateIdle})
	if err := st.Append(ctx, dir, f.other.ID, entries(
		transcript.UserMessage{Content: text},
		transcript.AssistantMessage{Content: text},
	)); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.try, err = st.Fork(ctx, dir, f.main.ID, store.ForkOptions{At: 5, Label: "try"}); err != nil {
		t.Fatal(err)
	}
	f.sub = create(store.NewSession{Kind: store.SessionSubagent, Parent: f.main.ID, State: store.StateCompleted})
	a, b := uuid.New(), uuid.New()
	copy(b[:4], a[:4])
	f.twinA = create(store.NewSession{ID: a, Label: "dup", State: store.StateIdle})
	f.twinB = create(store.NewSession{ID: b, Label: "dup", State: store.StateIdle})

	// Read back what Append and Fork changed (entry counts, times).
	for _, s := range []*store.Session{&f.main, &f.other, &f.try, &f.sub, &f.twinA, &f.twinB} {
		if *s, err = st.Session(ctx, dir, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// openTestStore opens the database the home's config selects, as the
// commands do.
func openTestStore(t *testing.T, home string) store.Store {
	t.Helper()
	loaded, err := config.Load(config.Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	st, err := dburl.Open(t.Context(), loaded.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f sessionFixture) entries(t *testing.T, id uuid.UUID) []transcript.Entry {
	t.Helper()
	st := openTestStore(t, f.home)
	defer st.Close()
	es, err := st.Entries(t.Context(), f.dir, id)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// sessionRow is what the tests compare of a session.
type sessionRow struct {
	Label, State, Kind string
	Entries            int64
	Parent             uuid.UUID
}

func rowsOf(ss []sessionJSON) map[uuid.UUID]sessionRow {
	rows := make(map[uuid.UUID]sessionRow, len(ss))
	for _, s := range ss {
		r := sessionRow{Label: s.Label, State: s.State, Kind: s.Kind, Entries: s.Entries}
		if s.ParentID != nil {
			r.Parent = *s.ParentID
		}
		rows[s.ID] = r
	}
	return rows
}

// rows lists the directory's sessions, through the command.
func (f sessionFixture) rows(t *testing.T) map[uuid.UUID]sessionRow {
	t.Helper()
	r := mustRun(t, f.harness(), "session", "list", "--json")
	var got sessionListJSON
	decodeJSON(t, r.stdout, &got)
	return rowsOf(got.Sessions)
}

// wantRows are the rows list shows: the subagent is left out.
func (f sessionFixture) wantRows() map[uuid.UUID]sessionRow {
	return map[uuid.UUID]sessionRow{
		f.main.ID:  {Label: "main", State: "active", Kind: "user", Entries: 7},
		f.other.ID: {Label: "other", State: "idle", Kind: "user", Entries: 2},
		f.try.ID:   {Label: "try", State: "idle", Kind: "fork", Entries: 6, Parent: f.main.ID},
		f.twinA.ID: {Label: "dup", State: "idle", Kind: "user"},
		f.twinB.ID: {Label: "dup", State: "idle", Kind: "user"},
	}
}

func with(r sessionRow, change func(*sessionRow)) sessionRow {
	change(&r)
	return r
}

// outline flattens a --json tree into indented ids.
func outline(nodes []sessionNodeJSON, indent string) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, indent+n.ID.String())
		out = append(out, outline(n.Children, indent+"  ")...)
	}
	return out
}

func mustRun(t *testing.T, h harness, args ...string) result {
	t.Helper()
	r := h.aerie(t, args...)
	if r.code != 0 {
		t.Fatalf("aerie %s: exit %d: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.err, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("aerie %s warned:\n%s", strings.Join(args, " "), r.stderr)
	}
	return r
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
}

// cancelingReader is a terminal where the user presses Ctrl-C at the prompt:
// the first read cancels the command's context, then blocks until done.
type cancelingReader struct {
	cancel context.CancelFunc
	done   <-chan struct{}
}

func (r cancelingReader) Read([]byte) (int, error) {
	r.cancel()
	<-r.done
	return 0, context.Canceled
}

func TestPrintSessions(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	id := func(n byte) uuid.UUID { return uuid.UUID{15: n} }
	root := store.Session{ID: id(1), Label: "main", Kind: store.SessionUser, State: store.StateActive,
		EntryCount: 12, UpdatedAt: now.Add(-3 * time.Minute)}
	fork := store.Session{ID: id(2), Label: "try-b", Kind: store.SessionFork, State: store.StateIdle,
		EntryCount: 7, ParentID: id(1), UpdatedAt: now.Add(-2 * time.Hour)}
	sub := store.Session{ID: id(3), Kind: store.SessionSubagent, State: store.StateCompleted,
		EntryCount: 3, ParentID: id(2), UpdatedAt: now.Add(-5 * time.Second)}
	sub2 := store.Session{ID: id(4), Kind: store.SessionSubagent, State: store.StateFailed,
		EntryCount: 1, ParentID: id(1), UpdatedAt: now.Add(-3 * 24 * time.Hour), DeletedAt: now}
	lone := store.Session{ID: id(5), Kind: store.SessionHeadless, State: store.StateIdle, UpdatedAt: now}

	t.Run("table", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		costs := map[uuid.UUID]float64{id(1): 1.23456}
		if err := printSessionTable(&b, []store.Session{root, fork, sub2}, costs, now); err != nil {
			t.Fatal(err)
		}
		want := `ID                                    LABEL  STATE    COST     ENTRIES  UPDATED
00000000-0000-0000-0000-000000000001  main   active   $1.2346  12       3m ago
00000000-0000-0000-0000-000000000002  try-b  idle     -        7        2h ago
00000000-0000-0000-0000-000000000004  -      deleted  -        1        3d ago
`
		if diff := cmpLines(want, b.String()); diff != "" {
			t.Errorf("table (-want +got):\n%s", diff)
		}
	})

	t.Run("tree", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		roots := []*store.Node{
			{Session: root, Children: []*store.Node{
				{Session: fork, Children: []*store.Node{{Session: sub}}},
				{Session: sub2},
			}},
			{Session: lone},
		}
		outcomes := map[uuid.UUID]transcript.SubagentOutcome{
			id(3): {Session: id(3), Outcome: transcript.OutcomeCompleted, AgentType: "reviewer",
				Usage: &transcript.Usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.004111}},
		}
		if err := printSessionTree(&b, roots, outcomes, now); err != nil {
			t.Fatal(err)
		}
		want := `ID                                            LABEL  KIND      AGENT     STATE      OUTCOME    TOKENS  COST     ENTRIES  UPDATED
00000000-0000-0000-0000-000000000001          main   user      -         active     -          -       -        12       3m ago
├── 00000000-0000-0000-0000-000000000002      try-b  fork      -         idle       -          -       -        7        2h ago
│   └── 00000000-0000-0000-0000-000000000003  -      subagent  reviewer  completed  completed  1234    $0.0041  3        5s ago
└── 00000000-0000-0000-0000-000000000004      -      subagent  -         deleted    -          -       -        1        3d ago
00000000-0000-0000-0000-000000000005          -      headless  -         idle       -          -       -        0        just now
`
		if diff := cmpLines(want, b.String()); diff != "" {
			t.Errorf("tree (-want +got):\n%s", diff)
		}
	})
}
