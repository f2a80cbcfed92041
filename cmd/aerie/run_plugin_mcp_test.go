package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aerie-run/aerie/hack/testenv"
)

// mcpServerEnv, set to "stdio" in a child's environment, makes this test
// binary an MCP server on its standard input and output: the real process
// a plugin's stdio server test talks to through the executor.
const mcpServerEnv = "AERIE_TEST_MCP_SERVER"

// newPluginMCPServer is an MCP server whose tools tell what its process
// was given, without ever returning a value of its environment.
func newPluginMCPServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "plugin-test", Version: "1.0.0"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	type textArgs struct {
		Text string `json:"text"`
	}
	type nameArgs struct {
		Name string `json:"name"`
	}
	type noArgs struct{}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *sdk.CallToolRequest, in textArgs) (*sdk.CallToolResult, any, error) {
		return text("echo: " + in.Text), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "digest", Description: "The SHA-256 of a variable."}, func(_ context.Context, _ *sdk.CallToolRequest, in nameArgs) (*sdk.CallToolResult, any, error) {
		v, ok := os.LookupEnv(in.Name)
		if !ok {
			return text("(unset)"), nil, nil
		}
		return text(sha(v)), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "envnames", Description: "The names of the variables."}, func(context.Context, *sdk.CallToolRequest, noArgs) (*sdk.CallToolResult, any, error) {
		var names []string
		for _, kv := range os.Environ() {
			name, _, _ := strings.Cut(kv, "=")
			names = append(names, name)
		}
		slices.Sort(names)
		return text(strings.Join(names, ",")), nil, nil
	})
	return s
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func serveMCPStdio() int {
	if err := newPluginMCPServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// claudePlugin writes a Claude plugin with the .mcp.json given into the
// home layer and enables its mcp component.
func (e *e2e) claudePlugin(name, mcpJSON string) {
	e.t.Helper()
	dir := filepath.Join(e.home, "plugins", name)
	testenv.WriteFile(e.t, filepath.Join(dir, ".claude-plugin/plugin.json"), `{"name": "`+name+`"}`, 0o644)
	testenv.WriteFile(e.t, filepath.Join(dir, ".mcp.json"), mcpJSON, 0o644)
	testenv.WriteFile(e.t, filepath.Join(e.home, "config.toml"), "[plugins]\ncomponents = [\"skills\", \"mcp\"]\n", 0o644)
}

// mcpArtifacts returns the MCP servers of aerie extensions --json, by id.
func (e *e2e) mcpArtifacts() (map[string]map[string]any, string) {
	e.t.Helper()
	out := e.run("extensions", "--json")
	var report struct {
		Artifacts []map[string]any `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &report); err != nil {
		e.t.Fatalf("extensions --json: %v\n%s\n%s", err, out.stdout, out.stderr)
	}
	arts := map[string]map[string]any{}
	for _, a := range report.Artifacts {
		if a["type"] == "mcp_server" {
			name, _ := a["name"].(string)
			arts[name] = a
		}
	}
	return arts, out.stdout + out.stderr
}

// TestRunClaudePluginStdioMCP runs a Claude plugin's .mcp.json stdio server
// through the executor: the model calls its tool and gets the result; the
// server's process is given the credential its env names (and the plugin's
// root), and no other of aerie run's variables. A server whose ${VAR} is
// not set is skipped with the variable and the fix in the report, and the
// other servers still work.
func TestRunClaudePluginStdioMCP(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const token, other = "stdio-token-4f1c9a2b7e", "other-secret-88d0c3e1"
	e := newE2E(t,
		toolTurn(
			call("echo", "mcp__local__echo", map[string]any{"text": "hello"}),
			call("digest", "mcp__local__digest", map[string]any{"name": "API_TOKEN"}),
			call("names", "mcp__local__envnames", map[string]any{}),
		),
		answer("the server answered"),
	)
	e.env = append(e.env, "STDIO_TOKEN="+token, "OTHER_TOKEN="+other)
	e.claudePlugin("local-tools", fmt.Sprintf(`{"mcpServers": {
		"local": {"command": %q, "env": {%q: "stdio", "API_TOKEN": "${STDIO_TOKEN}", "ROOT": "${CLAUDE_PLUGIN_ROOT}"}},
		"broken": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${NOT_SET_TOKEN}", "X-Other": "${OTHER_TOKEN}"}}
	}}`, exe, mcpServerEnv))

	out := e.run("run", "use the plugin's server")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	if names := offeredTools(t, reqs[0]); !slices.Contains(names, "mcp__local__echo") || slices.Contains(names, "mcp__broken__echo") {
		t.Fatalf("offered tools %v", names)
	}
	res := toolResults(t, reqs[1])
	if r := res["echo"]; r.isError || r.text != "echo: hello" {
		t.Errorf("echo = %+v", r)
	}
	if r := res["digest"]; r.isError || r.text != sha(token) {
		t.Errorf("the server was not given its credential: digest = %+v", r)
	}
	names := strings.Split(res["names"].text, ",")
	for _, want := range []string{"API_TOKEN", "ROOT", "CLAUDE_PLUGIN_ROOT", "AERIE_PLUGIN_ROOT"} {
		if !slices.Contains(names, want) {
			t.Errorf("the server's environment lacks %s: %v", want, names)
		}
	}
	for _, never := range []string{"STDIO_TOKEN", "OTHER_TOKEN", "ANTHROPIC_API_KEY", "AERIE_HOME"} {
		if slices.Contains(names, never) {
			t.Errorf("the server's environment has %s: %v", never, names)
		}
	}

	arts, text := e.mcpArtifacts()
	if a := arts["local"]; a["status"] != "active" || !strings.Contains(fmt.Sprint(a["reason"]), "${STDIO_TOKEN} in env.API_TOKEN") {
		t.Errorf("local: %v", a)
	}
	wantReason := "${NOT_SET_TOKEN} is not set in the environment of aerie run; set NOT_SET_TOKEN there, or give it a default (${VAR:-value})"
	if a := arts["broken"]; a["status"] != "skipped" || !strings.Contains(fmt.Sprint(a["reason"]), wantReason) {
		t.Errorf("broken: %v\nwant a reason with %s", a, wantReason)
	}
	for _, v := range []string{token, other} {
		if strings.Contains(text, v) || strings.Contains(out.stdout+out.stderr, v) {
			t.Errorf("a value is shown: %s", v)
		}
	}
}

// TestRunClaudePluginHTTPMCPToken reaches an HTTP MCP server that wants
// Authorization: Bearer ${TOKEN}, with TOKEN in aerie run's environment:
// the call succeeds, and the token appears in no output, event, report or
// file aerie wrote (the session database included), nor in the
// environment of a bash tool call.
func TestRunClaudePluginHTTPMCPToken(t *testing.T) {
	t.Parallel()
	const token = "http-token-6b2e91d04fa7c3"
	var refused atomic.Int64
	server := newPluginMCPServer()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	e := newE2E(t,
		toolTurn(
			call("echo", "mcp__remote__echo", map[string]any{"text": "over http"}),
			call("env", "bash", map[string]any{"command": "env; cat /proc/self/environ | tr '\\0' '\\n'"}),
		),
		answer("done"),
	)
	e.env = append(e.env, "TOKEN="+token)
	e.claudePlugin("remote-tools", `{"remote": {"type": "http", "url": "`+srv.URL+`/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}}`)

	out := e.run("run", "call the remote server")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	res := toolResults(t, e.model.Requests()[1])
	if r := res["echo"]; r.isError || r.text != "echo: over http" {
		t.Errorf("echo = %+v (refused %d requests)", r, refused.Load())
	}
	if r := res["env"]; r.isError || !strings.Contains(r.text, "PATH=") || strings.Contains(r.text, "TOKEN") {
		t.Errorf("the bash tool's environment: %+v", r)
	}
	if refused.Load() != 0 {
		t.Errorf("the server refused %d requests", refused.Load())
	}
	arts, report := e.mcpArtifacts()
	if a := arts["remote"]; a["status"] != "active" || !strings.Contains(fmt.Sprint(a["reason"]), "${TOKEN} in headers.Authorization") {
		t.Errorf("remote: %v", a)
	}
	everything := out.stdout + out.stderr + report
	for _, ev := range out.events {
		b, _ := json.Marshal(ev)
		everything += string(b)
	}
	if strings.Contains(everything, token) {
		t.Errorf("the token is shown in the output, events or report")
	}
	// Nothing aerie wrote holds it: the session database (and its
	// journal), logs, the workspace.
	for _, root := range []string{e.home, e.ws} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), token) {
				t.Errorf("%s holds the token", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, "sessions.db")); err != nil {
		t.Errorf("no session database was searched: %v", err)
	}
}
