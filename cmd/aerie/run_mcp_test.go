package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// everythingVersion pins the published MCP reference server the test runs.
const everythingVersion = "2026.8.31"

// npmPackage installs the npm package name@version into a cache outside
// the repository ($AERIE_NPM_CACHE, or ~/.cache/aerie/npm), once, and
// returns its directory. Without node and npm the test fails (it is skipped
// only under -short) with instructions.
func npmPackage(t *testing.T, name, version string) string {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			if testing.Short() {
				t.Skipf("integration test: %s not found", bin)
			}
			t.Fatalf("%s not found: install Node.js and npm (apt-get install -y nodejs npm) to run the MCP server tests", bin)
		}
	}
	cache := os.Getenv("AERIE_NPM_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(dir, "aerie", "npm")
	}
	dir := filepath.Join(cache, name+"@"+version)
	pkg := filepath.Join(dir, "node_modules", filepath.FromSlash(name))
	if _, err := os.Stat(filepath.Join(pkg, "package.json")); err == nil {
		return pkg
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, name+"@"+version)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("npm install %s@%s: %v\n%s", name, version, err, out.String())
	}
	return pkg
}

// TestRunPublishedMCPServer drives the tools of a real, published MCP server
// over stdio, started through the executor, from aerie run.
func TestRunPublishedMCPServer(t *testing.T) {
	t.Parallel()
	pkg := npmPackage(t, "@modelcontextprotocol/server-everything", everythingVersion)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	e := newE2E(t,
		toolTurn(
			call("echo", "mcp__everything__echo", map[string]any{"message": "hello from aerie"}),
			call("sum", "mcp__everything__get-sum", map[string]any{"a": 2, "b": 40}),
		),
		answer("the server answered"),
	)
	testenv.WriteFile(t, filepath.Join(e.home, "mcp_servers/everything.yaml"), "id: everything\ntype: stdio\ncommand: "+node+"\nargs: ["+filepath.Join(pkg, "dist", "index.js")+", stdio]\nrequired: true\n", 0o644)
	out := e.run("run", "use the server")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	names := strings.Join(offeredTools(t, reqs[0]), ",")
	if !strings.Contains(names, "mcp__everything__echo") {
		t.Fatalf("the server's tools were not offered: %s", names)
	}
	res := toolResults(t, reqs[1])
	if r := res["echo"]; r.isError || !strings.Contains(r.text, "hello from aerie") {
		t.Errorf("echo result = %+v", r)
	}
	if r := res["sum"]; r.isError || !strings.Contains(r.text, "42") {
		t.Errorf("get-sum result = %+v", r)
	}

	list := e.run("mcp", "list", "--json")
	var listed mcpListJSON
	if err := json.Unmarshal([]byte(list.stdout), &listed); err != nil {
		t.Fatalf("mcp list --json: %v\n%s\n%s", err, list.stdout, list.stderr)
	}
	if list.code != 0 || len(listed.Servers) != 1 || listed.Servers[0].State != "connected" || !strings.Contains(strings.Join(listed.Servers[0].Tools, ","), "mcp__everything__echo") {
		t.Errorf("mcp list: exit %d, %+v", list.code, listed.Servers)
	}

	// A required server that cannot start stops the launch.
	testenv.WriteFile(t, filepath.Join(e.home, "mcp_servers/everything.yaml"), "id: everything\ntype: stdio\ncommand: "+filepath.Join(e.home, "no-such-server")+"\nrequired: true\n", 0o644)
	bad := e.run("run", "use the server")
	if bad.code != 2 || !strings.Contains(bad.stderr, "everything") {
		t.Errorf("a required server that cannot start: exit %d, stderr %q; want 2", bad.code, bad.stderr)
	}
	if list := e.run("mcp", "list"); list.code != 1 || !strings.Contains(list.stdout, "failed") {
		t.Errorf("mcp list of a failing required server: exit %d\n%s", list.code, list.stdout)
	}
}

// TestMCPListPluginsDisabled lists the servers a session would use: a
// disabled plugin's servers are not among them, as in a run.
func TestMCPListPluginsDisabled(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	testenv.WriteFile(t, filepath.Join(e.home, "plugins/review/.aerie-plugin/plugin.yaml"),
		"name: review\nmcp_servers: [{id: lint, type: stdio, command: "+filepath.Join(e.home, "no-such-server")+"}]\n", 0o644)
	list := func() mcpListJSON {
		t.Helper()
		out := e.run("mcp", "list", "--json")
		var listed mcpListJSON
		if err := json.Unmarshal([]byte(out.stdout), &listed); err != nil {
			t.Fatalf("mcp list --json: %v\n%s\n%s", err, out.stdout, out.stderr)
		}
		return listed
	}
	if got := list(); len(got.Servers) != 1 || !strings.Contains(got.Servers[0].ID, "lint") {
		t.Fatalf("enabled plugin: servers %+v, want the plugin's lint server", got.Servers)
	}
	testenv.WriteFile(t, filepath.Join(e.home, "config.toml"), "[plugins]\ndisabled = [\"review\"]\n", 0o644)
	if got := list(); len(got.Servers) != 0 {
		t.Errorf("disabled plugin: servers %+v, want none", got.Servers)
	}
}
