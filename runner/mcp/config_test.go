package mcp

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aerie-run/aerie/runner/layer"
)

var testSrc = Source{Layer: layer.Layer{Name: "home", Kind: layer.KindHome}, File: "/h/mcp_servers/x.yaml"}

func TestParseFile(t *testing.T) {
	t.Parallel()
	ignore := cmpopts.IgnoreFields(Server{}, "Layer", "File")
	tests := []struct {
		name string
		id   string
		in   string
		want Server
	}{
		{
			name: "spec stdio example",
			id:   "serena",
			in:   "id: serena\ntype: stdio\ncommand: uvx\nargs: [serena, start-mcp-server]\nexecutors: [local]\nrequired: true\n",
			want: Server{ID: "serena", Type: TypeStdio, Command: "uvx", Args: []string{"serena", "start-mcp-server"}, Executors: []string{"local"},
				Required: true, StartupTimeout: 30 * time.Second, ToolTimeout: 300 * time.Second},
		},
		{
			name: "spec http example, values as written",
			id:   "context7",
			in:   "id: context7\ntype: http\nurl: https://mcp.context7.com/mcp\nheaders:\n  CONTEXT7_API_KEY: ${CONTEXT7_API_KEY}\n",
			want: Server{ID: "context7", Type: TypeHTTP, URL: "https://mcp.context7.com/mcp", Headers: map[string]string{"CONTEXT7_API_KEY": "${CONTEXT7_API_KEY}"},
				Executors: []string{"local"}, StartupTimeout: 30 * time.Second, ToolTimeout: 300 * time.Second},
		},
		{
			name: "every field",
			id:   "all_1-x",
			in: "id: all_1-x\ntype: stdio\ncommand: ./bin/server\nargs: [--port, 8080, '', true]\nenv: {DEBUG: false, TOKEN: \"${T}\", N: 1}\n" +
				"tools: [read, write]\nrequired: false\ndisabled: true\nstartup_timeout_seconds: 2.5\ntool_timeout_seconds: 10\n",
			want: Server{ID: "all_1-x", Type: TypeStdio, Command: "./bin/server", Args: []string{"--port", "8080", "", "true"},
				Env: map[string]string{"DEBUG": "false", "TOKEN": "${T}", "N": "1"}, Tools: []string{"read", "write"}, Disabled: true,
				Executors: []string{"local"}, StartupTimeout: 2500 * time.Millisecond, ToolTimeout: 10 * time.Second},
		},
		{
			name: "sse, empty tools list offers none",
			id:   "s",
			in:   "id: s\ntype: sse\nurl: http://127.0.0.1:9/sse\ntools: []\n",
			want: Server{ID: "s", Type: TypeSSE, URL: "http://127.0.0.1:9/sse", Tools: []string{}, Executors: []string{"local"},
				StartupTimeout: 30 * time.Second, ToolTimeout: 300 * time.Second},
		},
		{
			name: "JSON is YAML",
			id:   "j",
			in:   `{"id": "j", "type": "http", "url": "https://x.example/mcp"}`,
			want: Server{ID: "j", Type: TypeHTTP, URL: "https://x.example/mcp", Executors: []string{"local"},
				StartupTimeout: 30 * time.Second, ToolTimeout: 300 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, probs := ParseFile([]byte(tt.in), tt.id, testSrc)
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			if diff := cmp.Diff(tt.want, got, ignore); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestParseFileProblems(t *testing.T) {
	t.Parallel()
	src := Source{Layer: testSrc.Layer, File: testSrc.File, Executors: []string{"devbox"}}
	tests := []struct {
		name string
		in   string
		want []string // "field: reason" prefixes, in order
	}{
		{"empty", "", []string{": the file is empty"}},
		{"not YAML", "id: [", []string{": invalid YAML"}},
		{"two documents", "id: x\n---\nid: y\n", []string{": more than one YAML document"}},
		{"not a mapping", "- a\n", []string{": line 1: a server is a mapping"}},
		{"missing id and type", "command: x\n", []string{"id: missing", "type: missing; one of stdio, http, sse"}},
		{"file name mismatch", "id: y\ntype: stdio\ncommand: c\n", []string{`id: "y" does not match the file name x.yaml`}},
		{"bad id chars", "id: a.b\ntype: stdio\ncommand: c\n", []string{`id: "a.b": use only letters, digits, - and _`}},
		{"double underscore", "id: a__b\ntype: stdio\ncommand: c\n", []string{`id: "a__b" contains "__"`}},
		{"unknown type", "id: x\ntype: websocket\n", []string{`type: "websocket": one of stdio, http, sse`}},
		{"stdio without command", "id: x\ntype: stdio\n", []string{"command: missing"}},
		{"stdio empty command", "id: x\ntype: stdio\ncommand: ''\n", []string{"command: is empty"}},
		{"stdio with url and headers", "id: x\ntype: stdio\ncommand: c\nurl: http://a\nheaders: {A: b}\n", []string{"url: not allowed for a stdio server", "headers: not allowed for a stdio server"}},
		{"http with stdio fields", "id: x\ntype: http\nurl: https://a\ncommand: c\nargs: []\nenv: {}\n", []string{"command: not allowed for an http server", "args: not allowed", "env: not allowed"}},
		{"http without url", "id: x\ntype: sse\n", []string{"url: missing; an sse server needs its http(s) URL"}},
		{"url not http", "id: x\ntype: http\nurl: ftp://a/b\n", []string{`url: "ftp://a/b" must be an http or https URL`}},
		{"url without host", "id: x\ntype: http\nurl: 'https:///mcp'\n", []string{"url: \"https:///mcp\" has no host"}},
		{"url unparsable", "id: x\ntype: http\nurl: 'http://[::1'\n", []string{"url: \"http://[::1\" is not a URL"}},
		{"bad header", "id: x\ntype: http\nurl: https://a\nheaders: {\"Bad Name\": v, Ok: \"a\\nb\"}\n", []string{"headers.Bad Name: not a valid header name", "headers.Ok: the value holds characters"}},
		{"unknown field", "id: x\ntype: stdio\ncommand: c\nrequire: true\n", []string{`require: unknown field (line 4); the fields are id, type, command`}},
		{"duplicate field", "id: x\nid: x\ntype: stdio\ncommand: c\n", []string{"id: appears twice (line 2)"}},
		{"wrong types", "id: x\ntype: stdio\ncommand: [c]\nargs: a\nenv: [a]\nrequired: yes\ndisabled: 1\n", []string{"command: must be a string", "args: must be a list of strings", "env: must be a mapping", "required: must be true or false", "disabled: must be true or false"}},
		{"null list item", "id: x\ntype: stdio\ncommand: c\nargs: [a, ~, {b: c}]\n", []string{"args[1]: must be a string", "args[2]: must be a string"}},
		{"env value not scalar", "id: x\ntype: stdio\ncommand: c\nenv: {A: [1], B: ~, \"=C\": x}\n", []string{"env.A: must be a string", "env.B: must be a string", "env.=C: not a valid variable name"}},
		{"timeouts", "id: x\ntype: stdio\ncommand: c\nstartup_timeout_seconds: 0\ntool_timeout_seconds: -3\n", []string{"startup_timeout_seconds: must be positive, not 0", "tool_timeout_seconds: must be positive, not -3"}},
		{"timeout not a number", "id: x\ntype: stdio\ncommand: c\nstartup_timeout_seconds: '30'\ntool_timeout_seconds: .nan\n", []string{"startup_timeout_seconds: must be a number of seconds", "tool_timeout_seconds: \".nan\" is not a number"}},
		{"timeout too long", "id: x\ntype: stdio\ncommand: c\ntool_timeout_seconds: 1e300\n", []string{"tool_timeout_seconds: 1e300 seconds is too long"}},
		{"unknown executor", "id: x\ntype: stdio\ncommand: c\nexecutors: [local, devbox, gpu]\n", []string{`executors[2]: "gpu" is not an executor: use local, devbox`}},
		{"empty executors", "id: x\ntype: stdio\ncommand: c\nexecutors: []\n", []string{"executors: is empty"}},
		{"empty tool name", "id: x\ntype: stdio\ncommand: c\ntools: ['']\n", []string{"tools[0]: is empty"}},
		{"NUL", "id: x\ntype: stdio\ncommand: \"a\\0b\"\n", []string{"command: contains a NUL byte"}},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\nid: x\ntype: stdio\ncommand: c\nargs: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n", []string{"a: unknown field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, probs := ParseFile([]byte(tt.in), "x", src)
			if got.ID != "" || got.Type != "" {
				t.Errorf("a server despite problems: %+v", got)
			}
			var reasons []string
			for _, p := range probs {
				if p.File != src.File || p.Layer != "home" {
					t.Errorf("problem without its file: %+v", p)
				}
				reasons = append(reasons, p.Field+": "+p.Reason)
			}
			if len(reasons) < len(tt.want) {
				t.Fatalf("problems %q, want %q", reasons, tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(reasons[i], w) {
					t.Errorf("problem %d = %q, want prefix %q (all: %q)", i, reasons[i], w, reasons)
				}
			}
		})
	}
}

func TestParseEntryPlugin(t *testing.T) {
	t.Parallel()
	src := Source{Layer: testSrc.Layer, File: "/p/review/.aerie-plugin/plugin.yaml", Plugin: "review"}
	for _, tc := range []struct {
		in, want string
	}{
		{"id: review-docs\ntype: stdio\ncommand: node\nargs: [\"${OPENVAALA_PLUGIN_ROOT}/mcp/server.mjs\"]\n", ""},
		{"id: d\ntype: stdio\ncommand: node\nexecutors: [local]\n", "executors: not allowed in a plugin"},
	} {
		n := yamlNode(t, tc.in)
		srv, probs := ParseEntry(n, src)
		if tc.want == "" {
			if len(probs) > 0 || srv.Plugin != "review" || srv.ID != "review-docs" {
				t.Errorf("%+v %v", srv, probs)
			}
			continue
		}
		if len(probs) != 1 || !strings.HasPrefix(probs[0].Field+": "+probs[0].Reason, tc.want) {
			t.Errorf("problems %v, want %q", probs, tc.want)
		}
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{"serena": true, "Context7": true, "a_b-c": true, "_": true, "a__b": false, "": false, "a.b": false, "a b": false, "é": false} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v", id, got)
		}
	}
}
