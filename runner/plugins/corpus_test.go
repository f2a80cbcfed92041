package plugins

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
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
