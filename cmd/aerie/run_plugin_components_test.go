package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// corpusPlugin is the directory of a plugin of the official Claude
// marketplace's corpus.
func corpusPlugin(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(corpusMarket, "plugins", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// install installs a plugin with the components given.
func (e *e2e) install(dir, components string) {
	e.t.Helper()
	if r := e.run("plugin", "install", dir, "--components", components); r.code != 0 {
		e.t.Fatalf("plugin install %s: exit %d\n%s", dir, r.code, r.stderr)
	}
}

// captured keeps the requests a scripted conversation answered.
type captured struct {
	mu   sync.Mutex
	reqs []testenv.ModelRequest
}

// turn answers with then, keeping the request.
func (c *captured) turn(then testenv.Turn) testenv.Turn {
	return testenv.Turn{Respond: func(r testenv.ModelRequest) testenv.Turn {
		c.mu.Lock()
		c.reqs = append(c.reqs, r)
		c.mu.Unlock()
		return then
	}}
}

func (c *captured) first(t *testing.T) testenv.ModelRequest {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		t.Fatal("the conversation got no request")
	}
	return c.reqs[0]
}

// TestRunPluginAgent installs the corpus's hookify plugin with its agents
// and spawns its conversation-analyzer: the child runs on the agent's
// body as its system prompt with the tools its frontmatter names (Read,
// Grep: read_file and grep), and spawn_agent's description lists it.
func TestRunPluginAgent(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(call("sa", "spawn_agent", map[string]any{
			"task": "analyze: the conversation so far", "agent_type": "hookify:conversation-analyzer",
		})),
		answer("analyzed"))
	var child captured
	e.model.Conversation("analyze:", child.turn(answer("no behaviour to prevent")))
	e.install(corpusPlugin(t, "hookify"), "agents")

	out := e.run("run", "look back at the conversation")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	req := child.first(t)
	if sys := systemPrompt(t, req); !strings.HasPrefix(sys, "You are a conversation analysis specialist") {
		t.Errorf("the child's system prompt is not the agent's body:\n%.300s", sys)
	}
	if got, want := offeredTools(t, req), []string{"grep", "read_file"}; !slices.Equal(sorted(got), want) {
		t.Errorf("the child's tools = %v, want %v (its frontmatter's Read, Grep)", got, want)
	}
	root := e.model.Requests()[0]
	var r struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(root.Body, &r); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(r.Tools, func(x struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}) bool {
		return x.Name == "spawn_agent"
	})
	if i < 0 || !strings.Contains(r.Tools[i].Description, "hookify:conversation-analyzer: Use this agent") {
		t.Errorf("spawn_agent's description does not list the plugin's agent: %+v", r.Tools)
	}
	last := e.model.Requests()[len(e.model.Requests())-1]
	if res := toolResults(t, last)["sa"]; res.isError || !strings.Contains(res.text, "no behaviour to prevent") {
		t.Errorf("spawn_agent result = %+v", res)
	}
	for _, ev := range out.events {
		if ev.Type == "subagent_start" && ev.AgentType != "hookify:conversation-analyzer" {
			t.Errorf("subagent_start agent_type = %q", ev.AgentType)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// firstUserText is the text of a request's first user message.
func firstUserText(t *testing.T, req testenv.ModelRequest) string {
	t.Helper()
	var r anthropicRequest
	if err := req.Decode(&r); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range r.Messages[0].Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestRunPluginCommand calls a Claude plugin's command: its arguments are
// substituted, its !`git status` runs in the workspace before the prompt
// is sent (a long output cut at 8 KiB, and said so), an @file is read
// from the workspace (one outside it is refused), and the turn offers only
// its allowed-tools.
func TestRunPluginCommand(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("status noted"))
	src := filepath.Join(t.TempDir(), "review")
	testenv.WriteFile(t, filepath.Join(src, ".claude-plugin/plugin.json"), `{"name": "review"}`, 0o644)
	testenv.WriteFile(t, filepath.Join(src, "commands/status.md"), "---\n"+
		"description: Summarize the working tree\nargument-hint: MODE [TOPIC]\n"+
		"allowed-tools: [\"Bash(git status:*)\", \"Read\", \"AskUserQuestion\"]\n---\n"+
		"Mode $1, topic $2, all: $ARGUMENTS\n"+
		"Status: !`git status --short`\n"+
		"Root: ${CLAUDE_PLUGIN_ROOT}\n"+
		"Long: !`head -c 20000 /dev/zero | tr '\\0' a`\n"+
		"Read @notes.txt first.\n", 0o644)
	testenv.WriteFile(t, filepath.Join(src, "commands/leak.md"), "Read @../outside.txt\n", 0o644)
	testenv.WriteFile(t, filepath.Join(e.ws, "notes.txt"), "the notes\n", 0o644)
	testenv.WriteFile(t, filepath.Join(e.ws, "untracked.go"), "package x\n", 0o644)
	if out, err := exec.Command("git", "-C", e.ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	e.install(src, "commands")

	out := e.run("run", `/review:status fast "error paths"`)
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	req := e.model.Requests()[0]
	msg := firstUserText(t, req)
	for _, want := range []string{
		`Mode fast, topic error paths, all: fast "error paths"`,
		"Status: ?? notes.txt\n?? untracked.go",
		"Root: " + filepath.Join(e.home, "plugins", "review"),
		"[the output of head -c 20000 /dev/zero | tr '\\0' a: cut at 8192 of 16384 bytes]",
		"<file path=\"notes.txt\">\nthe notes\n</file>",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the prompt lacks %q:\n%.2000s", want, msg)
		}
	}
	if got, want := sorted(offeredTools(t, req)), []string{"bash", "read_file"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want the command's allowed-tools %v", got, want)
	}

	testenv.WriteFile(t, filepath.Join(filepath.Dir(e.ws), "outside.txt"), "secret\n", 0o644)
	if out := e.run("run", "/review:leak"); out.code == 0 || !strings.Contains(out.stderr, "@../outside.txt") {
		t.Errorf("a file outside the workspace was read: exit %d\n%s", out.code, out.stderr)
	}
}

// TestExtensionsPluginComponents: the extensions report lists each
// component of a Claude plugin with its status and reason.
func TestExtensionsPluginComponents(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.install(corpusPlugin(t, "hookify"), "agents,commands")
	out := e.run("extensions", "--json")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	var rep struct {
		Artifacts []struct {
			Type, Name, Status, Reason string
		} `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.stdout)
	}
	got := map[string]string{}
	for _, a := range rep.Artifacts {
		if a.Type == "plugin_component" {
			got[a.Name] = a.Status + ": " + a.Reason
		}
	}
	for name, want := range map[string]string{
		"hookify:conversation-analyzer": "active: ",
		"hookify:hookify":               "active: allowed-tools AskUserQuestion, TodoWrite: aerie has no such tool",
		"hookify hooks":                 "inactive: not enabled by components",
		"hookify skills":                "inactive: not enabled by components",
	} {
		if !strings.HasPrefix(got[name], want) {
			t.Errorf("%s: %q, want %q…", name, got[name], want)
		}
	}
}

// TestRunPluginHooks installs a Claude plugin with its hooks: its
// hooks.json's PreToolUse hook, a script under the plugin called through
// ${CLAUDE_PLUGIN_ROOT}, denies a Bash call with Claude's JSON protocol;
// the model sees the denial, the command never runs, and the hook saw
// CLAUDE_PLUGIN_ROOT and the call. Its hook with an if condition aerie
// cannot evaluate does not run, and the extensions report says so.
func TestRunPluginHooks(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(call("b1", "bash", map[string]any{"command": "touch marker"})),
		answer("the guard said no"))
	src := filepath.Join(t.TempDir(), "guard")
	testenv.WriteFile(t, filepath.Join(src, ".claude-plugin/plugin.json"), `{"name": "guard"}`, 0o644)
	testenv.WriteFile(t, filepath.Join(src, "hooks/hooks.json"), `{
  "hooks": {
    "Notification": [{"hooks": [{"type": "command", "command": "true"}]}],
    "PreToolUse": [{
      "matcher": "Bash",
      "hooks": [
        {"type": "command", "command": "touch \"${CLAUDE_PLUGIN_ROOT}/if-ran\"", "if": "Bash(touch:*)"},
        {"type": "command", "command": "\"${CLAUDE_PLUGIN_ROOT}/hooks/deny.sh\"", "timeout": 10, "statusMessage": "guarding"}
      ]
    }]
  }
}`, 0o644)
	testenv.WriteFile(t, filepath.Join(src, "hooks/deny.sh"), `#!/bin/bash
printf '%s' "$CLAUDE_PLUGIN_ROOT" > "$CLAUDE_PLUGIN_ROOT/seen-root"
cat > "$CLAUDE_PLUGIN_ROOT/seen-input"
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "guard: no touching"}}'
`, 0o755)
	e.install(src, "hooks")
	root := filepath.Join(e.home, "plugins", "guard")

	out := e.run("run", "make a marker")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	if res := toolResults(t, reqs[len(reqs)-1])["b1"]; !strings.Contains(res.text, "guard: no touching") {
		t.Errorf("the model did not see the denial: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "marker")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the denied command ran: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "seen-root")); err != nil || string(got) != root {
		t.Errorf("the hook saw CLAUDE_PLUGIN_ROOT %q (%v), want %q", got, err, root)
	}
	if in, err := os.ReadFile(filepath.Join(root, "seen-input")); err != nil || !strings.Contains(string(in), `"touch marker"`) {
		t.Errorf("the hook's input %q (%v) lacks the call", in, err)
	}
	if _, err := os.Stat(filepath.Join(root, "if-ran")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the hook with an if condition ran: %v", err)
	}

	got := e.pluginComponents()
	for name, want := range map[string]string{
		"guard hooks Notification":           `skipped: unsupported event: aerie has no event "Notification"`,
		"guard hooks PreToolUse[0].hooks[0]": "skipped: matcher Bash; if: line 7: a condition (if) aerie cannot evaluate",
		"guard hooks PreToolUse[0].hooks[1]": "active: matcher Bash; statusMessage is ignored",
	} {
		if !strings.HasPrefix(got[name], want) {
			t.Errorf("%s: %q, want %q…", name, got[name], want)
		}
	}
}

// pluginComponents are the plugin_component states of aerie extensions
// --json, "status: reason" by name.
func (e *e2e) pluginComponents() map[string]string {
	e.t.Helper()
	rep := e.run("extensions", "--json")
	var r struct {
		Artifacts []struct{ Type, Name, Status, Reason string } `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(rep.stdout), &r); err != nil {
		e.t.Fatalf("%v\n%s", err, rep.stdout)
	}
	got := map[string]string{}
	for _, a := range r.Artifacts {
		if a.Type == "plugin_component" {
			got[a.Name] = a.Status + ": " + a.Reason
		}
	}
	return got
}
