package session

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/plugins"
	"github.com/aerie-run/aerie/runner/skills"
)

// TestListingLoadsAlike: every loader finds with the load's listing of
// the layers exactly what it finds without one — plugins, their skills,
// MCP declarations, hooks, skills — in layers that hold them and layers
// that do not.
func TestListingLoadsAlike(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	files := map[string]string{
		"ws/.aerie/plugins/p/.claude-plugin/plugin.json": `{"name":"p"}`,
		"ws/.aerie/plugins/p/skills/s/SKILL.md":          "---\nname: s\ndescription: Use it.\n---\nBody.\n",
		"ws/.aerie/mcp_servers/x.yaml":                   "id: x\ntype: stdio\ncommand: x-server\n",
		"ws/.aerie/hooks/h.yaml":                         "hooks:\n  Stop:\n    - hooks:\n        - type: command\n          command: make test\n",
		"ws/.aerie/skills/a/SKILL.md":                    "---\nname: a\ndescription: Use a.\n---\n",
		"ws/.osprey/SYSTEM.md":                           "System.\n",
		"home/hooks.toml":                                "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"true\"\n",
		"home/mcp_servers/y.yaml":                        "id: y\ntype: stdio\ncommand: y-server\n",
		"home/skills/b/SKILL.md":                         "---\nname: b\ndescription: Use b.\n---\n",
		"home/plugins/q/.claude-plugin/plugin.json":      `{"name":"q"}`,
	}
	testenv.WriteTree(t, dir, files)
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: ws, Workspace: ws, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	listing := layer.ListLayers(layers, ws)
	defer listing.Close()
	set, err := extensions.Load(layer.Source{Layers: layers, Workspace: ws, WorkDir: ws}, extensions.Options{Persona: "p"})
	if err != nil {
		t.Fatal(err)
	}

	type loaded struct {
		Plugins *plugins.Set
		Hooks   hooks.Loaded
		MCP     mcp.Config
		Skills  *skills.Set
		// Available are the skills offered, which the JSON leaves out.
		Available []skills.Skill
	}
	load := func(ls *layer.Listing) loaded {
		var out loaded
		var err error
		if out.Plugins, err = plugins.Load(layers, plugins.Options{WorkDir: ws, Listing: ls}); err != nil {
			t.Fatal(err)
		}
		if out.Hooks, err = hooks.Load(layers, set.Pins, hooks.LoadOptions{Dir: ws, Workspace: ws, Listing: ls}); err != nil {
			t.Fatal(err)
		}
		if out.MCP, err = mcp.Load(layers, set.Pins, mcp.LoadOptions{Dir: ws, Listing: ls}); err != nil {
			t.Fatal(err)
		}
		var roots []skills.Root
		for _, r := range out.Plugins.SkillRoots() {
			roots = append(roots, skills.Root{Name: "plugin " + r.Namespace, Dir: r.Dir, Namespace: r.Namespace})
		}
		if out.Skills, err = skills.DiscoverIn(skills.Roots(layers, skills.Options{WorkDir: ws, Workspace: ws, Plugins: roots, Listing: ls}), ls); err != nil {
			t.Fatal(err)
		}
		out.Available = out.Skills.Skills()
		return out
	}
	// What each loader reports, as its JSON says it.
	encode := func(l loaded) string {
		b, err := json.MarshalIndent(l, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want, got := load(nil), load(listing)
	if diff := cmp.Diff(encode(want), encode(got)); diff != "" {
		t.Errorf("with the listing (-without +with):\n%s", diff)
	}
	if got.Skills.Len() != 3 || len(got.Hooks.Files) != 2 || len(got.MCP.Files) != 2 || len(got.Plugins.Entries) != 2 {
		t.Errorf("found %d skills, %d hook files, %d MCP declarations, %d plugins; want 3, 2, 2, 2",
			got.Skills.Len(), len(got.Hooks.Files), len(got.MCP.Files), len(got.Plugins.Entries))
	}
}
