package instructions

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/provider"
)

func TestBetween(t *testing.T) {
	t.Parallel()
	tests := []struct {
		workRel, file string
		want          []string
	}{
		{".", "sub/dir/file.go", []string{"sub", "sub/dir"}},
		{".", "file.go", nil},
		{".", "./sub/../sub/x.go", []string{"sub"}},
		{"a", "a/b/c/x.go", []string{"a/b", "a/b/c"}},
		{"a", "a/x.go", nil},
		{"a", "x.go", nil},
		{"a", "b/x.go", nil},
		{"a/b", "a/x.go", nil},
		{".", "../outside/x.go", nil},
	}
	for _, tt := range tests {
		if got := Between(tt.workRel, tt.file); !cmp.Equal(got, tt.want) {
			t.Errorf("Between(%q, %q) = %q, want %q", tt.workRel, tt.file, got, tt.want)
		}
	}
}

// workspace lays out a workspace with instructions at several depths, a
// link to one of its directories and a link out of it.
func workspace(t *testing.T) (root, ws string) {
	t.Helper()
	root = t.TempDir()
	testenv.WriteTree(t, root, map[string]string{
		"outside/AGENTS.md":       "Outside rules.",
		"outside/x.go":            "",
		"ws/AGENTS.md":            "Root rules.",
		"ws/sub/AGENTS.md":        "Sub rules.",
		"ws/sub/dir/AGENTS.md":    "Dir rules.",
		"ws/sub/dir/file.go":      "",
		"ws/sub/dir/other.go":     "",
		"ws/sub/claude/CLAUDE.md": "Claude rules.",
		"ws/sub/claude/x.go":      "",
		"ws/sub/alias":            "->dir",
		"ws/sub/escape":           "->../../outside",
		"ws/plain/x.go":           "",
	})
	return root, filepath.Join(root, "ws")
}

func newFollower(t *testing.T, ws, workDir string) *Follower {
	t.Helper()
	f, err := New(ws, workDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// files are the instruction files a reminder holds, in order.
func files(reminder string) []string {
	var out []string
	for _, m := range reminderHeader.FindAllStringSubmatch(reminder, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestReached(t *testing.T) {
	t.Parallel()
	root, ws := workspace(t)
	f := newFollower(t, ws, ws)

	r := f.Reached("c1", []string{"sub/dir/file.go"})
	if got, want := files(r), []string{"sub/AGENTS.md", "sub/dir/AGENTS.md"}; !cmp.Equal(got, want) {
		t.Fatalf("first read adds %q, want %q:\n%s", got, want, r)
	}
	if !strings.HasPrefix(r, "<system-reminder>\n") || !strings.Contains(r, "Sub rules.") || !strings.Contains(r, "Dir rules.") || strings.Contains(r, "Root rules.") {
		t.Errorf("reminder:\n%s", r)
	}
	for _, again := range [][]string{
		{"sub/dir/other.go"},                                     // the same directory
		{filepath.Join(ws, "sub/dir/file.go")},                   // an absolute path
		{"sub/alias/file.go"},                                    // a link to a directory already in
		{"file.go", "AGENTS.md"},                                 // the working directory's, in the system prompt
		{"../outside/x.go", filepath.Join(root, "outside/x.go")}, // outside the workspace
		{"sub/escape/x.go"},                                      // a link out of the workspace
		{"plain/x.go"},                                           // no instructions there
	} {
		if r := f.Reached("c2", again); r != "" {
			t.Errorf("Reached(%q) adds again:\n%s", again, r)
		}
	}
	if got, want := files(f.Reached("c3", []string{"sub/claude/x.go"})), []string{"sub/claude/CLAUDE.md"}; !cmp.Equal(got, want) {
		t.Errorf("CLAUDE.md where AGENTS.md is absent: %q, want %q", got, want)
	}
}

func TestReachedBelowWorkDir(t *testing.T) {
	t.Parallel()
	_, ws := workspace(t)
	f := newFollower(t, ws, filepath.Join(ws, "sub"))
	if got, want := files(f.Reached("c1", []string{"sub/dir/file.go"})), []string{"sub/dir/AGENTS.md"}; !cmp.Equal(got, want) {
		t.Errorf("from sub: %q, want %q", got, want)
	}
	if r := f.Reached("c2", []string{"plain/x.go"}); r != "" {
		t.Errorf("a file beside the working directory adds:\n%s", r)
	}
}

func TestRestore(t *testing.T) {
	t.Parallel()
	_, ws := workspace(t)
	f := newFollower(t, ws, ws)
	f.Reached("c1", []string{"sub/dir/file.go"})
	f.Reached("c2", []string{"sub/claude/x.go"})
	tail := func(ids ...string) []provider.Message {
		var cs []provider.Content
		for _, id := range ids {
			cs = append(cs, provider.ToolResult(id, "out", false))
		}
		return []provider.Message{{Role: provider.RoleTool, Content: cs}}
	}

	// c2's result is kept: only c1's instructions come back.
	r := f.Restore(tail("c2"))
	if got, want := files(r), []string{"sub/AGENTS.md", "sub/dir/AGENTS.md"}; !cmp.Equal(got, want) {
		t.Fatalf("Restore brings back %q, want %q:\n%s", got, want, r)
	}
	if r := f.Reached("c3", []string{"sub/dir/file.go"}); r != "" {
		t.Errorf("read again after the compaction brought them back:\n%s", r)
	}
	// The next compaction replaces the replacement, and c2's result too.
	if got, want := files(f.Restore(nil)), []string{"sub/AGENTS.md", "sub/dir/AGENTS.md", "sub/claude/CLAUDE.md"}; !cmp.Equal(got, want) {
		t.Errorf("second Restore brings back %q, want %q", got, want)
	}
	if r := (&Follower{}).Restore(nil); r != "" {
		t.Errorf("Restore of nothing = %q", r)
	}
}

func TestSeed(t *testing.T) {
	t.Parallel()
	_, ws := workspace(t)
	first := newFollower(t, ws, ws)
	r := first.Reached("c1", []string{"sub/dir/file.go"})
	history := []provider.Message{
		provider.UserMessage("Fix it."),
		{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("c1", "content\n\n"+r, false)}},
	}
	f := newFollower(t, ws, ws)
	f.Seed(history)
	if r := f.Reached("c2", []string{"sub/dir/other.go"}); r != "" {
		t.Errorf("a resumed conversation adds again what it holds:\n%s", r)
	}
	if got, want := files(f.Restore(nil)), []string{"sub/AGENTS.md", "sub/dir/AGENTS.md"}; !cmp.Equal(got, want) {
		t.Errorf("Restore after Seed brings back %q, want %q", got, want)
	}
}
