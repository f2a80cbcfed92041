package plugins

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/pluginroot"
)

// TestCorpus loads every published plugin in testdata/corpus, each through
// a layer whose plugins/ directory links to the plugin: every one loads,
// or is refused with its reason.
func TestCorpus(t *testing.T) {
	t.Parallel()
	home := corpusHome(t)
	set, err := Load([]layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}}, Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	type row struct {
		Status layer.Status
		Format Format
		Skills int
		Reason string
	}
	got := map[string]row{}
	for _, e := range set.Entries {
		got[e.Name] = row{Status: e.Status, Format: e.Format, Reason: e.Reason}
	}
	for _, p := range set.Plugins {
		r := got[p.Name]
		r.Skills = len(p.Skills)
		got[p.Name] = r
	}
	const noManifest = "no plugin manifest (.aerie-plugin/plugin.yaml, .openvaala-plugin/plugin.yaml, .codex-plugin/plugin.json or .claude-plugin/plugin.json)"
	want := map[string]row{
		"1password":         {layer.StatusActive, FormatCodex, 1, ""},
		"codex":             {layer.StatusActive, FormatClaude, 1, ""},
		"discord":           {layer.StatusActive, FormatClaude, 1, ""},
		"example-plugin":    {layer.StatusActive, FormatClaude, 1, ""},
		"gopls-lsp":         {layer.StatusSkipped, "", 0, noManifest},
		"hookify":           {layer.StatusActive, FormatClaude, 1, ""},
		"pr-review-toolkit": {layer.StatusActive, FormatClaude, 0, ""},
		"ralph-loop":        {layer.StatusActive, FormatClaude, 0, ""},
		"replayio":          {layer.StatusActive, FormatCodex, 1, ""},
		"security-guidance": {layer.StatusActive, FormatClaude, 0, ""},
		"supabase":          {layer.StatusActive, FormatCodex, 1, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("corpus (-want +got):\n%s", diff)
	}
	// Codex and Claude plugins contribute no hooks and no MCP servers,
	// whatever else they ship.
	if len(set.Hooks()) != 0 || len(set.MCPServers()) != 0 {
		t.Errorf("hooks %v, servers %v: want none", set.Hooks(), set.MCPServers())
	}
}

// corpusHome is a home layer whose plugins/ directory links to every
// published plugin in testdata/corpus.
func corpusHome(t *testing.T) string {
	t.Helper()
	var dirs []string
	for _, pattern := range []string{"testdata/corpus/*/*/plugins/*", "testdata/corpus/*/*/external_plugins/*"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, m...)
	}
	sort.Strings(dirs)
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(home, Dir, filepath.Base(d))); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// TestCorpusHooks loads the corpus's plugins with their hooks: each
// plugin's hooks/hooks.json loads, every hook reported with its event,
// matcher and status, and what aerie cannot run (security-guidance's
// conditional, asynchronous hooks) skipped with its reason while the
// rest of the file runs. ${CLAUDE_PLUGIN_ROOT} is the plugin's directory.
func TestCorpusHooks(t *testing.T) {
	t.Parallel()
	home := corpusHome(t)
	set, err := Load([]layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}},
		Options{WorkDir: "/w", Components: Components{ComponentHooks}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var got []string
	for _, e := range set.Entries {
		for _, c := range e.ComponentStates {
			if c.Component != ComponentHooks {
				continue
			}
			line := fmt.Sprintf("%s %s [%s] %s", c.Name, c.Event, c.Matcher, c.Status)
			if c.Status != layer.StatusActive {
				line += ": " + c.Reason[:min(len(c.Reason), 40)]
			}
			got = append(got, line)
		}
	}
	const sg = "security-guidance hooks "
	want := []string{
		"codex hooks SessionStart[0].hooks[0] SessionStart [] active",
		"codex hooks SessionEnd[0].hooks[0] SessionEnd [] active",
		"codex hooks Stop[0].hooks[0] Stop [] active",
		"hookify hooks PreToolUse[0].hooks[0] PreToolUse [] active",
		"hookify hooks PostToolUse[0].hooks[0] PostToolUse [] active",
		"hookify hooks Stop[0].hooks[0] Stop [] active",
		"hookify hooks UserPromptSubmit[0].hooks[0] UserPromptSubmit [] active",
		"ralph-loop hooks Stop[0].hooks[0] Stop [] active",
		sg + "SessionStart[0].hooks[0] SessionStart [] active",
		sg + "UserPromptSubmit[0].hooks[0] UserPromptSubmit [] active",
		sg + "PostToolUse[0].hooks[0] PostToolUse [Edit|Write|MultiEdit|NotebookEdit] active",
		sg + "PostToolUse[1].hooks[0] PostToolUse [Bash] skipped: if: line 40: a condition (if) aerie cann",
		sg + "PostToolUse[1].hooks[1] PostToolUse [Bash] skipped: if: line 48: a condition (if) aerie cann",
		sg + "PostToolUse[1].hooks[2] PostToolUse [Bash] skipped: if: line 56: a condition (if) aerie cann",
		sg + "PostToolUse[1].hooks[3] PostToolUse [Bash] skipped: if: line 64: a condition (if) aerie cann",
		sg + "PostToolUse[1].hooks[4] PostToolUse [Bash] skipped: if: line 72: a condition (if) aerie cann",
		sg + "Stop[0].hooks[0] Stop [] skipped: asyncRewake: line 87: asynchronous hooks",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook states (-want +got):\n%s", diff)
	}
	if n := len(set.Hooks()); n != 11 {
		t.Errorf("%d hooks run, want 11", n)
	}
	for _, h := range set.Hooks() {
		if strings.Contains(h.Command, "${CLAUDE_PLUGIN_ROOT}") || !slices.Contains(h.Source.Env, pluginroot.VarClaude+"="+h.Source.Root) {
			t.Errorf("hook %s: command %q, env %v: want the plugin root in both", h.ID, h.Command, h.Source.Env)
		}
	}
}
