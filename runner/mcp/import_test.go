package mcp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aerie-run/aerie/runner/layer"
)

// TestCorpus translates every declaration of the corpus: each entry
// becomes a valid mcp_servers/<id>.yaml (which parses back to the same
// server) or is refused with its precise reason.
func TestCorpus(t *testing.T) {
	t.Parallel()
	const plugins = "anthropics__claude-plugins-official/"
	const examples = plugins + "plugins/plugin-dev/skills/mcp-integration/examples/"
	expand := func(value, v string) string {
		return `"` + value + `" relies on the expansion of ${` + v + `}, which aerie does not do (values are used as written); write the value itself`
	}
	tests := []struct {
		file    string
		servers []string
		refused []string // "field: reason"
	}{
		{
			// Placeholders such as <APILLON_API_KEY> are values like any
			// other: used as written.
			file:    "Apillon__mcp-server/claude_desktop_config.json",
			servers: []string{"apillon-mcp-server", "filesystem"},
		},
		{
			file:    plugins + "external_plugins/context7/.mcp.json",
			refused: []string{"mcpServers.context7.headers.Authorization: " + expand("${CONTEXT7_API_KEY:-}", "CONTEXT7_API_KEY")},
		},
		{file: plugins + "external_plugins/firebase/.mcp.json", servers: []string{"firebase"}},
		{
			file:    plugins + "external_plugins/github/.mcp.json",
			refused: []string{"github.headers.Authorization: " + expand("Bearer ${GITHUB_PERSONAL_ACCESS_TOKEN}", "GITHUB_PERSONAL_ACCESS_TOKEN")},
		},
		{
			file:    plugins + "external_plugins/greptile/.mcp.json",
			refused: []string{"greptile.headers.Authorization: " + expand("Bearer ${GREPTILE_API_KEY}", "GREPTILE_API_KEY")},
		},
		{file: plugins + "external_plugins/serena/.mcp.json", servers: []string{"serena"}},
		{
			file:    plugins + "external_plugins/terraform/.mcp.json",
			refused: []string{"terraform.args[4]: " + expand("TFE_TOKEN=${TFE_TOKEN}", "TFE_TOKEN")},
		},
		{
			file: examples + "http-server.json",
			refused: []string{
				"rest-api.headers.Authorization: " + expand("Bearer ${API_TOKEN}", "API_TOKEN"),
				"internal-service.headers.Authorization: " + expand("Bearer ${API_TOKEN}", "API_TOKEN"),
			},
		},
		{
			// The "_comment" key is a comment.
			file:    examples + "sse-server.json",
			servers: []string{"github"},
			refused: []string{"custom-service.headers.X-Client-ID: " + expand("${CLIENT_ID}", "CLIENT_ID")},
		},
		{
			file: examples + "stdio-server.json",
			refused: []string{
				"filesystem.args[2]: " + expand("${CLAUDE_PROJECT_DIR}", "CLAUDE_PROJECT_DIR"),
				`database.command: "${CLAUDE_PLUGIN_ROOT}/servers/db-server.js" relies on ${CLAUDE_PLUGIN_ROOT}, a Claude plugin's directory, which aerie does not expand; in an aerie plugin's manifest write ${AERIE_PLUGIN_ROOT}`,
				`database.args[1]: "${CLAUDE_PLUGIN_ROOT}/config/db.json" relies on ${CLAUDE_PLUGIN_ROOT}, a Claude plugin's directory, which aerie does not expand; in an aerie plugin's manifest write ${AERIE_PLUGIN_ROOT}`,
				"database.env.DATABASE_URL: " + expand("${DATABASE_URL}", "DATABASE_URL"),
				"custom-tools.env.API_KEY: " + expand("${CUSTOM_API_KEY}", "CUSTOM_API_KEY"),
			},
		},
		{
			// A project config without [mcp_servers]: nothing to translate,
			// and its [features] table is not read.
			file: "openai__openai-agents-js/.codex/config.toml",
		},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		path := filepath.Join("testdata/corpus", tt.file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var servers []Server
		var probs []layer.Problem
		if strings.HasSuffix(path, ".toml") {
			servers, probs = ImportCodex(data, path)
		} else {
			servers, probs = ImportClaude(data, path)
		}
		var ids, refused []string
		for _, s := range servers {
			ids = append(ids, s.ID)
			back, bprobs := ParseFile(s.Declaration(), s.ID, Source{File: path})
			if len(bprobs) > 0 {
				t.Errorf("%s: %s: the declaration does not parse back: %v\n%s", tt.file, s.ID, bprobs, s.Declaration())
			}
			if diff := cmp.Diff(s, back, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: %s: round trip (-import +parsed)\n%s", tt.file, s.ID, diff)
			}
		}
		for _, p := range probs {
			if p.File != path {
				t.Errorf("%s: problem names %s", tt.file, p.File)
			}
			refused = append(refused, p.Field+": "+p.Reason)
		}
		if diff := cmp.Diff(tt.servers, ids); diff != "" {
			t.Errorf("%s: servers (-want +got)\n%s", tt.file, diff)
		}
		if diff := cmp.Diff(tt.refused, refused); diff != "" {
			t.Errorf("%s: refusals (-want +got)\n%s", tt.file, diff)
		}
	}
	// Every declaration of the corpus is covered.
	err := filepath.WalkDir("testdata/corpus", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/corpus", p)
		if !d.IsDir() && (strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".toml")) && !seen[rel] {
			t.Errorf("%s is not in the test", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestImportClaude(t *testing.T) {
	t.Parallel()
	in := `{"mcpServers": {
		"docs": {"command": "docs-server", "args": ["--port", 8080], "env": {"DEBUG": "1"}},
		"remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"X-Team": "infra"}},
		"oauth": {"type": "http", "url": "https://x.example/mcp", "oauth": {"clientId": "a"}},
		"bad.id": {"command": "x"},
		"nothing": {},
		"list": [1]
	}, "globalShortcut": "x", "_note": "ignored"}`
	servers, probs := ImportClaude([]byte(in), "f.json")
	var ids, reasons []string
	for _, s := range servers {
		ids = append(ids, s.ID)
	}
	for _, p := range probs {
		reasons = append(reasons, p.Field+": "+p.Reason)
	}
	if diff := cmp.Diff([]string{"docs", "remote"}, ids); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	want := []string{
		"globalShortcut: not read: only mcpServers declares servers",
		"mcpServers.oauth.oauth: cannot be translated: aerie declares servers with type, command, args, env, url, headers only",
		`mcpServers.bad.id.id: "bad.id": use only letters, digits, - and _`,
		"mcpServers.nothing.command: missing; a stdio server needs the program that runs it",
		"mcpServers.list: must be an object declaring a server",
	}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if !slices.Equal(servers[0].Args, []string{"--port", "8080"}) {
		t.Errorf("args %q", servers[0].Args)
	}
	for _, bad := range []string{"", "[1]", "{", `{"mcpServers": 1}`} {
		if s, p := ImportClaude([]byte(bad), "f.json"); s != nil || len(p) == 0 {
			t.Errorf("%q: %v %v", bad, s, p)
		}
	}
}

func TestImportCodex(t *testing.T) {
	t.Parallel()
	in := `
model = "o3"
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
env = { DEBUG = "1" }
enabled_tools = ["search"]
startup_timeout_ms = 2500
tool_timeout_sec = 60
required = true

[mcp_servers.remote]
url = "https://mcp.example.com/mcp"
http_headers = { "X-Team" = "infra" }
enabled = false

[mcp_servers.token]
url = "https://x.example/mcp"
bearer_token_env_var = "TOKEN"

[mcp_servers.cwd]
command = "x"
cwd = "/srv"
disabled_tools = ["a"]
unknown = 1

[mcp_servers.empty]
`
	servers, probs := ImportCodex([]byte(in), "config.toml")
	var reasons []string
	for _, p := range probs {
		reasons = append(reasons, p.Field+": "+p.Reason)
	}
	want := []string{
		"mcp_servers.cwd.cwd: cannot be translated: aerie starts a stdio server in the working directory",
		"mcp_servers.cwd.disabled_tools: cannot be translated: aerie has no list of tools to hide; list the tools to offer in tools",
		"mcp_servers.cwd.unknown: cannot be translated: not a field aerie knows",
		"mcp_servers.empty: declares neither a command nor a url",
		"mcp_servers.token.bearer_token_env_var: cannot be translated: aerie reads no token from the runner's environment; write the Authorization header in headers",
	}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	got := map[string]string{}
	for _, s := range servers {
		got[s.ID] = string(s.Declaration())
	}
	wantDecl := map[string]string{
		"docs":   "id: docs\ntype: stdio\ncommand: npx\nargs:\n  - -y\n  - docs-mcp\nenv:\n  DEBUG: \"1\"\ntools:\n  - search\nrequired: true\nstartup_timeout_seconds: 2.5\ntool_timeout_seconds: 60\n",
		"remote": "id: remote\ntype: http\nurl: https://mcp.example.com/mcp\nheaders:\n  X-Team: infra\ndisabled: true\n",
	}
	if diff := cmp.Diff(wantDecl, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if _, p := ImportCodex([]byte("[mcp_servers\n"), "c.toml"); len(p) != 1 || !strings.HasPrefix(p[0].Reason, "invalid TOML") {
		t.Errorf("%v", p)
	}
	if s, p := ImportCodex([]byte("mcp_servers = 1\n"), "c.toml"); s != nil || len(p) != 1 {
		t.Errorf("%v %v", s, p)
	}
}
