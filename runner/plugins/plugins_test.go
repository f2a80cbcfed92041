package plugins

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

func TestParseManifest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		format  Format
		doc     string
		want    *Manifest
		field   string // of the error, when one is expected
		errHas  string
		servers []MCPServer
	}{
		{name: "native minimal", format: FormatAerie, doc: "name: review\n",
			want: &Manifest{Format: FormatAerie, Name: "review", Skills: []string{"skills"}}},
		{name: "native full", format: FormatOpenVaala, doc: `name: review
version: 1.2.0
description: Code review helpers
skills: ./lib/skills/
mcp_servers:
  - id: review-docs
    type: stdio
    command: node
    args: ["${OPENVAALA_PLUGIN_ROOT}/mcp/server.mjs"]
  - id: remote
    type: http
    url: https://example.com/mcp
    tools: [a, b]
    required: true
    tool_timeout_seconds: 5
`,
			want: &Manifest{Format: FormatOpenVaala, Name: "review", Version: "1.2.0", Description: "Code review helpers",
				Skills: []string{"lib/skills"},
				MCPServers: []MCPServer{
					{ID: "review-docs", Type: TransportStdio, Command: "node", Args: []string{"${OPENVAALA_PLUGIN_ROOT}/mcp/server.mjs"}, StartupTimeoutSeconds: 30, ToolTimeoutSeconds: 300},
					{ID: "remote", Type: TransportHTTP, URL: "https://example.com/mcp", Tools: []string{"a", "b"}, Required: true, StartupTimeoutSeconds: 30, ToolTimeoutSeconds: 5},
				}}},
		{name: "native skills list", format: FormatAerie, doc: "name: a\nskills: [x, y/]\n",
			want: &Manifest{Format: FormatAerie, Name: "a", Skills: []string{"x", "y"}}},
		{name: "native name missing", format: FormatAerie, doc: "version: 1\n", field: "name", errHas: "required"},
		{name: "native name upper", format: FormatAerie, doc: "name: Review\n", field: "name", errHas: "lowercase"},
		{name: "native name double hyphen", format: FormatAerie, doc: "name: a--b\n", field: "name", errHas: "single hyphens"},
		{name: "native name reserved", format: FormatAerie, doc: "name: skill\n", field: "name", errHas: "reserved"},
		{name: "native unknown field", format: FormatAerie, doc: "name: a\nmcp_server: []\n", field: "mcp_server", errHas: "unknown field"},
		{name: "native not a mapping", format: FormatAerie, doc: "- a\n", errHas: "mapping"},
		{name: "native invalid yaml", format: FormatAerie, doc: "name: [\n", errHas: "invalid YAML"},
		{name: "native skills escape", format: FormatAerie, doc: "name: a\nskills: ../x\n", field: "skills", errHas: "leaves the plugin"},
		{name: "native skills absolute", format: FormatAerie, doc: "name: a\nskills: /etc\n", field: "skills", errHas: "relative"},
		{name: "native hooks not a map", format: FormatAerie, doc: "name: a\nhooks: [1]\n", field: "hooks", errHas: "mapping"},
		{name: "mcp executors", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - id: x\n    type: stdio\n    command: c\n    executors: [local]\n", field: "mcp_servers[0].executors", errHas: "run locally"},
		{name: "mcp bad id", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - id: a__b\n    type: stdio\n    command: c\n", field: "mcp_servers[0].id", errHas: "without __"},
		{name: "mcp no type", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - id: x\n    command: c\n", field: "mcp_servers[0].type", errHas: "required"},
		{name: "mcp stdio no command", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - id: x\n    type: stdio\n", field: "mcp_servers[0].command", errHas: "required"},
		{name: "mcp stdio with url", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - id: x\n    type: stdio\n    command: c\n    url: http://x\n", field: "mcp_servers[0].url", errHas: "not stdio"},
		{name: "mcp http with command", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - id: x\n    type: sse\n    command: c\n    url: http://x\n", field: "mcp_servers[0].command", errHas: "not sse"},
		{name: "mcp http bad url", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - id: x\n    type: http\n    url: ftp://x\n", field: "mcp_servers[0].url", errHas: "http(s)"},
		{name: "mcp duplicate id", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - {id: x, type: stdio, command: c}\n  - {id: x, type: stdio, command: d}\n", field: "mcp_servers[1].id", errHas: "already declared"},
		{name: "mcp negative timeout", format: FormatAerie, doc: "name: a\nmcp_servers:\n  - {id: x, type: stdio, command: c, tool_timeout_seconds: -1}\n", field: "mcp_servers[0].tool_timeout_seconds", errHas: "positive"},
		{name: "codex skills string", format: FormatCodex, doc: `{"name":"supabase","version":"0.1.10","description":"d","skills":"./skills/","mcpServers":"./.mcp.json"}`,
			want: &Manifest{Format: FormatCodex, Name: "supabase", Version: "0.1.10", Description: "d", Skills: []string{"skills"}}},
		{name: "claude skills list", format: FormatClaude, doc: `{"name":"x","skills":["./more","one/skill"]}`,
			want: &Manifest{Format: FormatClaude, Name: "x", Skills: []string{"skills", "more", "one/skill"}}},
		{name: "claude mcp paths", format: FormatClaude, doc: `{"name":"x","mcpServers":["./.mcp.json","more/servers.json","more/servers.json"]}`,
			want: &Manifest{Format: FormatClaude, Name: "x", Skills: []string{"skills"}, MCPFiles: []string{"more/servers.json"}}},
		{name: "claude mcp inline", format: FormatClaude, doc: `{"name":"x","mcpServers": {"a": {"command": "c"}}}`,
			want: &Manifest{Format: FormatClaude, Name: "x", Skills: []string{"skills"}, MCPInline: []byte(`{"a": {"command": "c"}}`)}},
		{name: "claude mcp escape", format: FormatClaude, doc: `{"name":"x","mcpServers":"../x.json"}`, field: "mcpServers", errHas: "leaves"},
		{name: "claude mcp number", format: FormatClaude, doc: `{"name":"x","mcpServers":1}`, field: "mcpServers", errHas: "object of servers"},
		{name: "claude no name", format: FormatClaude, doc: `{"version":"1"}`, field: "name", errHas: "required"},
		{name: "claude bad name", format: FormatClaude, doc: `{"name":"My Plugin"}`, field: "name", errHas: "lowercase"},
		{name: "claude version number", format: FormatClaude, doc: `{"name":"x","version":1}`, field: "version", errHas: "string"},
		{name: "codex skills object", format: FormatCodex, doc: `{"name":"x","skills":{}}`, field: "skills", errHas: "list of paths"},
		{name: "codex skills escape", format: FormatCodex, doc: `{"name":"x","skills":"../../etc"}`, field: "skills", errHas: "leaves"},
		{name: "codex invalid json", format: FormatCodex, doc: `{"name":`, errHas: "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseManifest(tt.format, "/p/manifest", []byte(tt.doc))
			if tt.want != nil {
				if err != nil {
					t.Fatalf("ParseManifest: %v", err)
				}
				got.Hooks = nil
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("manifest (-want +got):\n%s", diff)
				}
				return
			}
			var me layer.Problem
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a layer.Problem", err)
			}
			if me.File != "/p/manifest" || me.Field != tt.field || !strings.Contains(me.Reason, tt.errHas) {
				t.Errorf("err = %q (field %q), want field %q and a reason with %q", err, me.Field, tt.field, tt.errHas)
			}
		})
	}
}

func newLayer(t *testing.T, name string, kind layer.Kind, files map[string]string) layer.Layer {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, files)
	return layer.Layer{Name: name, Dir: dir, Kind: kind}
}

func TestManifestPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  Format
	}{
		{"aerie over everything", map[string]string{
			"plugins/p/.aerie-plugin/plugin.yaml":     "name: p\n",
			"plugins/p/.openvaala-plugin/plugin.yaml": "name: broken-but-ignored\n",
			"plugins/p/.codex-plugin/plugin.json":     "{",
			"plugins/p/.claude-plugin/plugin.json":    "{",
		}, FormatAerie},
		{"openvaala over codex", map[string]string{
			"plugins/p/.openvaala-plugin/plugin.yaml": "name: p\n",
			"plugins/p/.codex-plugin/plugin.json":     "{",
		}, FormatOpenVaala},
		{"codex over claude", map[string]string{
			"plugins/p/.codex-plugin/plugin.json":  `{"name":"p"}`,
			"plugins/p/.claude-plugin/plugin.json": "{",
		}, FormatCodex},
		{"claude alone", map[string]string{
			"plugins/p/.claude-plugin/plugin.json": `{"name":"p"}`,
		}, FormatClaude},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, err := Load([]layer.Layer{newLayer(t, "home", layer.KindHome, tt.files)}, Options{})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(set.Plugins) != 1 || set.Plugins[0].Format != tt.want {
				t.Fatalf("plugins = %+v, want one of format %s", set.Plugins, tt.want)
			}
		})
	}
}

func TestLoadLayers(t *testing.T) {
	t.Parallel()
	near := newLayer(t, "spec[0]", layer.KindSpec, map[string]string{
		"plugins/review/.aerie-plugin/plugin.yaml": `name: review
version: "2"
hooks:
  SessionStart:
    - hooks:
        - type: command
          script: ./hooks/inject
          args: [SessionStart]
mcp_servers:
  - id: review-docs
    type: stdio
    command: ${AERIE_PLUGIN_ROOT}/bin/server
    args: ["${OPENVAALA_PLUGIN_ROOT}/mcp/server.mjs", "${HOME}"]
    env: {DATA: "${AERIE_PLUGIN_ROOT}/data", AERIE_PLUGIN_ROOT: mine}
`,
		"plugins/review/hooks/inject":               "#!/bin/sh\necho hi\n",
		"plugins/review/skills/checklist/SKILL.md":  "---\ndescription: d\n---\n",
		"plugins/.hidden/.aerie-plugin/plugin.yaml": "name: [",
		"plugins/nomanifest/README.md":              "x",
		"plugins/off/.claude-plugin/plugin.json":    "{ broken",
	})
	far := newLayer(t, "home", layer.KindHome, map[string]string{
		"plugins/review/.aerie-plugin/plugin.yaml": "name: review\nversion: \"1\"\n",
		"plugins/alpha/.codex-plugin/plugin.json":  `{"name":"alpha","skills":["extra","missing"]}`,
		"plugins/alpha/extra/one/SKILL.md":         "---\ndescription: d\n---\n",
	})
	set, err := Load([]layer.Layer{near, far}, Options{WorkDir: "/w", Disabled: []string{"off"}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var names []string
	for _, p := range set.Plugins {
		names = append(names, p.Name+"@"+p.Version)
	}
	if diff := cmp.Diff([]string{"alpha@", "review@2"}, names); diff != "" {
		t.Fatalf("plugins (-want +got):\n%s", diff)
	}
	alpha, review := set.Plugins[0], set.Plugins[1]
	if diff := cmp.Diff([]SkillRoot{{Dir: filepath.Join(far.Dir, "plugins/alpha/extra"), Namespace: "alpha"}}, alpha.Skills); diff != "" {
		t.Errorf("alpha skills (-want +got):\n%s", diff)
	}
	root := filepath.Join(near.Dir, "plugins", "review")
	if diff := cmp.Diff([]SkillRoot{{Dir: filepath.Join(root, "skills"), Namespace: "review"}}, review.Skills); diff != "" {
		t.Errorf("review skills (-want +got):\n%s", diff)
	}
	wantServer := MCPServer{ID: "review-docs", Type: TransportStdio, Command: root + "/bin/server",
		Args:                  []string{root + "/mcp/server.mjs", "${HOME}"},
		Env:                   map[string]string{"DATA": root + "/data", "AERIE_PLUGIN_ROOT": "mine", "OPENVAALA_PLUGIN_ROOT": root},
		StartupTimeoutSeconds: 30, ToolTimeoutSeconds: 300, Plugin: "review",
		File: filepath.Join(root, ".aerie-plugin", "plugin.yaml")}
	if diff := cmp.Diff([]MCPServer{wantServer}, set.MCPServers()); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	hs := set.Hooks()
	if len(hs) != 1 {
		t.Fatalf("hooks = %+v, want one", hs)
	}
	if !strings.Contains(hs[0].Command, filepath.Join(root, "hooks", "inject")) ||
		!cmp.Equal(hs[0].Source.Env, []string{"AERIE_PLUGIN_ROOT=" + root, "OPENVAALA_PLUGIN_ROOT=" + root}) {
		t.Errorf("hook = %+v", hs[0])
	}
	status := map[string]string{}
	for _, a := range set.Artifacts() {
		if a.Type == TypeComponent {
			if a.Layer+"/"+a.Name != "home/alpha skills" || a.Status != layer.StatusActive {
				t.Errorf("component artifact %+v, want alpha's skills, active", a)
			}
			continue
		}
		if a.Type != TypePlugin {
			t.Errorf("artifact type %q", a.Type)
		}
		status[a.Layer+"/"+a.Name] = string(a.Status)
	}
	want := map[string]string{
		"spec[0]/review": "active", "spec[0]/nomanifest": "skipped", "spec[0]/off": "inactive",
		"home/review": "shadowed", "home/alpha": "active",
	}
	if diff := cmp.Diff(want, status); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	// The shadowed review names the nearer one's artifact, which lists it.
	arts := map[string]layer.Artifact{}
	for _, a := range set.Artifacts() {
		if a.Type == TypeComponent {
			continue
		}
		arts[a.Layer+"/"+a.Name] = a
	}
	nearReview, farReview := arts["spec[0]/review"], arts["home/review"]
	if farReview.ShadowedBy != nearReview.Path || !cmp.Equal(nearReview.Shadowed, []layer.Copy{{Layer: "home", Path: farReview.Path}}) {
		t.Errorf("near review shadows %+v; far review shadowed by %q, want %q", nearReview.Shadowed, farReview.ShadowedBy, nearReview.Path)
	}
	// A plugin whose manifest was read has its digest, as every file the
	// report lists; one without a manifest has none.
	for name, a := range arts {
		data, err := os.ReadFile(a.Path)
		switch {
		case name == "spec[0]/nomanifest":
			if a.Digest != "" {
				t.Errorf("%s: digest %q without a manifest", name, a.Digest)
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case a.Digest != layer.Digest(data):
			t.Errorf("%s: digest %q, want the manifest's %q", name, a.Digest, layer.Digest(data))
		}
	}
}

// TestArtifactReasonsSanitized: a manifest error quoting a credential and
// control characters is reported without them.
func TestArtifactReasonsSanitized(t *testing.T) {
	t.Parallel()
	l := newLayer(t, "proj", layer.KindProject, map[string]string{
		"plugins/leak/.aerie-plugin/plugin.yaml": "name: \"leak\\e[2J token=hunter2\"\n",
	})
	set, _ := Load([]layer.Layer{l}, Options{})
	if len(set.Entries) != 1 || !strings.Contains(set.Entries[0].Reason, "hunter2") {
		t.Fatalf("entries %+v", set.Entries)
	}
	if r := set.Artifacts()[0].Reason; strings.Contains(r, "hunter2") || strings.ContainsRune(r, '\x1b') || !strings.Contains(r, "[redacted]") {
		t.Errorf("reason %q", r)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		kind   layer.Kind
		files  map[string]string
		errHas string // "" means no error
		reason string // of the plugin's artifact
	}{
		{"broken manifest in home", layer.KindHome, map[string]string{
			"plugins/p/.aerie-plugin/plugin.yaml": "name: p\nversion: [1\n"}, "plugin.yaml", "invalid YAML"},
		{"broken manifest in project is skipped", layer.KindProject, map[string]string{
			"plugins/p/.aerie-plugin/plugin.yaml": "name: p\nversion: [1\n"}, "", "invalid YAML"},
		{"name differs from directory", layer.KindHome, map[string]string{
			"plugins/p/.codex-plugin/plugin.json": `{"name":"q"}`}, `name: name "q" must equal`, "directory name"},
		{"hook script escaping", layer.KindHome, map[string]string{
			"plugins/p/.aerie-plugin/plugin.yaml": "name: p\nhooks:\n  Stop:\n    - hooks:\n        - type: command\n          script: ../../evil.sh\n"}, "hooks.Stop[0].hooks[0].script", "plugin"},
		{"same mcp id in two plugins", layer.KindHome, map[string]string{
			"plugins/a/.aerie-plugin/plugin.yaml": "name: a\nmcp_servers: [{id: x, type: stdio, command: c}]\n",
			"plugins/b/.aerie-plugin/plugin.yaml": "name: b\nmcp_servers: [{id: x, type: http, url: 'http://h'}]\n",
		}, `plugins a and b both declare the MCP server "x"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, err := Load([]layer.Layer{newLayer(t, "l", tt.kind, tt.files)}, Options{})
			if tt.errHas == "" && err != nil {
				t.Fatalf("Load: %v", err)
			}
			if tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)) {
				t.Fatalf("Load error = %v, want one with %q", err, tt.errHas)
			}
			if tt.reason != "" {
				a := set.Artifacts()
				if len(a) != 1 || a[0].Status != layer.StatusSkipped || !strings.Contains(a[0].Reason, tt.reason) {
					t.Errorf("artifacts = %+v, want one skipped with %q", a, tt.reason)
				}
			}
		})
	}
}

// TestDisabledBrokenPluginLoads: disabling is how a user gets past a
// plugin whose manifest keeps the configuration from loading.
func TestDisabledBrokenPluginLoads(t *testing.T) {
	t.Parallel()
	l := newLayer(t, "home", layer.KindHome, map[string]string{"plugins/p/.aerie-plugin/plugin.yaml": "name: p\nbogus: 1\n"})
	if _, err := Load([]layer.Layer{l}, Options{}); err == nil {
		t.Fatal("Load of a broken enabled plugin succeeded")
	}
	set, err := Load([]layer.Layer{l}, Options{Disabled: []string{"p"}})
	if err != nil {
		t.Fatalf("Load with the plugin disabled: %v", err)
	}
	if a := set.Artifacts(); len(a) != 1 || a[0].Status != layer.StatusInactive || !strings.Contains(a[0].Reason, "disabled; ") {
		t.Errorf("artifacts = %+v", a)
	}
}

// TestProjectPluginSymlinkOut: a project layer's plugin that links out of
// the layer is not read.
func TestProjectPluginSymlinkOut(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	testenv.WriteTree(t, outside, map[string]string{".aerie-plugin/plugin.yaml": "name: p\n"})
	l := newLayer(t, ".aerie", layer.KindProject, map[string]string{"plugins/": ""})
	if err := os.Symlink(outside, filepath.Join(l.Dir, "plugins", "p")); err != nil {
		t.Fatal(err)
	}
	set, err := Load([]layer.Layer{l}, Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(set.Plugins) != 0 {
		t.Errorf("plugins = %+v, want none", set.Plugins)
	}
	// The same link in the user's own layer is followed.
	h := newLayer(t, "home", layer.KindHome, map[string]string{"plugins/": ""})
	if err := os.Symlink(outside, filepath.Join(h.Dir, "plugins", "p")); err != nil {
		t.Fatal(err)
	}
	if set, err := Load([]layer.Layer{h}, Options{}); err != nil || len(set.Plugins) != 1 {
		t.Errorf("home layer: plugins = %+v, err = %v", set.Plugins, err)
	}
}
