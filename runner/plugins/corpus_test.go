package plugins

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/extensions"
)

// TestCorpus loads every published plugin in testdata/corpus, each through
// a layer whose plugins/ directory links to the plugin: every one loads,
// or is refused with its reason.
func TestCorpus(t *testing.T) {
	t.Parallel()
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
	set, err := Load([]extensions.Layer{{Name: "home", Dir: home, Kind: extensions.KindHome}}, Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	type row struct {
		Status extensions.Status
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
		"1password":         {extensions.StatusActive, FormatCodex, 1, ""},
		"codex":             {extensions.StatusActive, FormatClaude, 1, ""},
		"discord":           {extensions.StatusActive, FormatClaude, 1, ""},
		"example-plugin":    {extensions.StatusActive, FormatClaude, 1, ""},
		"gopls-lsp":         {extensions.StatusSkipped, "", 0, noManifest},
		"hookify":           {extensions.StatusActive, FormatClaude, 1, ""},
		"pr-review-toolkit": {extensions.StatusActive, FormatClaude, 0, ""},
		"ralph-loop":        {extensions.StatusActive, FormatClaude, 0, ""},
		"replayio":          {extensions.StatusActive, FormatCodex, 1, ""},
		"security-guidance": {extensions.StatusActive, FormatClaude, 0, ""},
		"supabase":          {extensions.StatusActive, FormatCodex, 1, ""},
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
