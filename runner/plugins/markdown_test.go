package plugins

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
)

func TestParseAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc string
		want      Agent
		err       string
	}{
		{name: "list of tools", doc: "---\nname: analyzer\ndescription: Use it.\nmodel: inherit\ntools: [\"Read\", \"Grep\", \"TodoWrite\"]\n---\n\nYou analyze.\n",
			want: Agent{Name: "p:analyzer", Description: "Use it.", Model: "inherit", Tools: []string{"read_file", "grep"},
				Unmapped: []string{"TodoWrite"}, Prompt: "You analyze.", File: "/p/agents/a.md"}},
		{name: "comma string, aliases to several tools, aerie names", doc: "---\ntools: Edit, Bash(git diff:*), mcp__gh__search, Edit\n---\nBody\n",
			want: Agent{Name: "p:a", Tools: []string{"apply_patch", "edit_file", "bash", "mcp__gh__search"},
				Prompt: "Body", File: "/p/agents/a.md"}},
		{name: "no frontmatter", doc: "Just a prompt.", want: Agent{Name: "p:a", Prompt: "Just a prompt.", File: "/p/agents/a.md"}},
		{name: "empty tools list narrows to nothing", doc: "---\ntools: []\n---\nx", want: Agent{Name: "p:a", Tools: []string{}, Prompt: "x", File: "/p/agents/a.md"}},
		{name: "empty body", doc: "---\nname: a\n---\n", err: "body is empty"},
		{name: "bad name", doc: "---\nname: a/b\n---\nx", err: "name: \"a/b\" is not a valid agent name"},
		{name: "tools a mapping", doc: "---\ntools: {a: b}\n---\nx", err: "tools: line 2: must be a list"},
		{name: "description a list", doc: "---\ndescription: [a]\n---\nx", err: "description: line 2: must be a string"},
		{name: "twice", doc: "---\nname: a\nname: b\n---\nx", err: "name: line 3: appears twice"},
		{name: "bad yaml", doc: "---\nname: a\n  - b: [\n---\nx", err: "invalid YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseAgent("p", "/p/agents/a.md", []byte(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "/p/agents/a.md") {
					t.Fatalf("error %v, want one naming the file and %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestParseCorpusAgentsAndCommands reads every agent and command of the
// corpus's Claude plugins.
func TestParseCorpusAgentsAndCommands(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/corpus/claude-plugins/*/plugins/*/agents/*.md")
	cmds, _ := filepath.Glob("testdata/corpus/claude-plugins/*/plugins/*/commands/*.md")
	if len(files) < 5 || len(cmds) < 5 {
		t.Fatalf("the corpus has %d agents and %d commands, want some of each", len(files), len(cmds))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		a, err := ParseAgent("p", f, b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if a.Description == "" || a.Prompt == "" {
			t.Errorf("%s: %+v lacks a description or a prompt", f, a)
		}
	}
	for _, f := range cmds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseCommand("p", "/p", f, b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	got, err := ParseCommand("p", "/p", "/p/commands/review-pr.md", []byte(
		"---\ndescription: \"Review\"\nargument-hint: \"[aspects]\"\nallowed-tools: [\"Bash(git status:*)\", \"Read\", \"AskUserQuestion\"]\n---\nReview $ARGUMENTS\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Command{Name: "p:review-pr", Description: "Review", ArgumentHint: "[aspects]",
		AllowedTools: []string{"bash", "read_file"}, Unmapped: []string{"AskUserQuestion"},
		Body: "Review $ARGUMENTS", Root: "/p", File: "/p/commands/review-pr.md"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if _, err := ParseCommand("p", "/p", "/p/commands/a b.md", []byte("x")); err == nil {
		t.Error("a command file name with a blank was accepted")
	}
}

func FuzzParseAgentCommand(f *testing.F) {
	f.Add([]byte("---\nname: analyzer\ndescription: Use it.\nmodel: inherit\ntools: [\"Read\", \"Grep\"]\n---\n\nYou analyze.\n"))
	f.Add([]byte("---\nallowed-tools: Bash(git add:*), Read\nargument-hint: <x>\n---\n!`git status`\n$ARGUMENTS @src/a.go\n"))
	f.Add([]byte("---\na: &a [x]\ntools: *a\n---\nx"))
	f.Add([]byte("\xef\xbb\xbf---\r\nname: x\r\n---\r\nbody"))
	for _, g := range []string{"testdata/corpus/claude-plugins/*/plugins/*/agents/*.md", "testdata/corpus/claude-plugins/*/plugins/*/commands/*.md"} {
		files, _ := filepath.Glob(g)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			var p layer.Problem
			if !errors.As(err, &p) || p.File == "" || strings.Contains(p.Reason, "internal error") {
				t.Fatalf("error %v: want a layer.Problem naming the file", err)
			}
		}
		a, err := ParseAgent("p", "/p/agents/a.md", data)
		check(err)
		if err == nil && (a.Prompt == "" || !strings.HasPrefix(a.Name, "p:")) {
			t.Fatalf("accepted %+v", a)
		}
		c, err := ParseCommand("p", "/p", "/p/commands/c.md", data)
		check(err)
		if err == nil && c.Body == "" {
			t.Fatalf("accepted %+v", c)
		}
	})
}
