package session

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/mcp"
	"github.com/aerie-run/aerie/runner/plugins"
)

// TestLoadClaudePluginMCPVariables: the same plugin resolves ${TOKEN}
// from the variables it is given in the home layer, and none in a project
// layer, whose repository wrote it.
func TestLoadClaudePluginMCPVariables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	decl := `{"NAME": {"type": "http", "url": "https://mcp.example.com", "headers": {"Authorization": "Bearer ${TOKEN}"}}}`
	testenv.WriteTree(t, dir, map[string]string{
		"home/plugins/mine/.claude-plugin/plugin.json":        `{"name": "mine"}`,
		"home/plugins/mine/.mcp.json":                         strings.Replace(decl, "NAME", "mine", 1),
		"ws/.aerie/plugins/theirs/.claude-plugin/plugin.json": `{"name": "theirs"}`,
		"ws/.aerie/plugins/theirs/.mcp.json":                  strings.Replace(decl, "NAME", "theirs", 1),
	})
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: ws, Workspace: ws, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	x, err := LoadExtensions(LoadOptions{
		Layers: layers, Workspace: ws, Dir: ws, PluginComponents: plugins.Components{plugins.ComponentMCP},
		MCPVariables: mcp.LocalVariables(func(k string) string { return map[string]string{"TOKEN": "tok-0123456789"}[k] }),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(x.MCP.Servers) != 1 || x.MCP.Servers[0].ID != "mine" || x.MCP.Servers[0].Headers["Authorization"] != "Bearer tok-0123456789" {
		t.Fatalf("servers %+v", x.MCP.Servers)
	}
	found := false
	for _, f := range x.MCP.Files {
		found = found || f.ID == "theirs"
		if f.ID == "theirs" && (f.Status != layer.StatusSkipped || !strings.Contains(f.Reason, "${TOKEN} is not resolved: a plugin in the project's layer")) {
			t.Errorf("theirs: %+v", f)
		}
	}
	if !found {
		t.Errorf("the project plugin's server is not reported: %+v", x.MCP.Files)
	}
}

// TestLoadClaudePluginMCPProjectStdio: a Claude plugin of a project layer
// starts no stdio server, whose command the repository chose; its http
// server is used, and the same stdio server of the home layer runs.
func TestLoadClaudePluginMCPProjectStdio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	testenv.WriteTree(t, dir, map[string]string{
		"home/plugins/mine/.claude-plugin/plugin.json":        `{"name": "mine"}`,
		"home/plugins/mine/.mcp.json":                         `{"mine": {"command": "${CLAUDE_PLUGIN_ROOT}/server"}}`,
		"ws/.aerie/plugins/theirs/.claude-plugin/plugin.json": `{"name": "theirs"}`,
		"ws/.aerie/plugins/theirs/.mcp.json": `{"run": {"command": "${CLAUDE_PLUGIN_ROOT}/server"},
			"web": {"type": "http", "url": "https://mcp.example.com"}}`,
	})
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: ws, Workspace: ws, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	x, err := LoadExtensions(LoadOptions{
		Layers: layers, Workspace: ws, Dir: ws, PluginComponents: plugins.Components{plugins.ComponentMCP},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range x.MCP.Servers {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "mine,web" {
		t.Errorf("servers %v, want mine,web", ids)
	}
	found := false
	for _, f := range x.MCP.Files {
		if f.ID == "run" {
			found = true
			if f.Status != layer.StatusSkipped || f.Reason != plugins.ProjectMCP {
				t.Errorf("run: %+v", f)
			}
		}
	}
	if !found {
		t.Errorf("the project plugin's stdio server is not reported: %+v", x.MCP.Files)
	}
}
