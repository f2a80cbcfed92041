package controllers

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// corpusMarketplace is the official Claude Code marketplace's catalog with
// six of its plugins.
const corpusMarketplace = "../runner/plugins/testdata/corpus/claude-plugins/anthropics__claude-plugins-official"

// pluginChildTask starts the task of the plugin agent that
// testPlatformPlugins spawns: the key of its conversation with the model.
const pluginChildTask = "comments: "

// testPlatformPlugins is a platform team shipping a marketplace selection:
// five plugins installed from the official Claude marketplace (one of them
// a strict: false entry without a manifest of its own; two with their
// agents and commands) are packed with aerie plugin pack into a platform
// layer, and a session in a pod is prompted with a plugin command, reads a
// plugin skill and spawns a plugin agent. The extensions report of the
// layer the pod mounted lists the plugins' components.
func testPlatformPlugins(t *testing.T, e *e2e) {
	ns, platform := e.namespace(t), e.cp.Namespace(t)
	e = e.in(ns)
	market, err := filepath.Abs(corpusMarketplace)
	if err != nil {
		t.Fatal(err)
	}
	aerie := e.aerieCLI(t, t.TempDir())
	aerie(nil, "plugin", "marketplace", "add", market)
	components := map[string]string{"hookify": "skills,agents,commands", "pr-review-toolkit": "agents,commands"}
	selection := []string{"discord", "gopls-lsp", "hookify", "pr-review-toolkit", "security-guidance"}
	for _, p := range selection {
		args := []string{"plugin", "install", p + "@claude-plugins-official"}
		if c := components[p]; c != "" {
			args = append(args, "--components", c)
		}
		aerie(nil, args...)
	}
	e.packLayer(t, aerie, platform, "official-plugins", selection...)
	e.startController(t, ns, platform)

	model := testenv.StartModelServer(t,
		testenv.Turn{
			ToolCalls: []testenv.ToolCall{
				{ID: "read-skill", Name: "skill", Arguments: `{"name":"discord:access"}`},
				{ID: "spawn", Name: "spawn_agent", Arguments: `{"task":"` + pluginChildTask + `check the comments","agent_type":"pr-review-toolkit:comment-analyzer"}`},
			},
			Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 10},
		},
		testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	model.Conversation(pluginChildTask, testenv.Turn{Text: "the comments are accurate", Usage: testenv.TokenUsage{InputTokens: 50, OutputTokens: 5}})
	e.session(t, "platform-plugins", model, func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Prompt = "/hookify:hookify dangerous rm -rf"
	})
	pod := e.pod(t, "platform-plugins")
	s := e.waitFinished(t, "platform-plugins")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}
	var root, child []testenv.ModelRequest
	for _, r := range model.Requests() {
		if strings.HasPrefix(r.FirstUser(), pluginChildTask) {
			child = append(child, r)
		} else {
			root = append(root, r)
		}
	}
	if len(root) != 2 || len(child) != 1 {
		t.Fatalf("%d requests of the session and %d of its child, want 2 and 1", len(root), len(child))
	}
	checkPluginRequests(t, root, child)
	checkPluginReport(t, aerie, e.runner.VolumePath(pod, "layer-0"))
}

// testPlatformPluginHooks ships a Claude plugin's hooks/hooks.json in a
// packed platform layer: in the pod, its PreToolUse hook (a script of the
// plugin, found through ${CLAUDE_PLUGIN_ROOT}, which must be set) denies the
// session's bash call; the model sees the reason and the command never ran.
func testPlatformPluginHooks(t *testing.T, e *e2e) {
	ns, platform := e.namespace(t), e.cp.Namespace(t)
	e = e.in(ns)
	src := filepath.Join(t.TempDir(), "guard")
	testenv.WriteFile(t, filepath.Join(src, ".claude-plugin", "plugin.json"), `{"name": "guard"}`, 0o644)
	testenv.WriteFile(t, filepath.Join(src, "hooks", "hooks.json"), `{"hooks": {"PreToolUse": [{"matcher": "Bash",
  "hooks": [{"type": "command", "command": "bash \"${CLAUDE_PLUGIN_ROOT}/hooks/deny.sh\"", "timeout": 30}]}]}}`, 0o644)
	testenv.WriteFile(t, filepath.Join(src, "hooks", "deny.sh"), `[ -n "$CLAUDE_PLUGIN_ROOT" ] || exit 1
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "guard: no touching"}}'
`, 0o644)
	aerie := e.aerieCLI(t, t.TempDir())
	aerie(nil, "plugin", "install", src, "--components", "hooks")
	e.packLayer(t, aerie, platform, "guard-plugin", "guard")
	e.startController(t, ns, platform)

	model := testenv.StartModelServer(t, bashTurn("b1", "touch marker"), answer("the guard said no"))
	e.session(t, "platform-plugin-hooks", model)
	pod := e.pod(t, "platform-plugin-hooks")
	s := e.waitFinished(t, "platform-plugin-hooks")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}
	reqs := model.Requests()
	if got := toolResults(t, reqs[len(reqs)-1])["b1"]; !strings.Contains(got, "guard: no touching") {
		t.Errorf("the model did not see the hook's denial: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.runner.VolumePath(pod, volumeWorkspace), "marker")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the denied command ran: %v", err)
	}
}

// aerieCLI runs this tree's aerie with home as its $HOME and $AERIE_HOME
// and env besides, and returns its standard output; a failure ends the
// test with its standard error.
func (e *e2e) aerieCLI(t *testing.T, home string) func(env []string, args ...string) string {
	return func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(e.bin, args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AERIE_HOME=" + home}, env...)
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("aerie %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
}

// packLayer packs the installed plugins of aerie (aerieCLI's) into the
// platform layer name and creates its ConfigMap in namespace platform.
func (e *e2e) packLayer(t *testing.T, aerie func(env []string, args ...string) string, platform, name string, plugins ...string) {
	t.Helper()
	manifest := aerie(nil, append(append([]string{"plugin", "pack"}, plugins...), "--name", name, "-n", platform)...)
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(manifest), &cm); err != nil {
		t.Fatalf("the packed layer: %v", err)
	}
	if err := e.cp.Client.Create(t.Context(), &cm); err != nil {
		t.Fatalf("create the platform layer: %v", err)
	}
}

// checkPluginRequests checks what the model was sent in testPlatformPlugins:
// the command hookify:hookify expanded as the prompt, the skills and agents
// of the plugins offered, the skill's body, and the plugin agent's body as
// its child's system prompt.
func checkPluginRequests(t *testing.T, root, child []testenv.ModelRequest) {
	t.Helper()
	prompt := root[0].FirstUser()
	for _, want := range []string{"Hookify - Create Hooks from Unwanted Behaviors", "`dangerous rm -rf`"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt is not the command hookify:hookify with its arguments; it lacks %q:\n%.1500s", want, prompt)
		}
	}
	var first struct {
		System json.RawMessage `json:"system"`
		Tools  []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := root[0].Decode(&first); err != nil {
		t.Fatal(err)
	}
	for _, skill := range []string{"discord:access", "discord:configure"} {
		if !strings.Contains(string(first.System), skill) {
			t.Errorf("the system prompt does not list the plugin skill %s: %s", skill, first.System)
		}
	}
	var spawn string
	for _, tool := range first.Tools {
		if tool.Name == "spawn_agent" {
			spawn = tool.Description
		}
	}
	for _, agent := range []string{"pr-review-toolkit:comment-analyzer", "pr-review-toolkit:code-reviewer", "hookify:conversation-analyzer"} {
		if !strings.Contains(spawn, agent) {
			t.Errorf("spawn_agent's description does not list the plugin agent %s: %q", agent, spawn)
		}
	}
	results := toolResults(t, root[1])
	if got := results["read-skill"]; !strings.Contains(got, "Discord Channel Access Management") {
		t.Errorf("the skill tool returned %q, want the plugin skill's body from the platform layer", got)
	}
	if got := results["spawn"]; !strings.Contains(got, "the comments are accurate") {
		t.Errorf("spawn_agent returned %q, want the plugin agent's answer", got)
	}
	var c struct {
		System json.RawMessage `json:"system"`
	}
	if err := child[0].Decode(&c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c.System), "You are a meticulous code comment analyzer") {
		t.Errorf("the child's system prompt is not the body of pr-review-toolkit:comment-analyzer:\n%.500s", c.System)
	}
}

// checkPluginReport reads the extensions report of the layer the runner pod
// mounted, dir, as aerie's own layer: each of the five plugins is active,
// and their components have the status the install's components give them.
func checkPluginReport(t *testing.T, aerie func(env []string, args ...string) string, dir string) {
	t.Helper()
	out := aerie([]string{"AERIE_HOME=" + dir}, "extensions", "--json")
	var rep struct {
		Artifacts []struct{ Type, Name, Status, Reason string } `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("the extensions report: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, a := range rep.Artifacts {
		if a.Type == "plugin" || a.Type == "plugin_component" {
			got[a.Type+" "+a.Name] = a.Status + ": " + a.Reason
		}
	}
	want := map[string]string{
		"plugin_component hookify:conversation-analyzer":      "active: ",
		"plugin_component hookify:hookify":                    "active: ",
		"plugin_component pr-review-toolkit:comment-analyzer": "active: ",
		"plugin_component pr-review-toolkit:review-pr":        "active: ",
		"plugin_component hookify hooks":                      "inactive: not enabled by components",
		"plugin_component security-guidance hooks":            "inactive: not enabled by components",
	}
	for _, p := range []string{"discord", "gopls-lsp", "hookify", "pr-review-toolkit", "security-guidance"} {
		want["plugin "+p] = "active: "
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || !strings.HasPrefix(g, w) {
			t.Errorf("%s: %q, want %q…; the report's plugins and components: %q", name, g, w, got)
		}
	}
}
