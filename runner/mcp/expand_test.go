package mcp

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
)

// env is a Getenv over a map.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestVariablesExpand(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"TOKEN": "tok-123", "HOME": "/home/u", "EMPTY": "", "NESTED": "${HOME}"}
	local := LocalVariables(env(vars))
	pod := PodVariables(env(vars), []string{"TOKEN", "UNSET_SECRET"})
	for _, tc := range []struct {
		name string
		v    Variables
		in   string
		want string
		read []string
		err  string
	}{
		{name: "plain", v: local, in: "no variables", want: "no variables"},
		{name: "one", v: local, in: "Bearer ${TOKEN}", want: "Bearer tok-123", read: []string{"TOKEN"}},
		{name: "twice", v: local, in: "${TOKEN}:${TOKEN}@${HOME}", want: "tok-123:tok-123@/home/u", read: []string{"TOKEN", "HOME"}},
		{name: "default", v: local, in: "${MISSING:-fallback}/${EMPTY:-e}", want: "fallback/e"},
		{name: "empty default", v: local, in: "x${MISSING:-}", want: "x"},
		{name: "set wins over default", v: local, in: "${HOME:-/tmp}", want: "/home/u", read: []string{"HOME"}},
		{name: "root", v: local, in: "${CLAUDE_PLUGIN_ROOT}/s ${AERIE_PLUGIN_ROOT} ${OPENVAALA_PLUGIN_ROOT}", want: "/p/x/s /p/x /p/x"},
		{name: "not expanded again", v: local, in: "${NESTED}", want: "${HOME}", read: []string{"NESTED"}},
		{name: "not a variable", v: local, in: "$TOKEN ${1X} ${A-B}", want: "$TOKEN ${1X} ${A-B}"},
		{
			name: "missing locally", v: local, in: "${MISSING} ${EMPTY} ${MISSING}",
			err: "${MISSING} is not set in the environment of aerie run; set MISSING there, or give it a default (${VAR:-value}); " +
				"${EMPTY} is not set in the environment of aerie run; set EMPTY there, or give it a default (${VAR:-value})",
		},
		{name: "pod: a secret", v: pod, in: "Bearer ${TOKEN}", want: "Bearer tok-123", read: []string{"TOKEN"}},
		// The runner's other variables never resolve in a pod, even when
		// set: its environment holds aerie's own credentials.
		{name: "pod: not a secret, with default", v: pod, in: "${HOME:-/nowhere}", want: "/nowhere"},
		{
			name: "pod: not a secret", v: pod, in: "${HOME}",
			err: "${HOME} is not one of the session's secrets; add {name: HOME, secretKeyRef: {name: <secret>, key: <key>}} " +
				"to spec.secrets, or give it a default (${VAR:-value})",
		},
		{
			name: "pod: a secret that is empty", v: pod, in: "${UNSET_SECRET}",
			err: "${UNSET_SECRET} is one of the session's secrets but is empty in the runner's environment; " +
				"check the Secret key spec.secrets names for UNSET_SECRET",
		},
		{name: "no environment", v: Variables{}, in: "${HOME:-d}", want: "d"},
		{name: "denied, with default", v: local.Deny("r"), in: "${HOME:-d}", want: "d"},
		{name: "denied", v: local.Deny("the repository wrote it"), in: "${HOME}", err: "${HOME} is not resolved: the repository wrote it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got Resolved
			out, err := tc.v.Expand(tc.in, "/p/x", &got)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v\nwant %s", err, tc.err)
				}
				for _, v := range vars {
					if v != "" && !strings.Contains(v, "${") && strings.Contains(err.Error(), v) {
						t.Errorf("the error holds the value %q", v)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("Expand(%q) = %q, want %q", tc.in, out, tc.want)
			}
			if diff := cmp.Diff(tc.read, got.Names); diff != "" {
				t.Errorf("read (-want +got)\n%s", diff)
			}
		})
	}
}

// TestResolvedPrints checks that a server that read a value prints its
// names only, however it is formatted.
func TestResolvedPrints(t *testing.T) {
	t.Parallel()
	r := Resolved{Names: []string{"TOKEN"}, Values: []string{"tok-secret-value"}}
	srv := Server{ID: "x", Resolved: r}
	b, err := json.Marshal(srv)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(srv), fmt.Sprintf("%+v", srv), fmt.Sprintf("%#v", srv), string(b)} {
		if strings.Contains(s, "tok-secret-value") || !strings.Contains(s, "TOKEN") {
			t.Errorf("printed as %s", s)
		}
	}
	if got := r.Mask("Post http://x/?k=tok-secret-value: refused"); got != "Post http://x/?k=${TOKEN}: refused" {
		t.Errorf("Mask = %q", got)
	}
}

func TestAddClaudePlugin(t *testing.T) {
	t.Parallel()
	home := newLayer(t, "home", layer.KindHome, map[string]string{"mcp_servers/docs.yaml": stdioDecl("docs", "my-docs")})
	c, err := Load([]layer.Layer{home}, nil, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := `{"mcpServers": {
		"tf": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/tf", "args": ["-e", "TFE_TOKEN=${TFE_TOKEN}"], "env": {"API_TOKEN": "${TOKEN}", "MODE": "${MODE:-fast}"}},
		"gh": {"type": "http", "url": "https://api.example.com/mcp/${ORG}", "headers": {"Authorization": "Bearer ${TOKEN}"}},
		"docs": {"command": "x"},
		"broken": {"type": "sse", "url": "${NO_SUCH_URL}", "headers": {"X-Key": "${NO_SUCH_KEY}"}},
		"badurl": {"type": "http", "url": "${NOT_A_URL}"},
		"oauth": {"type": "http", "url": "https://x.example", "oauth": {}}
	}}`
	vars := LocalVariables(env(map[string]string{
		"TOKEN": "tok-1234567890", "TFE_TOKEN": "tfe-0987654321", "ORG": "acme", "NOT_A_URL": "ftp://secret-host-value",
	}))
	file := "/p/tf/.mcp.json"
	if err := c.AddClaudePlugin("tf", "/p/tf", file, []byte(in), vars); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"home docs.yaml active",
		"plugin tf tf active",
		"plugin tf gh active",
		"plugin tf docs shadowed",
		"plugin tf broken skipped",
		"plugin tf badurl skipped",
		"plugin tf oauth skipped",
	}
	if diff := cmp.Diff(want, fileStatuses(c.Files)); diff != "" {
		t.Errorf("files (-want +got)\n%s", diff)
	}
	byID := map[string]Server{}
	for _, s := range c.Servers {
		byID[s.ID] = s
	}
	tf, gh := byID["tf"], byID["gh"]
	if tf.Command != "/p/tf/bin/tf" || !cmp.Equal(tf.Args, []string{"-e", "TFE_TOKEN=tfe-0987654321"}) {
		t.Errorf("tf: %s %q", tf.Command, tf.Args)
	}
	wantEnv := map[string]string{
		"API_TOKEN": "tok-1234567890", "MODE": "fast",
		"CLAUDE_PLUGIN_ROOT": "/p/tf", "AERIE_PLUGIN_ROOT": "/p/tf", "OPENVAALA_PLUGIN_ROOT": "/p/tf",
	}
	if diff := cmp.Diff(wantEnv, tf.Env); diff != "" {
		t.Errorf("tf env (-want +got)\n%s", diff)
	}
	if gh.URL != "https://api.example.com/mcp/acme" || gh.Headers["Authorization"] != "Bearer tok-1234567890" {
		t.Errorf("gh: %s %v", gh.URL, gh.Headers)
	}
	reasons := map[string]string{}
	for _, f := range c.Files {
		if f.Plugin == "tf" {
			reasons[f.ID] = f.Reason
		}
	}
	wantReasons := map[string]string{
		"tf": "resolved from the environment: ${TFE_TOKEN} in args[1], ${TOKEN} in env.API_TOKEN; each value is used there only, " +
			"by the server's own process, which gets no other of the runner's variables, and never shown",
		"gh": "resolved from the environment: ${ORG} in url, ${TOKEN} in headers.Authorization; each value is used there only, " +
			"by the runner's requests to the server, and never shown",
		"docs": "mcp_servers/docs.yaml in home wins over the plugin's entry",
		"broken": "mcpServers.broken.url: ${NO_SUCH_URL} is not set in the environment of aerie run; set NO_SUCH_URL there, " +
			"or give it a default (${VAR:-value}) (and 2 more problems)",
		"badurl": `mcpServers.badurl.url: "${NOT_A_URL}" must be an http or https URL`,
		"oauth":  "mcpServers.oauth.oauth: cannot be translated: aerie declares servers with type, command, args, env, url, headers only",
	}
	reasons["docs"] = strings.Replace(reasons["docs"], home.Dir+"/", "", 1)
	if diff := cmp.Diff(wantReasons, reasons); diff != "" {
		t.Errorf("reasons (-want +got)\n%s", diff)
	}
	// The names are reported, never the values.
	report, err := json.Marshal(struct {
		A []layer.Artifact
		F []File
		P []layer.Problem
	}{c.Artifacts(""), c.Files, c.Problems})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"tok-1234567890", "tfe-0987654321", "secret-host-value"} {
		if strings.Contains(string(report), v) {
			t.Errorf("the report holds %q:\n%s", v, report)
		}
	}
	if !strings.Contains(string(report), `"variables":["TFE_TOKEN","TOKEN"]`) {
		t.Errorf("the report does not name tf's variables:\n%s", report)
	}
	// A file that is not a server list is skipped whole, with why.
	var bad Config
	if err := bad.AddClaudePlugin("x", "/p/x", "/p/x/.mcp.json", []byte(`{"mcpServers": 1}`), vars); err != nil {
		t.Fatal(err)
	}
	if len(bad.Servers) != 0 || len(bad.Files) != 1 || bad.Files[0].Reason != "mcpServers: must be an object of servers by id" {
		t.Errorf("%+v", bad.Files)
	}
}

// TestResolvedMasked runs a plugin's stdio server that fails quoting its
// credential, and one that echoes it: neither the error nor the result
// shows the value.
func TestResolvedMasked(t *testing.T) {
	t.Parallel()
	l, dir := workspace(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-value-abcdef"
	var c Config
	in := fmt.Sprintf(`{"leak": {"command": %q, "env": {%q: "leak", "LEAKED": "${TOKEN}"}},
		"t": {"command": %q, "env": {%q: "serve"}, "args": ["${TOKEN}"]}}`, exe, serverEnv, exe, serverEnv)
	if err := c.AddClaudePlugin("p", dir, dir+"/.mcp.json", []byte(in), LocalVariables(env(map[string]string{"TOKEN": secret}))); err != nil {
		t.Fatal(err)
	}
	m := New(c.Servers, Options{Commands: l, Dir: dir})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for _, st := range m.Status() {
		if st.ID == "leak" && (st.State != StateFailed || !strings.Contains(st.Error, "bad token ${TOKEN}") || strings.Contains(st.Error, secret)) {
			t.Errorf("leak: %+v", st)
		}
	}
	r := lookup(t, m, "mcp__t__echo").Run(t.Context(), json.RawMessage(`{"text":"echo `+secret+`"}`))
	if r.Content != "echo ${TOKEN}" {
		t.Errorf("echo result %q", r.Content)
	}
}

func FuzzExpand(f *testing.F) {
	f.Add("Bearer ${TOKEN}")
	f.Add("${A:-x}${B}${CLAUDE_PLUGIN_ROOT}/${C:-${D}}")
	f.Add("${}${:-}$${A}}")
	f.Fuzz(func(t *testing.T, in string) {
		// Every name resolves to a value marked with it, except those
		// starting with U; in a pod only S... names are secrets.
		getenv := func(k string) string {
			if strings.HasPrefix(k, "U") {
				return ""
			}
			return "VAL(" + k + ")"
		}
		for _, v := range []Variables{LocalVariables(getenv), PodVariables(getenv, []string{"S", "SA"})} {
			var got Resolved
			out, err := v.Expand(in, "/root", &got)
			if err != nil {
				if strings.Contains(err.Error(), "VAL(") && !strings.Contains(in, "VAL(") {
					t.Fatalf("the error holds a value: %v", err)
				}
				continue
			}
			if len(got.Names) != len(got.Values) {
				t.Fatalf("names %v, values %v", got.Names, got.Values)
			}
			for i, name := range got.Names {
				if v.Restricted && name != "S" && name != "SA" {
					t.Fatalf("a pod read %s, not a secret", name)
				}
				if !strings.Contains(in, "${"+name) || got.Values[i] != "VAL("+name+")" {
					t.Fatalf("read %s = %q from %q", name, got.Values[i], in)
				}
			}
			if !strings.Contains(in, "${") && out != in {
				t.Fatalf("Expand(%q) = %q", in, out)
			}
		}
	})
}
