package extensions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

// promptLayers discovers the layers of a tree with ws/ and home/ under
// dir, working in ws/a/b.
func promptLayers(t *testing.T, dir string) layer.Source {
	t.Helper()
	ws := filepath.Join(dir, "ws")
	wd := filepath.Join(ws, "a", "b")
	for _, d := range []string{wd, filepath.Join(dir, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: wd, Workspace: ws, Home: filepath.Join(dir, "home")})
	if err != nil {
		t.Fatal(err)
	}
	return layer.Source{Layers: layers, Workspace: ws, WorkDir: wd}
}

func TestSystemPromptPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		env   string // AERIE_SYSTEM_PROMPT_FILE, relative to the temporary directory
		want  string // the base
		// statuses of SYSTEM.md artifacts by path relative to the
		// temporary directory.
		statuses map[string]layer.Status
	}{
		{
			name: "no file: the persona",
			want: "PERSONA",
		},
		{
			name:     "nearest SYSTEM.md replaces the persona",
			files:    map[string]string{"ws/a/.aerie/SYSTEM.md": "near", "ws/.aerie/SYSTEM.md": "far", "home/SYSTEM.md": "home"},
			want:     "near",
			statuses: map[string]layer.Status{"ws/a/.aerie/SYSTEM.md": layer.StatusActive, "ws/.aerie/SYSTEM.md": layer.StatusShadowed, "home/SYSTEM.md": layer.StatusShadowed},
		},
		{
			name:     "home SYSTEM.md when the project has none",
			files:    map[string]string{"home/SYSTEM.md": "home"},
			want:     "home",
			statuses: map[string]layer.Status{"home/SYSTEM.md": layer.StatusActive},
		},
		{
			name:     "environment file wins",
			files:    map[string]string{"ws/.aerie/SYSTEM.md": "layered", "override.md": "from env"},
			env:      "override.md",
			want:     "from env",
			statuses: map[string]layer.Status{"override.md": layer.StatusActive, "ws/.aerie/SYSTEM.md": layer.StatusShadowed},
		},
		{
			name:     "unreadable environment file: the layered file",
			files:    map[string]string{"ws/.aerie/SYSTEM.md": "layered", "override.md": "<dir>"},
			env:      "override.md",
			want:     "layered",
			statuses: map[string]layer.Status{"override.md": layer.StatusSkipped, "ws/.aerie/SYSTEM.md": layer.StatusActive},
		},
		{
			name:     "missing environment file: the persona when no layer has one",
			env:      "missing.md",
			want:     "PERSONA",
			statuses: map[string]layer.Status{"missing.md": layer.StatusSkipped},
		},
		{
			name:     "a nearest SYSTEM.md that cannot be read does not fall through to a farther one",
			files:    map[string]string{"ws/a/.aerie/SYSTEM.md": "<dir>", "ws/.aerie/SYSTEM.md": "far", "home/SYSTEM.md": "home"},
			want:     "PERSONA",
			statuses: map[string]layer.Status{"ws/a/.aerie/SYSTEM.md": layer.StatusSkipped, "ws/.aerie/SYSTEM.md": layer.StatusShadowed, "home/SYSTEM.md": layer.StatusShadowed},
		},
		{
			name:     "a nearest SYSTEM.md linking out of the workspace is unreadable",
			files:    map[string]string{"ws/.aerie/SYSTEM.md": "->../../home/secret", "home/secret": "SECRET", "home/SYSTEM.md": "home"},
			want:     "PERSONA",
			statuses: map[string]layer.Status{"ws/.aerie/SYSTEM.md": layer.StatusSkipped, "home/SYSTEM.md": layer.StatusShadowed},
		},
		{
			name:     "a dangling nearest SYSTEM.md is unreadable, not absent",
			files:    map[string]string{"ws/.aerie/SYSTEM.md": "->nowhere", "home/SYSTEM.md": "home"},
			want:     "PERSONA",
			statuses: map[string]layer.Status{"ws/.aerie/SYSTEM.md": layer.StatusSkipped, "home/SYSTEM.md": layer.StatusShadowed},
		},
		{
			name:     "a FIFO does not block",
			files:    map[string]string{"ws/.aerie/SYSTEM.md": "<fifo>", "home/SYSTEM.md": "home"},
			want:     "PERSONA",
			statuses: map[string]layer.Status{"ws/.aerie/SYSTEM.md": layer.StatusSkipped, "home/SYSTEM.md": layer.StatusShadowed},
		},
		{
			name:     "an oversized nearest SYSTEM.md is unreadable",
			files:    map[string]string{"ws/.aerie/SYSTEM.md": strings.Repeat("x", layer.MaxArtifactBytes+1), "home/SYSTEM.md": "home"},
			want:     "PERSONA",
			statuses: map[string]layer.Status{"ws/.aerie/SYSTEM.md": layer.StatusSkipped, "home/SYSTEM.md": layer.StatusShadowed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			testenv.WriteTree(t, dir, tt.files)
			src := promptLayers(t, dir)
			if tt.env != "" {
				env := filepath.Join(dir, tt.env)
				src.Getenv = func(k string) string {
					if k == SystemPromptFileEnv {
						return env
					}
					return ""
				}
			}
			p, arts, err := ComposePrompt(src, "PERSONA")
			if err != nil {
				t.Fatal(err)
			}
			if p.Base != tt.want {
				t.Errorf("base = %q, want %q", p.Base, tt.want)
			}
			got := map[string]layer.Status{}
			for _, a := range arts {
				if a.Type != TypeSystemPrompt {
					continue
				}
				rel, _ := filepath.Rel(dir, a.Path)
				got[rel] = a.Status
				if a.Status != layer.StatusActive && a.Reason == "" {
					t.Errorf("%s is %s without a reason", rel, a.Status)
				}
				if strings.Contains(a.Reason, "SECRET") {
					t.Errorf("reason leaks the target: %s", a.Reason)
				}
			}
			if diff := cmp.Diff(tt.statuses, got, cmpEmpty); diff != "" {
				t.Errorf("SYSTEM.md statuses (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpEmpty = cmp.FilterValues(func(a, b map[string]layer.Status) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestAppendSystem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, map[string]string{
		"ws/a/b/.aerie/APPEND_SYSTEM.md": "nearest",
		"ws/a/.aerie/APPEND_SYSTEM.md":   "<dir>", // unreadable: skipped, the others still append
		"ws/.osprey/APPEND_SYSTEM.md":    "root osprey",
		"ws/.aerie/APPEND_SYSTEM.md":     "root aerie",
		"home/APPEND_SYSTEM.md":          "user",
		"home/SYSTEM.md":                 "BASE",
	})
	p, arts, err := ComposePrompt(promptLayers(t, dir), "PERSONA")
	if err != nil {
		t.Fatal(err)
	}
	want := "BASE\n\nnearest\n\nroot aerie\n\nroot osprey\n\nuser"
	if got := p.Text(); got != want {
		t.Errorf("prompt = %q, want %q", got, want)
	}
	m := byPath(arts)
	if a := m[filepath.Join(dir, "ws/a/.aerie/APPEND_SYSTEM.md")]; a.Status != layer.StatusSkipped || !strings.Contains(a.Reason, "not a regular file") {
		t.Errorf("unreadable append: %s %q", a.Status, a.Reason)
	}
}

func TestProjectInstructions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		files     map[string]string
		want      []string // fragment paths relative to ws
		truncated bool
		statuses  map[string]layer.Status
	}{
		{
			name:  "root down to the working directory",
			files: map[string]string{"ws/AGENTS.md": "root", "ws/a/AGENTS.md": "a", "ws/a/b/AGENTS.md": "b", "ws/a/b/c/AGENTS.md": "below the working directory"},
			want:  []string{"AGENTS.md", "a/AGENTS.md", "a/b/AGENTS.md"},
		},
		{
			name:     "CLAUDE.md where AGENTS.md is absent, and only there",
			files:    map[string]string{"ws/CLAUDE.md": "root claude", "ws/a/AGENTS.md": "a", "ws/a/CLAUDE.md": "shadowed"},
			want:     []string{"CLAUDE.md", "a/AGENTS.md"},
			statuses: map[string]layer.Status{"CLAUDE.md": layer.StatusActive, "a/AGENTS.md": layer.StatusActive, "a/CLAUDE.md": layer.StatusShadowed},
		},
		{
			name:     "an unreadable AGENTS.md is not replaced by CLAUDE.md",
			files:    map[string]string{"ws/AGENTS.md": "<dir>", "ws/CLAUDE.md": "claude", "ws/a/AGENTS.md": "a"},
			want:     []string{"a/AGENTS.md"},
			statuses: map[string]layer.Status{"AGENTS.md": layer.StatusSkipped, "CLAUDE.md": layer.StatusShadowed, "a/AGENTS.md": layer.StatusActive},
		},
		{
			name:     "a link out of the workspace is refused",
			files:    map[string]string{"ws/AGENTS.md": "->../home/secret", "home/secret": "SECRET"},
			statuses: map[string]layer.Status{"AGENTS.md": layer.StatusSkipped},
		},
		{
			name: "over the budget: the tail is cut, deeper files are dropped unread",
			files: map[string]string{
				"ws/AGENTS.md":     strings.Repeat("r", 20<<10),
				"ws/a/AGENTS.md":   strings.Repeat("a", 20<<10),
				"ws/a/b/AGENTS.md": "<fifo>", // never opened: over the budget
			},
			want:      []string{"AGENTS.md", "a/AGENTS.md"},
			truncated: true,
			statuses:  map[string]layer.Status{"AGENTS.md": layer.StatusActive, "a/AGENTS.md": layer.StatusActive, "a/b/AGENTS.md": layer.StatusSkipped},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			testenv.WriteTree(t, dir, tt.files)
			src := promptLayers(t, dir)
			p, arts, err := ComposePrompt(src, "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range p.Instructions {
				rel, _ := filepath.Rel(src.Workspace, f.Path)
				got = append(got, rel)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("instructions (-want +got):\n%s", diff)
			}
			if p.Truncated != tt.truncated {
				t.Errorf("truncated = %v", p.Truncated)
			}
			ins := p.InstructionText()
			if tt.truncated {
				if !strings.HasSuffix(ins, "\n"+TruncatedMarker) || len(ins) != InstructionBudget+len("\n"+TruncatedMarker) {
					t.Errorf("instructions: %d bytes ending %q", len(ins), ins[max(0, len(ins)-20):])
				}
			}
			if strings.Contains(p.Text(), "SECRET") || strings.Contains(p.Text(), "below the working directory") {
				t.Errorf("prompt has what it must not: %q", p.Text())
			}
			if tt.statuses != nil {
				st := map[string]layer.Status{}
				for _, a := range arts {
					if a.Type == TypeInstructions {
						rel, _ := filepath.Rel(src.Workspace, a.Path)
						st[rel] = a.Status
					}
				}
				if diff := cmp.Diff(tt.statuses, st); diff != "" {
					t.Errorf("statuses (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestCorpusInstructions loads real AGENTS.md files from public projects:
// each directory's file, root first, within the budget; the 34 KB
// openai-agents-js file alone goes over it and is truncated.
func TestCorpusInstructions(t *testing.T) {
	t.Parallel()
	corpus := corpusDir(t)
	tests := []struct {
		workDir   string
		files     int
		truncated bool
	}{
		{"openai__openai-agents-js", 1, true},
		{"openai__plugins/plugins/zoom", 1, false},
		{"pydantic__pydantic-ai/pydantic_ai_slim/pydantic_ai/toolsets", 3, false},
		{"pydantic__pydantic-ai/pydantic_ai_slim/pydantic_ai/providers", 3, false},
	}
	for _, tt := range tests {
		ws := filepath.Join(corpus, strings.Split(tt.workDir, "/")[0])
		p, arts, err := ComposePrompt(layer.Source{Workspace: ws, WorkDir: filepath.Join(corpus, tt.workDir)}, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Instructions) != tt.files || p.Truncated != tt.truncated {
			t.Errorf("%s: %d files, truncated %v; want %d, %v", tt.workDir, len(p.Instructions), p.Truncated, tt.files, tt.truncated)
		}
		for _, a := range arts {
			// CLAUDE.md links to AGENTS.md in these repositories: shadowed.
			if a.Status != layer.StatusActive && !(a.Name == "CLAUDE.md" && a.Status == layer.StatusShadowed) {
				t.Errorf("%s: %s %s: %s", tt.workDir, a.Path, a.Status, a.Reason)
			}
		}
		if n := len(p.InstructionText()); n > InstructionBudget+len("\n"+TruncatedMarker) {
			t.Errorf("%s: %d bytes of instructions", tt.workDir, n)
		}
	}
}

// corpusDir holds real AGENTS.md files (see testdata/agents-md/SOURCES.md).
func corpusDir(t *testing.T) string {
	t.Helper()
	return filepath.Join("testdata", "agents-md")
}
