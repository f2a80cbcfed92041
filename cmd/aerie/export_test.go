package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/atif/atiftest"
	"github.com/aerie-run/aerie/runner/export"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// exportedRun is a session aerie run made with a tool call, and what it
// left: its id, its stored entries and the trajectory it wrote live.
type exportedRun struct {
	id      string
	entries []transcript.Entry
	live    []byte
}

// runForExport runs a session that calls bash once, writing its trajectory
// with --atif-output.
func runForExport(t *testing.T, e *e2e, entries func(id string) []transcript.Entry) exportedRun {
	t.Helper()
	live := filepath.Join(t.TempDir(), "live.json")
	out := e.run("run", "--events-jsonl", "--label", "exported", "--atif-output", live, "Count the <files>.")
	if out.code != 0 {
		t.Fatalf("run: exit %d\n%s", out.code, out.stderr)
	}
	b, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	id := out.end(t).Session
	return exportedRun{id: id, entries: entries(id), live: b}
}

func exportTurns() []testenv.Turn {
	return []testenv.Turn{
		toolTurn(call("c1", "bash", map[string]any{"command": "echo 'three <files>'"})),
		answer("There are three files."),
	}
}

// testExportFormats exports a session that aerie run made in each format.
func testExportFormats(t *testing.T, e *e2e, r exportedRun) {
	t.Helper()
	md := e.run("session", "export", "exported")
	if md.code != 0 {
		t.Fatalf("export (markdown): exit %d\n%s", md.code, md.stderr)
	}
	for _, want := range []string{
		"# Session " + r.id,
		"- Label: exported",
		"## #", "· User\n\nCount the <files>.",
		"**Tool call** `bash` · `c1`\n\n```json\n{\n  \"command\": \"echo 'three <files>'\"\n}\n```",
		"· Result of `bash` · `c1`\n\n```\nthree <files>\n```",
		"· Assistant\n\nThere are three files.",
		"ended: completed",
		"## Usage\n\n| | |\n| --- | ---: |\n| Input tokens | 200 |",
	} {
		if !strings.Contains(md.stdout, want) {
			t.Errorf("the Markdown transcript lacks %q:\n%s", want, md.stdout)
		}
	}

	jl := e.run("session", "export", r.id[:8], "--format", "jsonl")
	if jl.code != 0 {
		t.Fatalf("export (jsonl): exit %d\n%s", jl.code, jl.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(jl.stdout, "\n"), "\n")
	if len(lines) != len(r.entries) {
		t.Fatalf("%d lines for %d stored entries", len(lines), len(r.entries))
	}
	for i, l := range lines {
		var got export.Line
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		want, err := transcript.EncodePayload(r.entries[i].Payload)
		if err != nil {
			t.Fatal(err)
		}
		if got.Session.String() != r.id || got.Seq != r.entries[i].Seq || got.Kind != r.entries[i].Kind() || string(got.Payload) != string(want) {
			t.Errorf("line %d = %s, want entry %d (%s) %s", i+1, l, r.entries[i].Seq, r.entries[i].Kind(), want)
		}
	}

	path := filepath.Join(t.TempDir(), "exported.json")
	if out := e.run("session", "export", r.id, "--format", "atif", "-o", path); out.code != 0 || out.stdout != "" {
		t.Fatalf("export (atif) -o: exit %d, stdout %q\n%s", out.code, out.stdout, out.stderr)
	}
	exported, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := atiftest.Check(exported); err != nil {
		t.Fatalf("the exported trajectory is not valid ATIF: %v\n%s", err, exported)
	}
	compareTrajectories(t, r.live, exported)
}

// compareTrajectories holds the exported trajectory to the one aerie run
// wrote live for the same session. What the store does not keep may
// differ, and nothing else: the system prompt (step 1's message and
// extra.system_prompt, which hold its digest live; the prompt is rendered
// by each run and never journaled) and the tools the run offered
// (agent.tool_definitions, the run's configuration, not an entry).
func compareTrajectories(t *testing.T, live, exported []byte) {
	t.Helper()
	var l, x map[string]any
	if err := json.Unmarshal(live, &l); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(exported, &x); err != nil {
		t.Fatal(err)
	}
	if tools, _ := l["agent"].(map[string]any)["tool_definitions"].([]any); len(tools) == 0 {
		t.Fatal("the live trajectory lists no tools: the comparison would not show what it leaves out")
	}
	for _, doc := range []map[string]any{l, x} {
		delete(doc["agent"].(map[string]any), "tool_definitions")
		first := doc["steps"].([]any)[0].(map[string]any)
		delete(first, "message")
		delete(first["extra"].(map[string]any), "system_prompt")
	}
	if diff := cmp.Diff(l, x); diff != "" {
		t.Errorf("the exported trajectory differs from the live one beyond the system prompt and the tools (-live +exported):\n%s", diff)
	}
}

// TestSessionExport exports a session of the SQLite store in each format,
// and refuses what it cannot do with messages that say what to change.
func TestSessionExport(t *testing.T) {
	t.Parallel()
	e := newE2E(t, exportTurns()...)
	r := runForExport(t, e, e.entries)
	testExportFormats(t, e, r)

	// -o - is standard output; -o replaces a file that is there.
	if out := e.run("session", "export", r.id, "-o", "-", "--format", "jsonl"); out.code != 0 || strings.Count(out.stdout, "\n") != len(r.entries) {
		t.Errorf("-o -: exit %d, %d lines", out.code, strings.Count(out.stdout, "\n"))
	}
	old := filepath.Join(e.ws, "old.md")
	testenv.WriteFile(t, old, "stale", 0o600)
	if out := e.run("session", "export", r.id, "-o", old); out.code != 0 {
		t.Errorf("-o over a file: exit %d\n%s", out.code, out.stderr)
	}
	if b, _ := os.ReadFile(old); !strings.HasPrefix(string(b), "# Session "+r.id) {
		t.Errorf("-o over a file left %q", b)
	}

	readOnly := filepath.Join(e.ws, "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(e.ws, "file")
	testenv.WriteFile(t, file, "", 0o600)
	type refusal struct {
		name string
		args []string
		want []string
	}
	refusals := []refusal{{"a file's child", []string{r.id, "-o", filepath.Join(file, "t.md")}, []string{"-o " + filepath.Join(file, "t.md"), "does not exist"}}}
	if os.Geteuid() != 0 { // root writes anywhere
		refusals = append(refusals, refusal{"unwritable directory", []string{r.id, "-o", filepath.Join(readOnly, "t.md")}, []string{"-o " + filepath.Join(readOnly, "t.md"), "permission denied", "writable directory"}})
	}
	for _, tt := range append(refusals, []refusal{
		{"unknown format", []string{r.id, "--format", "html"}, []string{"--format", `"html"`, "want atif, jsonl, markdown"}},
		{"unknown session", []string{"nosuch"}, []string{`no session "nosuch"`, "aerie session list"}},
		{"missing directory", []string{r.id, "-o", filepath.Join(e.ws, "no", "t.md")}, []string{"-o " + filepath.Join(e.ws, "no", "t.md"), "does not exist"}},
		{"a directory", []string{r.id, "-o", readOnly}, []string{"-o " + readOnly, "not a regular file"}},
		{"missing database", []string{r.id, "--db", "sqlite://" + filepath.Join(e.ws, "none.db")}, []string{"no session database at " + filepath.Join(e.ws, "none.db"), "--db"}},
		{"another tenant", []string{r.id, "--namespace", "agents"}, []string{"no session", "in agents", "--namespace"}},
	}...) {
		out := e.run(append([]string{"session", "export"}, tt.args...)...)
		if out.code != 1 || out.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want 1 and nothing", tt.name, out.code, out.stdout)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.stderr, w) {
				t.Errorf("%s: stderr %q lacks %q", tt.name, out.stderr, w)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.ws, "none.db")); !os.IsNotExist(err) {
		t.Errorf("export created the database it was pointed at: %v", err)
	}
	if entries, _ := os.ReadDir(readOnly); len(entries) != 0 {
		t.Errorf("a failed export left %v", entries)
	}
}

// TestSessionExportCompacted exports a session that compacted: the
// checkpoints are shown as such, and the entries they replaced are still
// there, in order, marked compacted.
func TestSessionExportCompacted(t *testing.T) {
	t.Parallel()
	const window = 32_000
	e := newE2E(t, longBuild()...)
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
	out := e.run("run", "--events-jsonl", "--context-window", fmt.Sprint(window), "Build every step.")
	n := checkLongBuild(t, e, out, "auto")
	id := out.end(t).Session
	entries := e.entries(id)
	// The transcript shows every entry but the usage snapshots (the totals
	// end it) and the harness's records of the calls the model made (the
	// assistant messages show them).
	compacted, shown := 0, 0
	for _, en := range entries {
		if en.CompactedBy == 0 {
			continue
		}
		compacted++
		switch en.Payload.(type) {
		case transcript.Usage, transcript.ToolCall:
		default:
			shown++
		}
	}

	md := e.run("session", "export", id)
	if md.code != 0 {
		t.Fatalf("export: exit %d\n%s", md.code, md.stderr)
	}
	if got := strings.Count(md.stdout, "· Compaction checkpoint"); got != n {
		t.Errorf("%d compaction checkpoints shown, want %d", got, n)
	}
	if got := strings.Count(md.stdout, "· compacted by #"); got != shown {
		t.Errorf("%d entries marked compacted, want the %d shown of the %d the store marks", got, shown, compacted)
	}
	first, checkpoint := strings.Index(md.stdout, "· User · compacted by #"), strings.Index(md.stdout, "· Compaction checkpoint")
	if first < 0 || checkpoint < first || !strings.Contains(md.stdout[first:checkpoint], "Build every step.") {
		t.Error("the first prompt, compacted, is not shown before the first checkpoint")
	}
	for s := 1; s <= compactionSteps; s++ {
		if !strings.Contains(md.stdout, fmt.Sprintf("echo step %d >> steps.log", s)) {
			t.Errorf("step %d's call is not in the transcript", s)
		}
	}
	if !strings.Contains(md.stdout, "> Task: run the build steps in order.") {
		t.Error("the summary is not shown")
	}

	jl := e.run("session", "export", id, "--format", "jsonl")
	sc := bufio.NewScanner(strings.NewReader(jl.stdout))
	sc.Buffer(nil, 16<<20)
	var seqs []int64
	marked := 0
	for sc.Scan() {
		var l export.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, l.Seq)
		if l.CompactedBy != nil {
			marked++
		}
	}
	if len(seqs) != len(entries) || marked != compacted {
		t.Errorf("jsonl: %d lines, %d compacted; want %d and %d", len(seqs), marked, len(entries), compacted)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("line %d has seq %d: not the whole history in order", i+1, s)
		}
	}

	tr := e.run("session", "export", id, "--format", "atif")
	if err := atiftest.Check([]byte(tr.stdout)); err != nil {
		t.Fatalf("invalid ATIF: %v", err)
	}
	if got := strings.Count(tr.stdout, `"type": "compaction"`); got != n {
		t.Errorf("%d compaction steps in the trajectory, want %d", got, n)
	}
}

// TestSessionExportPostgres exports from PostgreSQL: a session aerie run
// stored through database_url, and a session stored under a namespace as a
// runner pod stores it, reached with --namespace and $AERIE_DATABASE_URL.
func TestSessionExportPostgres(t *testing.T) {
	t.Parallel()
	dsn := testenv.StartPostgres(t).NewDatabase(t)
	e := newE2E(t, exportTurns()...)
	writeConfig(t, e.home, fmt.Sprintf("database_url = %q\n", dsn))
	st, err := dburl.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := runForExport(t, e, func(id string) []transcript.Entry {
		es, err := st.Entries(t.Context(), e.ws, uuidOf(t, id))
		if err != nil {
			t.Fatal(err)
		}
		return es
	})
	testExportFormats(t, e, r)

	// A cluster session: the namespace is its tenant.
	id := uuid.New()
	if _, err := st.Create(t.Context(), "agents", store.NewSession{ID: id, Kind: store.SessionHeadless, Dir: "/workspace", Settings: transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(t.Context(), "agents", id, r.entries); err != nil {
		t.Fatal(err)
	}
	other := newE2E(t)
	other.env = append(other.env, "AERIE_DATABASE_URL="+dsn)
	out := other.run("session", "export", id.String(), "--namespace", "agents")
	if out.code != 0 || !strings.Contains(out.stdout, "# Session "+id.String()) || !strings.Contains(out.stdout, "There are three files.") {
		t.Errorf("export --namespace: exit %d\n%s\n%s", out.code, out.stdout, out.stderr)
	}
}
