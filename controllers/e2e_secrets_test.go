package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// testSecretsAgentOnly gives a session a spec.secrets entry that a
// platform layer's Claude plugin names in its HTTP MCP server's header
// (${GITHUB_TOKEN}): the server gets it and the model its tool's result;
// while the runner pod runs, the variable is in the environment of the agent
// container's process and in no process of the workspace container, a
// tool's environment lacks it, and once the session ended its value is in
// no Event, status, runner configuration, container log or model request.
func testSecretsAgentOnly(t *testing.T, e *e2e) {
	ns := e.namespace(t)
	e = e.in(ns)
	const name, variable = "secrets-agent-only", "GITHUB_TOKEN"
	value := "ghp-e2e-" + uuid.NewString()
	if err := e.cp.Client.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "github-mcp", Namespace: ns},
		StringData: map[string]string{"token": value},
	}); err != nil {
		t.Fatal(err)
	}
	platform := e.cp.Namespace(t)
	remote := serveTokenMCP(t, value)
	e.remoteToolsLayer(t, platform, remote.url, variable)
	e.startController(t, ns, platform)

	// The first request comes from the agent's process, which waits for
	// the answer: the pod's processes are looked at then.
	var (
		mu   sync.Mutex
		seen []string
	)
	model := testenv.StartModelServer(t,
		testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			mu.Lock()
			seen = processesWithEnv(t, variable+"="+value)
			mu.Unlock()
			return testenv.ToolTurn(
				testenv.Call("env", "bash", map[string]any{"command": "env > env.txt; echo ran"}),
				testenv.Call("echo", "mcp__remote__echo", map[string]any{"text": "over http"}))
		}},
		testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	e.session(t, name, model, func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Secrets = []aeriev1alpha1.SecretEnv{
			{Name: variable, SecretKeyRef: aeriev1alpha1.KeyReference{Name: "github-mcp", Key: "token"}},
		}
	})
	pod := e.pod(t, name)
	s := e.waitFinished(t, name)
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}

	// The plugin's HTTP server got the Secret's value in its header, from
	// the agent container, and the model got its answer.
	if n, refused := remote.calls.Load(), remote.refused.Load(); n == 0 || refused != 0 {
		t.Errorf("the MCP server took %d requests with the token and refused %d", n, refused)
	}
	if reqs := model.Requests(); len(reqs) < 2 {
		t.Errorf("%d model requests, want 2", len(reqs))
	} else if got := toolResults(t, reqs[1])["echo"]; got != "echo: over http" {
		t.Errorf("the MCP tool's result %q, want %q", got, "echo: over http")
	}

	mu.Lock()
	var agent bool
	for _, cmdline := range seen {
		agent = agent || strings.Contains(cmdline, " runner --config ")
		if strings.Contains(cmdline, " executor ") {
			t.Errorf("a workspace container's process has %s: %s", variable, cmdline)
		}
	}
	if !agent {
		t.Errorf("no agent process with %s; the processes with it: %q", variable, seen)
	}
	mu.Unlock()
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, ev := range c.Env {
			if ev.Name == variable && c.Name != ContainerAgent {
				t.Errorf("container %s has %s", c.Name, variable)
			}
		}
	}
	env, err := os.ReadFile(filepath.Join(e.runner.VolumePath(pod, volumeWorkspace), "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte(variable)) || bytes.Contains(env, []byte(value)) {
		t.Errorf("the tool's environment has %s:\n%s", variable, env)
	}
	if rc := runnerConfigOf(t, e, name, 1); len(rc.Secrets) != 1 || rc.Secrets[0] != variable {
		t.Errorf("runner config secrets %v, want [%s]", rc.Secrets, variable)
	}

	// Where people and other programs look: the value is in none of it.
	status, err := json.Marshal(s.Status)
	if err != nil {
		t.Fatal(err)
	}
	places := map[string][]byte{"the session's status": status}
	for _, args := range [][]string{
		{"get", "events", "-o", "yaml"},
		{"get", "configmap", childName(name, 1), "-o", "yaml"},
		{"logs", pod.Name, "-c", ContainerAgent},
		{"logs", pod.Name, "-c", ContainerWorkspace},
	} {
		out, err := e.cp.Kubectl(t.Context(), append(args, "-n", ns)...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		places["kubectl "+strings.Join(args, " ")] = []byte(out)
	}
	if !bytes.Contains(places["kubectl get events -o yaml"], []byte(name)) {
		t.Errorf("no event names the session; the check for the value in them meant nothing:\n%s", places["kubectl get events -o yaml"])
	}
	for i, req := range model.Requests() {
		places["model request "+strconv.Itoa(i+1)] = req.Body
	}
	for where, b := range places {
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds the value of %s", where, variable)
		}
	}
}

// processesWithEnv are the command lines (arguments joined by spaces) of
// the processes whose environment has the entry kv, as /proc shows them.
// Processes that end while they are read are passed over.
func processesWithEnv(t *testing.T, kv string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, dir := range dirs {
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !bytes.Contains(append(append([]byte{0}, env...), 0), append(append([]byte{0}, kv...), 0)) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		out = append(out, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
	}
	return out
}

// tokenMCP is an MCP server over streamable HTTP that serves only requests
// with a bearer token: its URL, the requests it served and those it
// refused.
type tokenMCP struct {
	url            string
	calls, refused *atomic.Int64
}

// serveTokenMCP starts an MCP server with an echo tool that takes requests
// with "Authorization: Bearer token" and refuses (and counts) the others.
func serveTokenMCP(t *testing.T, token string) tokenMCP {
	t.Helper()
	server := sdk.NewServer(&sdk.Implementation{Name: "remote", Version: "1.0.0"}, nil)
	type textArgs struct {
		Text string `json:"text"`
	}
	sdk.AddTool(server, &sdk.Tool{Name: "echo", Description: "Echo the text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in textArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	srv := tokenMCP{calls: new(atomic.Int64), refused: new(atomic.Int64)}
	hs := testenv.NewServiceServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			srv.refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		srv.calls.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	srv.url = hs.URL + "/mcp"
	return srv
}

// remoteToolsLayer installs a Claude plugin whose .mcp.json declares the
// HTTP server "remote" at url with the header "Authorization: Bearer
// ${variable}", with its mcp component, and packs it into the platform
// layer "remote-tools" of namespace platform.
func (e *e2e) remoteToolsLayer(t *testing.T, platform, url, variable string) {
	t.Helper()
	home, src := t.TempDir(), filepath.Join(t.TempDir(), "remote-tools")
	testenv.WriteFile(t, filepath.Join(src, ".claude-plugin", "plugin.json"), `{"name": "remote-tools"}`, 0o644)
	testenv.WriteFile(t, filepath.Join(src, ".mcp.json"), `{"mcpServers": {"remote": {"type": "http", "url": "`+url+
		`", "headers": {"Authorization": "Bearer ${`+variable+`}"}}}}`, 0o644)
	aerie := e.aerieCLI(t, home)
	aerie(nil, "plugin", "install", src, "--components", "mcp")
	e.packLayer(t, aerie, platform, "remote-tools", "remote-tools")
}
