package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/mtls"
)

// servedTools starts `aerie executor serve --listen` named tools on a
// workspace of its own, with a credential set made by aerie executor
// credentials, and returns it, its address, the workspace and the
// runner's credential file.
func servedTools(t *testing.T) (e *servedExecutor, addr, ws, runnerPEM string) {
	t.Helper()
	creds, ws := t.TempDir(), t.TempDir()
	testenv.WriteTree(t, ws, map[string]string{"who.txt": "tools workspace\n", "AGENTS.md": "On tools, run make check.\n"})
	if res := (harness{}).aerie(t, "executor", "credentials", "--out", creds, "tools"); res.err != nil {
		t.Fatal(res.err)
	}
	e = startExecutor(t, "--listen", "127.0.0.1:0", "--credential", filepath.Join(creds, "tools.pem"),
		"--workspace", ws, "--grace", "200ms")
	testenv.Eventually(t, 15*time.Second, "the executor listens", func() bool {
		addr, _ = e.logged(t, "executor serving")["listen"].(string)
		return addr != ""
	})
	return e, addr, ws, filepath.Join(creds, "runner.pem")
}

// TestRunExecutorOverTCP runs aerie run with a second executor served by
// a real `aerie executor serve --listen` process: bash and a stdio MCP
// server run on each executor as routed, the second's AGENTS.md follows
// its first call, and when the session ends nothing it started runs there.
func TestRunExecutorOverTCP(t *testing.T) {
	t.Parallel()
	served, addr, toolsWS, runnerPEM := servedTools(t)
	e := newE2E(t,
		toolTurn(
			call("b1", "bash", map[string]any{"command": "cat who.txt; pwd"}),
			call("b2", "bash", map[string]any{"command": "cat who.txt; pwd", "executor": "tools"}),
			call("m1", "mcp__probe__echo__tools", map[string]any{"text": "from tools"}),
			call("w1", "write_file", map[string]any{"path": "out.txt", "content": "written on tools", "executor": "tools"}),
			call("s1", "bash", map[string]any{"command": "exec sleep 1000", "executor": "tools", "background": true}),
		),
		answer("worked on both"),
	)
	testenv.WriteTree(t, e.ws, map[string]string{"who.txt": "main workspace\n"})
	testenv.WriteFile(t, filepath.Join(e.home, "mcp_servers/probe.yaml"), fmt.Sprintf(
		"id: probe\ntype: stdio\ncommand: %s\nenv: {%s: stdio}\nexecutors: [tools]\nrequired: true\n", os.Args[0], mcpServerEnv), 0o644)
	testenv.WriteFile(t, filepath.Join(e.home, "hooks/pre.yaml"),
		"hooks:\n  PreToolUse:\n    - matcher: bash\n      hooks: [{type: command, command: 'cat >> pre-hook.jsonl; echo >> pre-hook.jsonl'}]\n", 0o644)
	out := e.run("run", "--events-jsonl", "--executor", "tools="+addr, "--executor-credential", runnerPEM, "work on both")
	if out.code != 0 {
		t.Fatalf("exit %d:\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	res := toolResults(t, reqs[1])
	for id, want := range map[string]string{
		"b1": "main workspace\n" + e.ws, "b2": "tools workspace\n" + toolsWS, "m1": "echo: from tools",
	} {
		if r := res[id]; r.isError || !strings.Contains(r.text, want) {
			t.Errorf("%s: %+v, want it to hold %q", id, r, want)
		}
	}
	if !strings.Contains(res["b2"].text, "On tools, run make check.") || strings.Contains(res["b1"].text, "make check") {
		t.Errorf("the tools executor's AGENTS.md does not follow its first call alone:\nb1: %s\nb2: %s", res["b1"].text, res["b2"].text)
	}
	if b, err := os.ReadFile(filepath.Join(toolsWS, "out.txt")); err != nil || string(b) != "written on tools" {
		t.Errorf("out.txt on tools: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "out.txt")); err == nil {
		t.Error("out.txt written on the default executor")
	}
	// The PreToolUse hooks of b2 and s1 ran on tools, told so, b1's on the
	// default.
	for ws, want := range map[string]int{e.ws: 1, toolsWS: 2} {
		b, err := os.ReadFile(filepath.Join(ws, "pre-hook.jsonl"))
		if err != nil {
			t.Fatalf("no hook ran in %s: %v", ws, err)
		}
		n, on := strings.Count(string(b), `"hook_event_name":"PreToolUse"`), strings.Count(string(b), `"cwd":"`+toolsWS+`","executor":"tools"`)
		if n != want || ws == toolsWS && on != 2 || ws == e.ws && strings.Contains(string(b), `"executor":"tools"`) {
			t.Errorf("hooks in %s:\n%s", ws, b)
		}
	}
	// The session's groups on tools (the background sleep, the MCP
	// server) ended with it; the executor serves on.
	testenv.Eventually(t, 15*time.Second, "nothing of the session runs on tools", func() bool {
		return len(listOn(t, addr, runnerPEM)) == 0
	})
	if served.logged(t, "executor client connected") == nil {
		t.Errorf("aerie run never connected to tools:\n%s", served.logs.String())
	}
}

// listOn lists the groups executor tools at addr runs.
func listOn(t *testing.T, addr, runnerPEM string) []executor.ProcessInfo {
	t.Helper()
	cred, err := mtls.Load(runnerPEM)
	if err != nil {
		t.Fatal(err)
	}
	r, err := executor.DialTCP(t.Context(), addr, "tools", cred)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(t.Context()) }()
	infos, err := r.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return infos
}

// TestRunExecutorFlagErrors: bad --executor flags exit 2 naming the flag
// and the fix, an unreachable address named.
func TestRunExecutorFlagErrors(t *testing.T) {
	t.Parallel()
	_, addr, _, runnerPEM := servedTools(t)
	toolsPEM := filepath.Join(filepath.Dir(runnerPEM), "tools.pem")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no address", []string{"--executor", "tools", "--executor-credential", runnerPEM}, `--executor "tools": want NAME=HOST:PORT`},
		{"bad name", []string{"--executor", "Tools_1=" + addr, "--executor-credential", runnerPEM}, `"Tools_1" is not a DNS label`},
		{"reserved", []string{"--executor", "workspace=" + addr, "--executor-credential", runnerPEM}, `"workspace" is the default executor's name`},
		{"twice", []string{"--executor", "tools=" + addr, "--executor", "tools=" + addr, "--executor-credential", runnerPEM},
			`"tools" is named twice`},
		{"no port", []string{"--executor", "tools=localhost", "--executor-credential", runnerPEM}, `"localhost" is not HOST:PORT`},
		{"no credential", []string{"--executor", "tools=" + addr}, "--executor needs --executor-credential FILE"},
		{"credential alone", []string{"--executor-credential", runnerPEM}, "--executor-credential is for --executor"},
		{"missing credential file", []string{"--executor", "tools=" + addr, "--executor-credential", runnerPEM + ".missing"},
			"--executor-credential:"},
		{"executor's credential", []string{"--executor", "tools=" + addr, "--executor-credential", toolsPEM},
			"is executor tools's credential"},
		{"unreachable", []string{"--executor", "tools=127.0.0.1:1", "--executor-credential", runnerPEM},
			"--executor tools=127.0.0.1:1: cannot reach the executor at 127.0.0.1:1"},
		{"another name's executor", []string{"--executor", "gpu=" + addr, "--executor-credential", runnerPEM},
			"--executor gpu=" + addr + ": cannot reach the executor at " + addr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			out := e.run(append(append([]string{"run"}, tt.args...), "go")...)
			if out.code != 2 || !strings.Contains(out.stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", out.code, out.stderr, tt.want)
			}
		})
	}
}
