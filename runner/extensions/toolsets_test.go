package extensions

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

const specToolsets = `[toolsets.readonly]
tools = ["read_file", "grep", "find_files", "list_directory", "tree"]

[toolsets.review]
includes = ["readonly"]
tools = ["word_count"]
exclude = ["tree"]
`

func TestToolsetResolve(t *testing.T) {
	t.Parallel()
	doc := specToolsets + `
[toolsets.a]
tools = ["x"]
includes = ["b"]

[toolsets.b]
tools = ["y"]
includes = ["a", "c"]

[toolsets.c]
tools = ["z", "x"]
exclude = ["x"]

[toolsets.broken]
includes = ["readonly", "missing"]

[toolsets.nested_exclude]
includes = ["review"]
tools = ["tree"]

[toolsets.diamond]
includes = ["left", "right"]

[toolsets.left]
includes = ["base"]
exclude = ["x"]

[toolsets.right]
includes = ["base"]

[toolsets.base]
tools = ["x", "w"]
`
	sets, err := ParseToolsets("ts.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	ts := NewToolsets("ts.toml", sets)
	tests := []struct {
		name    string
		want    []string
		wantErr string
		is      error
	}{
		{"readonly", []string{"find_files", "grep", "list_directory", "read_file", "tree"}, "", nil},
		{"review", []string{"find_files", "grep", "list_directory", "read_file", "word_count"}, "", nil},
		// a → b → a is a cycle: it stops at a. c excludes x from its
		// own union only; a lists x itself.
		{"a", []string{"x", "y", "z"}, "", nil},
		{"b", []string{"x", "y", "z"}, "", nil},
		{"c", []string{"z"}, "", nil},
		// An exclusion applies to the set that states it; an outer set
		// can add the tool back.
		{"nested_exclude", []string{"find_files", "grep", "list_directory", "read_file", "tree", "word_count"}, "", nil},
		// A set included along two branches is no cycle: each branch
		// has it, and left's exclusion applies to left alone.
		{"diamond", []string{"w", "x"}, "", nil},
		{"left", []string{"w"}, "", nil},
		{"broken", nil, `toolset "broken" includes unknown toolset "missing" (in ts.toml)`, ErrUnknownToolset},
		{"nope", nil, `unknown toolset "nope" (available: a, b, base, broken, c, diamond, left, nested_exclude, readonly, review, right in ts.toml)`, ErrUnknownToolset},
	}
	for _, tt := range tests {
		got, err := ts.Resolve(tt.name)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr || !errors.Is(err, tt.is) {
				t.Errorf("Resolve(%s): err = %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%s): %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Resolve(%s) (-want +got):\n%s", tt.name, diff)
		}
	}

	sel, missing, err := ts.Apply("review", []string{"bash", "read_file", "grep", "tree", "word_count"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"read_file", "grep", "word_count"}, sel); diff != "" {
		t.Errorf("selected (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"find_files", "list_directory"}, missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
}

// TestToolsetResolveDense resolves sets that all include each other: each
// set is resolved once, so this ends, with every set's tool.
func TestToolsetResolveDense(t *testing.T) {
	t.Parallel()
	var doc strings.Builder
	const n = 200
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("%q", fmt.Sprintf("s%03d", i)))
	}
	for i := range n {
		fmt.Fprintf(&doc, "[toolsets.s%03d]\ntools = [\"t%03d\"]\nincludes = [%s]\n", i, i, strings.Join(all, ", "))
	}
	sets, err := ParseToolsets("ts.toml", []byte(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewToolsets("ts.toml", sets).Resolve("s000")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Errorf("s000 resolves to %d tools, want %d", len(got), n)
	}
}

func TestParseToolsetsErrors(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"[toolsets.a]\ntools = \"x\"\n":    "ts.toml:2:9: toolsets.a.tools: want an array of strings, got a string",
		"[toolsets.a]\ntool = [\"x\"]\n":   "ts.toml:2:1: toolsets.a.tool: unknown key",
		"[toolset.a]\ntools = []\n":        "ts.toml:1:2: toolset.a: unknown key",
		"[toolsets.a]\nexclude = [\"\"]\n": "toolsets.a.exclude: contains an empty name",
		"[toolsets.a]\nincludes = [1]\n":   "toolsets.a.includes",
		"[toolsets.a]\n[toolsets.a]\n":     "ts.toml:2",
		"toolsets = 1\n":                   "toolsets: want a table",
	} {
		if _, err := ParseToolsets("ts.toml", []byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", doc, err, want)
		}
	}
	if sets, err := ParseToolsets("ts.toml", nil); err != nil || len(sets) != 0 {
		t.Errorf("empty file: %v %v", sets, err)
	}
}

func TestToolsetPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   map[string]string
		want    []string
		wantErr string
		is      error
	}{
		{
			name:    "no toolsets.toml",
			wantErr: `toolset "r": no toolsets.toml was found in the extension layers`,
			is:      ErrNoToolsets,
		},
		{
			name:  "nearest file wins whole",
			files: map[string]string{"ws/a/.aerie/toolsets.toml": "[toolsets.r]\ntools = ['near']", "home/toolsets.toml": "[toolsets.r]\ntools = ['home']\n[toolsets.other]\n"},
			want:  []string{"near"},
		},
		{
			name:    "a malformed nearest file is skipped without trying a farther one",
			files:   map[string]string{"ws/a/.aerie/toolsets.toml": "[toolsets.r]\ntools = 'x'", "home/toolsets.toml": "[toolsets.r]\ntools = ['home']"},
			wantErr: "no toolsets.toml is usable",
			is:      ErrNoToolsets,
		},
		{
			name:    "unknown name lists the available ones",
			files:   map[string]string{"home/toolsets.toml": "[toolsets.x]\n[toolsets.y]\n"},
			wantErr: `unknown toolset "r" (available: x, y in `,
			is:      ErrUnknownToolset,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			testenv.WriteTree(t, dir, tt.files)
			ts, arts, err := LoadToolsets(promptLayers(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ts.Resolve("r")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, tt.is) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for i, a := range arts {
				if i > 0 && a.Status != layer.StatusShadowed {
					t.Errorf("farther %s is %s, want shadowed", a.Path, a.Status)
				}
				if a.Status != layer.StatusActive && a.Reason == "" {
					t.Errorf("%s is %s without a reason", filepath.Base(a.Path), a.Status)
				}
			}
		})
	}
}
