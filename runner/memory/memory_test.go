package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/store/dburl"
)

func newFiles(t *testing.T) Files {
	t.Helper()
	return Files{Dir: filepath.Join(t.TempDir(), DirName), Project: ProjectKey("https://example.com/org/app.git")}
}

// backends are the places memory is kept, each a function that makes a
// new, empty one: files, and the session store (a real SQLite file; the
// conformance suite of runner/store runs the versioned puts on PostgreSQL
// too).
var backends = map[string]func(t *testing.T) Documents{
	"files": func(t *testing.T) Documents { return newFiles(t) },
	"store": func(t *testing.T) Documents { return newStored(t, "https://example.com/org/app.git") },
}

func newStored(t *testing.T, scope string) Stored {
	t.Helper()
	st, err := dburl.Open(context.Background(), filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return Stored{Store: st, Tenant: "team-a", Scope: scope}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		doc  string
		want []string
		line int // of the malformed line, 0 when well formed
	}{
		{name: "empty", doc: ""},
		{name: "heading only", doc: "# Project memory\n"},
		{name: "entries", doc: "# Project memory\n\n- run make test\n- use slog  \n", want: []string{"run make test", "use slog"}},
		{name: "continuation", doc: "- first\n  second\n\tthird\n    fourth\n- next", want: []string{"first\nsecond\nthird\n  fourth", "next"}},
		{name: "blank lines inside", doc: "- a\n\n  b\n", want: []string{"a\nb"}},
		{name: "crlf", doc: "- a\r\n- b\r\n", want: []string{"a", "b"}},
		{name: "prose", doc: "# M\n\nSome notes\n- a\n", line: 3},
		{name: "star bullet", doc: "* a\n", line: 1},
		{name: "dash alone", doc: "-\n", line: 1},
		{name: "indented first", doc: "  a\n", line: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tc.doc))
			if tc.line > 0 {
				var me *MalformedError
				if !errors.As(err, &me) || me.Line != tc.line || !errors.Is(err, ErrMalformed) {
					t.Fatalf("Parse(%q) = %v, %v; want a MalformedError at line %d", tc.doc, got, err, tc.line)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.doc, diff)
			}
		})
	}
}

// FuzzParse checks that Parse never panics, that Format writes what it
// reads back, and that any content the tool saves is read back as saved.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "# M\n\n- a\n  b\n", "- x\r\n\t y", "oops", "-\n", "- a\n# h\n- b", "\xff- \x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		entries, err := Parse([]byte(doc))
		if err == nil {
			again, err := Parse(Format("Memory", entries))
			if err != nil {
				t.Fatalf("Parse(Format(%q)): %v", entries, err)
			}
			if !cmp.Equal(entries, again, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") })) {
				t.Fatalf("round trip of %q: %q then %q", doc, entries, again)
			}
		}
		if c := normalize(doc); c != "" {
			got, err := Parse(Format("Memory", []string{c}))
			if err != nil || len(got) != 1 || got[0] != c {
				t.Fatalf("entry %q read back as %q, %v", c, got, err)
			}
		}
	})
}

func TestApply(t *testing.T) {
	t.Parallel()
	for name, docs := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testApply(t, docs(t))
		})
	}
}

func testApply(t *testing.T, docs Documents) {
	ctx := context.Background()
	m := New(docs, Limits{})
	steps := []struct {
		op      Op
		refused string // in the error, "" when allowed
	}{
		{op: Op{Target: Project, Action: Add, Content: "tests: make test"}},
		{op: Op{Target: Project, Action: Add, Content: "  lint: make lint\n   (slow)\n\n"}},
		{op: Op{Target: Project, Action: Add, Content: "tests: make test"}},
		{op: Op{Target: Project, Action: Replace, OldText: "make test", Content: "tests: go test ./pkg/..."}},
		{op: Op{Target: Project, Action: Remove, OldText: "nothing like it"}, refused: "no entry contains"},
		{op: Op{Target: Project, Action: Add, Content: "make a note"}},
		{op: Op{Target: Project, Action: Remove, OldText: "make"}, refused: "is in 2 entries"},
		{op: Op{Target: Project, Action: Remove, OldText: "a note"}},
		{op: Op{Target: Project, Action: Add, Content: " \n "}, refused: "content is empty"},
		{op: Op{Target: Project, Action: Replace, Content: "x"}, refused: "old_text is empty"},
		{op: Op{Target: Project, Action: "append", Content: "x"}, refused: `action "append"`},
		{op: Op{Target: "team", Action: Add, Content: "x"}, refused: `target "team"`},
		{op: Op{Target: Project, Action: Add, Content: strings.Repeat("x", 1025)}, refused: "over the cap of 1024 per entry"},
		{op: Op{Target: User, Action: Add, Content: "prefers British spelling"}},
	}
	for i, s := range steps {
		_, err := m.Apply(ctx, s.op)
		switch {
		case s.refused == "" && err != nil:
			t.Fatalf("step %d %+v: %v", i, s.op, err)
		case s.refused != "" && (err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), s.refused)):
			t.Fatalf("step %d %+v: got %v, want refused with %q", i, s.op, err, s.refused)
		}
	}
	got, err := m.Entries(ctx, Project)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tests: go test ./pkg/...", "lint: make lint\n   (slow)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("project entries (-want +got):\n%s", diff)
	}
	prompt, errs := m.Prompt(ctx)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, s := range []string{"## Project memory (MEMORY.md)\n\n- tests: go test ./pkg/...\n- lint: make lint\n     (slow)",
		"## User memory (USER.md)\n\n- prefers British spelling"} {
		if !strings.Contains(prompt, s) {
			t.Errorf("prompt lacks %q:\n%s", s, prompt)
		}
	}
}

func TestApplyDocumentCap(t *testing.T) {
	t.Parallel()
	for name, docs := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testApplyDocumentCap(t, docs(t))
		})
	}
}

func testApplyDocumentCap(t *testing.T, files Documents) {
	ctx := context.Background()
	m := New(files, Limits{User: 200, Entry: 100})
	var err error
	n := 0
	for ; err == nil; n++ {
		_, err = m.Apply(ctx, Op{Target: User, Action: Add, Content: fmt.Sprintf("preference %02d: %s", n, strings.Repeat("y", 40))})
	}
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "over its cap of 200") {
		t.Fatalf("add %d: %v, want refused over the cap", n, err)
	}
	data, rerr := files.Read(ctx, User)
	if rerr != nil || len(data) > 200 {
		t.Fatalf("USER.md is %d bytes (%v), over the cap", len(data), rerr)
	}
	// A file over its cap (edited by hand, or the cap lowered) can still
	// shrink.
	small := New(files, Limits{User: 60, Entry: 100})
	if _, err := small.Apply(ctx, Op{Target: User, Action: Remove, OldText: "preference 00"}); err != nil {
		t.Fatalf("remove from a file over its cap: %v", err)
	}
	if _, err := small.Apply(ctx, Op{Target: User, Action: Add, Content: "z"}); !errors.Is(err, ErrRefused) {
		t.Fatalf("add to a file over its cap: %v, want refused", err)
	}
}

func TestApplyMalformed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := newFiles(t)
	files.Now = func() time.Time { return time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC) }
	m := New(files, Limits{})
	path := files.Path(Project)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	bad := "# Notes\n\nfree prose\n- an entry\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := m.Apply(ctx, Op{Target: Project, Action: Add, Content: "x"})
	bak := path + ".20260504T030201.000000000Z.bak"
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), bak) {
		t.Fatalf("Apply on a malformed file: %v; want ErrMalformed naming line 3 and %s", err, bak)
	}
	for _, p := range []string{path, bak} {
		if data, err := os.ReadFile(p); err != nil || string(data) != bad {
			t.Errorf("%s = %q, %v; want the malformed file as it was", p, data, err)
		}
	}
	if _, errs := m.Prompt(ctx); len(errs) != 1 || !errors.Is(errs[0], ErrMalformed) {
		t.Errorf("Prompt errors = %v, want the malformed file's", errs)
	}
}

// TestApplyConcurrent checks the lock: adds from several goroutines and
// Memory values all land, none lost to a read-modify-write race.
func TestApplyConcurrent(t *testing.T) {
	t.Parallel()
	for name, docs := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testApplyConcurrent(t, docs(t))
		})
	}
}

func testApplyConcurrent(t *testing.T, files Documents) {
	ctx := context.Background()
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := New(files, Limits{}).Apply(ctx, Op{Target: Project, Action: Add, Content: fmt.Sprintf("fact %d", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := New(files, Limits{}).Entries(ctx, Project)
	if err != nil || len(got) != n {
		t.Fatalf("%d entries (%v), want %d: %q", len(got), err, n, got)
	}
}

// TestStoredMalformed: a malformed document in the store is refused as a
// file is, and left as it was; Write repairs it.
func TestStoredMalformed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	docs := newStored(t, "app")
	bad := "# Notes\n\nfree prose\n"
	if ok, err := docs.Store.PutMemory(ctx, docs.Tenant, "app", "MEMORY.md", []byte(bad), 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	m := New(docs, Limits{})
	if _, err := m.Apply(ctx, Op{Target: Project, Action: Add, Content: "x"}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Apply on a malformed document: %v, want ErrMalformed", err)
	}
	if data, _ := docs.Read(ctx, Project); string(data) != bad {
		t.Errorf("document = %q, want it as it was", data)
	}
	if err := m.Write(ctx, Project, []byte("- repaired\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(ctx, Op{Target: Project, Action: Add, Content: "x"}); err != nil {
		t.Fatalf("Apply after the repair: %v", err)
	}
	// The user's memory is the tenant's: another project shares it, not
	// the project's.
	if _, err := m.Apply(ctx, Op{Target: User, Action: Add, Content: "likes tables"}); err != nil {
		t.Fatal(err)
	}
	other := New(Stored{Store: docs.Store, Tenant: docs.Tenant, Scope: "other"}, Limits{})
	if got, err := other.Entries(ctx, User); err != nil || len(got) != 1 {
		t.Errorf("user entries of another project = %q, %v; want the tenant's", got, err)
	}
	if got, err := other.Entries(ctx, Project); err != nil || len(got) != 0 {
		t.Errorf("project entries of another project = %q, %v; want none", got, err)
	}
}

func TestProjectKey(t *testing.T) {
	t.Parallel()
	a, b := ProjectKey("https://example.com/a/app.git"), ProjectKey("https://example.com/b/app.git")
	if a == b || !strings.HasPrefix(a, "app-") || ProjectKey("/") == "" || strings.ContainsAny(ProjectKey("../../x y"), "/ ") {
		t.Errorf("keys %q %q %q %q", a, b, ProjectKey("/"), ProjectKey("../../x y"))
	}
}

func TestTool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := New(newFiles(t), Limits{})
	tool := m.Tool()
	if !json.Valid(tool.Schema()) || tool.Name() != ToolName {
		t.Fatalf("schema %s", tool.Schema())
	}
	r := tool.Run(ctx, json.RawMessage(`{"target":"project","action":"add","content":"use make"}`))
	if r.IsError || !strings.Contains(r.Content, "entry added") {
		t.Fatalf("add: %+v", r)
	}
	for call, want := range map[string]string{
		`{"target":"project","action":"add","content":"x","extra":1}`: "invalid arguments",
		`{"target":"","action":"add","content":"x"}`:                  `target ""`,
		`{"target":"project","action":"remove","old_text":"nope"}`:    "no entry contains",
	} {
		if r := tool.Run(ctx, json.RawMessage(call)); !r.IsError || !strings.Contains(r.Content, want) {
			t.Errorf("%s: %+v, want an error with %q", call, r, want)
		}
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := newFiles(t)
	m := New(files, Limits{Project: 100, Entry: 20})
	path := files.Path(Project)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not a list\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]string{
		"- ok\nprose\n":                       "line 2",
		"- " + strings.Repeat("x", 21) + "\n": "per entry",
		strings.Repeat("- abcdefgh\n", 10):    "over its cap of 100",
	} {
		if err := m.Write(ctx, Project, []byte(doc)); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("Write(%q) = %v, want refused with %q", doc, err, want)
		}
	}
	// Writing a valid document repairs a malformed one.
	if err := m.Write(ctx, Project, []byte("# Mine\n\n- fixed\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Entries(ctx, Project); err != nil || !cmp.Equal(got, []string{"fixed"}) {
		t.Errorf("entries %q, %v", got, err)
	}
}
