package plugins

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
)

func TestParseComponents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      []string
		want    Components
		wantErr string
	}{
		{in: nil, want: Components{}},
		{in: []string{"skills"}, want: Components{ComponentSkills}},
		{in: []string{"mcp", " hooks", "skills", "mcp"}, want: Components{ComponentSkills, ComponentHooks, ComponentMCP}},
		{in: []string{"agents", "all"}, want: Components(AllComponents)},
		{in: []string{"skills", "Skills"}, wantErr: `item 1: unknown component "Skills"; want skills, agents, commands, hooks, mcp or all`},
		{in: []string{""}, wantErr: `item 0: unknown component ""`},
	}
	for _, tt := range tests {
		got, err := ParseComponents(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseComponents(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseComponents(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseComponents(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	if got, err := SplitComponents("commands,agents"); err != nil || !got.Has(ComponentAgents) || got.Has(ComponentSkills) {
		t.Errorf("SplitComponents = %v, %v", got, err)
	}
}

// TestLoadComponents loads a Claude plugin's skills only when the
// configuration's components, or its install record's, name them.
func TestLoadComponents(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"plugins/a/.claude-plugin/plugin.json": `{"name":"a"}`,
		"plugins/a/skills/x/SKILL.md":          "---\nname: x\ndescription: d\n---\n",
		"plugins/a/agents/r.md":                "---\nname: r\n---\n",
		"plugins/a/hooks/hooks.json":           "{}",
		"plugins/b/.claude-plugin/plugin.json": `{"name":"b"}`,
		"plugins/b/skills/y/SKILL.md":          "---\nname: y\ndescription: d\n---\n",
		"plugins/b/" + InstallFile:             "source: /src\ninstalled_at: 2026-01-01T00:00:00Z\nenabled: true\ncomponents: [skills, agents]\n",
	}
	l := newLayer(t, "home", layer.KindHome, files)
	skills := func(o Options) map[string]int {
		set, err := Load([]layer.Layer{l}, o)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, p := range set.Plugins {
			out[p.Name] = len(p.Skills)
		}
		return out
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1}, skills(Options{})); diff != "" {
		t.Errorf("default (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 0, "b": 1}, skills(Options{Components: Components{ComponentHooks}})); diff != "" {
		t.Errorf("hooks only (-want +got):\n%s", diff)
	}
	set, _ := Load([]layer.Layer{l}, Options{})
	for _, e := range set.Entries {
		want := DefaultComponents
		if e.Name == "b" {
			want = Components{ComponentSkills, ComponentAgents}
		}
		if diff := cmp.Diff(want, e.Components); diff != "" {
			t.Errorf("entry %s components (-want +got):\n%s", e.Name, diff)
		}
	}
}

// TestComponentStates reports each component a Claude plugin ships:
// loaded, or not enabled by components.
func TestComponentStates(t *testing.T) {
	t.Parallel()
	l := newLayer(t, "home", layer.KindHome, map[string]string{
		"plugins/a/.claude-plugin/plugin.json": `{"name":"a"}`,
		"plugins/a/skills/x/SKILL.md":          "---\nname: x\ndescription: d\n---\n",
		"plugins/a/agents/r.md":                "---\nname: r\n---\n",
		"plugins/a/hooks/hooks.json":           "{}",
		"plugins/a/commands":                   "not a directory",
	})
	set, err := Load([]layer.Layer{l}, Options{Components: Components{ComponentSkills, ComponentHooks}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range set.Entries {
		for _, c := range e.ComponentStates {
			got[e.Name+":"+string(c.Component)] = string(c.Status) + ": " + c.Reason
		}
	}
	want := map[string]string{
		"a:skills": "active: ",
		"a:agents": `inactive: not enabled by components; add "agents" to [plugins] components or aerie plugin install --components`,
		"a:hooks":  "active: declares no hooks",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("component states (-want +got):\n%s", diff)
	}
}

// TestLoadMCP collects a Claude plugin's MCP server declarations when its
// components include mcp: its .mcp.json, the files its manifest names and
// the servers it declares itself; a named file that is missing is
// reported.
func TestLoadMCP(t *testing.T) {
	t.Parallel()
	l := newLayer(t, "home", layer.KindHome, map[string]string{
		"plugins/a/.claude-plugin/plugin.json": `{"name":"a","mcpServers":["more.json","gone.json"]}`,
		"plugins/a/.mcp.json":                  `{"x": {"command": "c"}}`,
		"plugins/a/more.json":                  `{"y": {"command": "d"}}`,
		"plugins/b/.claude-plugin/plugin.json": `{"name":"b","mcpServers":{"z": {"type": "http", "url": "https://z"}}}`,
		"plugins/c/.claude-plugin/plugin.json": `{"name":"c"}`,
		"plugins/c/.mcp.json":                  `{}`,
	})
	for _, tc := range []struct {
		comps Components
		want  map[string][]string
		state map[string]string
	}{
		{comps: Components{ComponentMCP}, want: map[string][]string{
			"a": {"plugins/a/.mcp.json", `{"x": {"command": "c"}}`, "plugins/a/more.json", `{"y": {"command": "d"}}`},
			"b": {"plugins/b/.claude-plugin/plugin.json", `{"z": {"type": "http", "url": "https://z"}}`},
			"c": {"plugins/c/.mcp.json", `{}`},
		}, state: map[string]string{"a:mcp": "skipped"}},
		{comps: Components{ComponentSkills}, want: map[string][]string{}, state: map[string]string{"a:mcp": "inactive", "c:mcp": "inactive"}},
	} {
		set, err := Load([]layer.Layer{l}, Options{Components: tc.comps})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, p := range set.Plugins {
			for _, s := range p.ClaudeMCP {
				got[p.Name] = append(got[p.Name], strings.TrimPrefix(s.File, l.Dir+"/"), string(s.Data))
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%v: declarations (-want +got):\n%s", tc.comps, diff)
		}
		states := map[string]string{}
		for _, e := range set.Entries {
			for _, c := range e.ComponentStates {
				if c.Component == ComponentMCP {
					states[e.Name+":mcp"] = string(c.Status)
					if c.Status == layer.StatusSkipped && !strings.Contains(c.Reason, "gone.json") {
						t.Errorf("reason %q does not name the missing file", c.Reason)
					}
				}
			}
		}
		if diff := cmp.Diff(tc.state, states); diff != "" {
			t.Errorf("%v: states (-want +got):\n%s", tc.comps, diff)
		}
	}
}

// TestLoadComponentsBadRecord skips a plugin whose install record names
// an unknown component, with the file and the fix.
func TestLoadComponentsBadRecord(t *testing.T) {
	t.Parallel()
	l := newLayer(t, "home", layer.KindHome, map[string]string{
		"plugins/a/.claude-plugin/plugin.json": `{"name":"a"}`,
		"plugins/a/" + InstallFile:             "source: /src\ninstalled_at: 2026-01-01T00:00:00Z\nenabled: true\ncomponents: [lsp]\n",
	})
	_, err := Load([]layer.Layer{l}, Options{})
	if err == nil || !strings.Contains(err.Error(), InstallFile) || !strings.Contains(err.Error(), `unknown component "lsp"`) ||
		!strings.Contains(err.Error(), "--components") {
		t.Fatalf("Load: %v", err)
	}
}

func FuzzParseComponents(f *testing.F) {
	f.Add("skills,agents")
	f.Add("all, mcp")
	f.Add(",x")
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := SplitComponents(s)
		if err != nil {
			if !strings.Contains(err.Error(), "unknown component") {
				t.Fatalf("error %v does not say what is wrong", err)
			}
			return
		}
		seen := map[Component]bool{}
		last := -1
		for _, c := range cs {
			i := indexOf(c)
			if i < 0 || seen[c] || i <= last {
				t.Fatalf("SplitComponents(%q) = %v: not a set in order", s, cs)
			}
			seen[c], last = true, i
		}
	})
}

func indexOf(c Component) int {
	for i, a := range AllComponents {
		if a == c {
			return i
		}
	}
	return -1
}

// TestHooksStates: a plugin's hooks.json that does not parse is skipped
// with its reason, and a project layer's plugin runs no hooks; the plugin
// and its other components load either way.
func TestHooksStates(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"plugins/a/.claude-plugin/plugin.json": `{"name":"a"}`,
		"plugins/a/hooks/hooks.json":           `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}`,
		"plugins/b/.claude-plugin/plugin.json": `{"name":"b"}`,
		"plugins/b/hooks/hooks.json":           `{"hooks": [`,
	}
	for _, tc := range []struct {
		kind  layer.Kind
		want  map[string]string
		hooks int
	}{
		{layer.KindHome, map[string]string{
			"a hooks Stop[0].hooks[0]": "active: ",
			"b hooks":                  "skipped: invalid YAML",
		}, 1},
		{layer.KindProject, map[string]string{
			"a hooks": "skipped: " + projectHooks,
			"b hooks": "skipped: " + projectHooks,
		}, 0},
	} {
		l := newLayer(t, "l", tc.kind, files)
		set, err := Load([]layer.Layer{l}, Options{Components: Components{ComponentHooks}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range set.Entries {
			if e.Status != layer.StatusActive {
				t.Errorf("%s: plugin %s %s: %s", tc.kind, e.Name, e.Status, e.Reason)
			}
			for _, c := range e.ComponentStates {
				got[c.Name] = string(c.Status) + ": " + c.Reason
			}
		}
		for name, want := range tc.want {
			if !strings.HasPrefix(got[name], want) {
				t.Errorf("%s: %s = %q, want %q…", tc.kind, name, got[name], want)
			}
		}
		if len(got) != len(tc.want) || len(set.Hooks()) != tc.hooks {
			t.Errorf("%s: states %v, %d hooks; want %d hooks", tc.kind, got, len(set.Hooks()), tc.hooks)
		}
	}
}
