package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestSessionOutput reads back, from a local run's sidecar files, the
// byte-exact original of a compressed result and the full text of a capped
// one; a whole result and an unknown call are clear errors, and so is an
// original swept away. The Markdown export marks the shortened results
// with the command, and --originals shows them.
func TestSessionOutput(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(call("l", "list_directory", map[string]any{"path": "many"})),
		toolTurn(call("b", "bash", map[string]any{"command": "yes 'a line of the build log' | head -n 3000"})),
		toolTurn(call("s", "bash", map[string]any{"command": "echo small"})),
		answer("listed"))
	listing := manyFiles(t, e.ws, 1400)
	out := e.run("run", "--compress-context=true", "list it")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	id := out.end(t).Session
	log := strings.Repeat("a line of the build log\n", 3000)

	for call, want := range map[string]string{"l": listing, "b": log} {
		got := e.run("session", "output", id, call)
		if got.code != 0 || got.stdout != want {
			t.Errorf("session output %s: exit %d, %d bytes, want the original's %d; stderr:\n%s",
				call, got.code, len(got.stdout), len(want), got.stderr)
		}
	}
	file := filepath.Join(t.TempDir(), "listing.txt")
	if got := e.run("session", "output", id[:8], "l", "-o", file); got.code != 0 {
		t.Fatalf("session output -o: exit %d; stderr:\n%s", got.code, got.stderr)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != listing {
		t.Errorf("-o %s: %d bytes, %v", file, len(b), err)
	}

	md := e.run("session", "export", id)
	for _, c := range []string{"l", "b"} {
		if want := "The original: `aerie session output " + id + " " + c + "`"; !strings.Contains(md.stdout, want) {
			t.Errorf("the export does not mark %s with %q:\n%.2000s", c, want, md.stdout)
		}
	}
	if n := strings.Count(md.stdout, "The model saw this result shortened"); n != 2 {
		t.Errorf("the export marks %d results shortened, want 2", n)
	}
	full := e.run("session", "export", id, "--originals")
	if full.code != 0 || !strings.Contains(full.stdout, "Original of `l` ("+strconv.Itoa(len(listing))+" bytes):") ||
		!strings.Contains(full.stdout, "file_0700.txt (0 bytes)") {
		t.Errorf("export --originals: exit %d, the listing's original not shown; stderr:\n%s", full.code, full.stderr)
	}
	if got := e.run("session", "export", id, "--originals", "--format", "jsonl"); got.code == 0 || !strings.Contains(got.stderr, "--originals is for --format markdown") {
		t.Errorf("--originals with jsonl: exit %d; stderr:\n%s", got.code, got.stderr)
	}

	for _, c := range []struct{ call, want string }{
		{"s", "call s: no original output is kept: the model saw its result whole"},
		{"nope", `no tool call "nope" in this session`},
	} {
		got := e.run("session", "output", id, c.call)
		if got.code != 1 || !strings.Contains(got.stderr, c.want) || got.stdout != "" {
			t.Errorf("session output %s: exit %d, stdout %q; stderr:\n%s\nwant %q", c.call, got.code, got.stdout, got.stderr, c.want)
		}
	}
	if err := os.Remove(filepath.Join(e.home, "raw", id+"_l.txt")); err != nil {
		t.Fatal(err)
	}
	got := e.run("session", "output", id, "l")
	if got.code != 1 || !strings.Contains(got.stderr, "its result was shortened, but its original is in none of the session store, "+filepath.Join(e.home, "raw")) {
		t.Errorf("a swept original: exit %d; stderr:\n%s", got.code, got.stderr)
	}
}

// TestSessionOutputStore reads the originals a runner pod keeps in the
// session store, for a cluster session (its namespace the tenant), from
// SQLite and PostgreSQL.
func TestSessionOutputStore(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "sessions.db") },
		"postgres": func(t *testing.T) string { return testenv.StartPostgres(t).NewDatabase(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testSessionOutputStore(t, dsn(t))
		})
	}
}

func testSessionOutputStore(t *testing.T, dsn string) {
	st, err := dburl.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	id := uuid.New()
	if _, err := st.Create(t.Context(), "agents", store.NewSession{ID: id, Kind: store.SessionHeadless, Dir: "/workspace",
		Settings: transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5"}}); err != nil {
		t.Fatal(err)
	}
	original := []byte("{\"rows\": [1, 2, 3]}\n\x00 byte-exact \xff\n")
	text := func(s string) []transcript.Block { return []transcript.Block{{Type: transcript.BlockText, Text: s}} }
	entries := []transcript.Entry{
		{Seq: 1, Payload: transcript.UserMessage{Content: text("query")}},
		{Seq: 2, Payload: transcript.ToolCall{CallID: "q1", Name: "bash", Input: json.RawMessage(`{"command":"query"}`)}},
		{Seq: 3, Payload: transcript.ToolResult{CallID: "q1", Content: text("{\"rows\": [1, ...]}\n[json output compressed from 38 to 18 bytes; the original (sha256:00) in full: retrieve(handle=q1)]")}},
		{Seq: 4, Payload: transcript.ToolCompletion{CallID: "q1", Status: transcript.ToolOK}},
	}
	if err := st.Append(t.Context(), "agents", id, entries); err != nil {
		t.Fatal(err)
	}
	if err := st.PutToolOutput(t.Context(), "agents", id, "q1", original); err != nil {
		t.Fatal(err)
	}
	e := newE2E(t)
	e.env = append(e.env, "AERIE_DATABASE_URL="+dsn)
	got := e.run("session", "output", id.String(), "q1", "--namespace", "agents")
	if got.code != 0 || got.stdout != string(original) {
		t.Errorf("session output: exit %d, %q, want %q; stderr:\n%s", got.code, got.stdout, original, got.stderr)
	}
	md := e.run("session", "export", id.String(), "--namespace", "agents", "--originals")
	if want := "The original: `aerie session output " + id.String() + " q1 --namespace agents`"; md.code != 0 ||
		!strings.Contains(md.stdout, want) || !strings.Contains(md.stdout, "byte-exact") {
		t.Errorf("export --originals: exit %d, no %q or no original:\n%s\n%s", md.code, want, md.stdout, md.stderr)
	}
	// Not the tenant's: the directory's sessions do not hold it.
	if got := e.run("session", "output", id.String(), "q1"); got.code != 1 || !strings.Contains(got.stderr, "no session") {
		t.Errorf("without --namespace: exit %d; stderr:\n%s", got.code, got.stderr)
	}
}
