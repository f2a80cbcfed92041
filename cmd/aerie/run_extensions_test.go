package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/transcript"

	"github.com/aerie-run/aerie/hack/testenv"
)

// pinAll pins every project artifact the extensions report suggests a pin
// for, as a user would after reviewing them.
func (e *e2e) pinAll() {
	e.t.Helper()
	out := e.run("extensions", "--json")
	var rep struct {
		Artifacts []struct {
			Type, Name, Status string
			Pin                *struct {
				Path   string `json:"path"`
				SHA256 string `json:"sha256"`
			} `json:"pin"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		e.t.Fatalf("extensions --json: %v\n%s\n%s", err, out.stdout, out.stderr)
	}
	var pins strings.Builder
	for _, a := range rep.Artifacts {
		if a.Pin != nil {
			fmt.Fprintf(&pins, "[[pin]]\npath = %q\nsha256 = %q\n", a.Pin.Path, a.Pin.SHA256)
		}
	}
	if pins.Len() == 0 {
		e.t.Fatalf("the report suggests no pin:\n%s", out.stdout)
	}
	testenv.WriteFile(e.t, filepath.Join(e.home, "trust.toml"), pins.String(), 0o600)
}

func systemPrompt(t *testing.T, req testenv.ModelRequest) string {
	t.Helper()
	var r struct {
		System []struct{ Text string } `json:"system"`
	}
	if err := req.Decode(&r); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range r.System {
		b.WriteString(s.Text)
	}
	return b.String()
}

func offeredTools(t *testing.T, req testenv.ModelRequest) []string {
	t.Helper()
	var r anthropicRequest
	if err := req.Decode(&r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestRunExtensions runs a session with a project custom tool, project
// instructions, prompt files and hooks from the home layer and the
// project, trusted only once pinned.
func TestRunExtensions(t *testing.T) {
	t.Parallel()
	turns := []testenv.Turn{
		toolTurn(
			call("wc", "word_count", map[string]any{"text": "one two three"}),
			call("denied", "bash", map[string]any{"command": "rm -rf /tmp/nothing"}),
			call("rewritten", "bash", map[string]any{"command": "echo original"}),
		),
		answer("first try"),
		answer("verified"),
	}
	e := newE2E(t, answer("unpinned"), answer("unpinned, verified"))
	// A custom tool and project instructions in the workspace.
	testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/tools/word_count.toml"), `name = "word_count"
description = "Counts words."
command = ["./count.sh"]
[parameters.text]
type = "string"
required = true
`, 0o644)
	testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/tools/count.sh"), "#!/bin/sh\nread -r input\necho \"words of $input\"\n", 0o755)
	testenv.WriteFile(t, filepath.Join(e.ws, "AGENTS.md"), "Always run the linter.\n", 0o644)
	testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/APPEND_SYSTEM.md"), "Project append.\n", 0o644)
	// A project hook that must not run until pinned.
	testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/hooks/mark.yaml"), "hooks:\n  SessionStart:\n    - hooks:\n        - type: command\n          command: \"touch project-hook-ran\"\n", 0o644)
	// Hooks in the home layer, which the user controls: no pin needed.
	testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"), `[[hooks.PreToolUse]]
matcher = "bash"
[[hooks.PreToolUse.hooks]]
command = "`+filepath.Join(e.home, "guard.sh")+`"

[[hooks.Stop]]
[[hooks.Stop.hooks]]
command = "`+filepath.Join(e.home, "verify.sh")+`"

`, 0o644)
	// OpenVaala hooks add context at session start (Osprey's only observe).
	testenv.WriteFile(t, filepath.Join(e.home, "hooks/context.yaml"), `hooks:
  SessionStart:
    - hooks:
        - type: command
          command: "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"SessionStart\", \"additionalContext\": \"The release is on Friday.\"}}'"
`, 0o644)
	testenv.WriteFile(t, filepath.Join(e.home, "guard.sh"), `#!/bin/sh
input=$(cat)
case "$input" in
*rm\ -rf*) echo "destructive commands are not allowed" >&2; exit 2 ;;
*original*) echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo rewritten"}}}' ;;
esac
`, 0o755)
	// The Stop hook blocks once: the model must verify its work.
	testenv.WriteFile(t, filepath.Join(e.home, "verify.sh"), `#!/bin/sh
if [ -e stopped-once ]; then exit 0; fi
touch stopped-once
echo '{"decision": "block", "reason": "run the tests before you stop"}'
`, 0o755)

	// Unpinned: the custom tool is not offered and the project hook does
	// not run.
	out := e.run("run", "count")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if names := offeredTools(t, e.model.Requests()[0]); strings.Contains(strings.Join(names, ","), "word_count") {
		t.Errorf("the unpinned custom tool was offered: %v", names)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "project-hook-ran")); err == nil {
		t.Error("the unpinned project hook ran")
	}

	if err := os.Remove(filepath.Join(e.ws, "stopped-once")); err != nil {
		t.Fatalf("the Stop hook did not run in the unpinned session: %v", err)
	}
	e.pinAll()
	e.model.Add(turns...)
	out = e.run("run", "count")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "project-hook-ran")); err != nil {
		t.Error("the pinned project hook did not run")
	}
	reqs := e.model.Requests()[2:]
	sys := systemPrompt(t, reqs[0])
	for _, want := range []string{"You are aerie", "Project append.", "Always run the linter.", "The release is on Friday."} {
		if !strings.Contains(sys, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, sys)
		}
	}
	res := toolResults(t, reqs[1])
	if r := res["wc"]; r.isError || !strings.Contains(r.text, `words of {"text":"one two three"}`) {
		t.Errorf("custom tool result = %+v", r)
	}
	if r := res["denied"]; !r.isError || !strings.Contains(r.text, "destructive commands are not allowed") {
		t.Errorf("denied call result = %+v", r)
	}
	if r := res["rewritten"]; r.isError || !strings.Contains(r.text, "rewritten") {
		t.Errorf("rewritten call result = %+v", r)
	}
	// The Stop hook blocked the first answer: the model was told why.
	var last anthropicRequest
	if err := reqs[2].Decode(&last); err != nil {
		t.Fatal(err)
	}
	final := last.Messages[len(last.Messages)-1]
	if final.Role != "user" || final.Content[0].Text != "run the tests before you stop" {
		t.Errorf("after the blocked stop the model got %+v", final)
	}
	if end := out.end(t); end.Outcome != transcript.OutcomeCompleted || end.Text != "verified" {
		t.Errorf("session_end = %+v", end)
	}
	var hookEvents int
	for _, ev := range out.events {
		if ev.Type == events.Hook {
			hookEvents++
		}
	}
	if hookEvents == 0 {
		t.Error("no hook events in the output")
	}
}

// TestRunToolset offers only the tools of the named toolset.
func TestRunToolset(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("ok"))
	testenv.WriteFile(t, filepath.Join(e.home, "toolsets.toml"), "[toolsets.readonly]\ntools = [\"read_file\", \"grep\"]\n", 0o644)
	out := e.run("run", "--toolset", "readonly", "look")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if got := strings.Join(offeredTools(t, e.model.Requests()[0]), ","); got != "read_file,grep" {
		t.Errorf("offered tools %s, want read_file,grep", got)
	}
	bad := e.run("run", "--toolset", "nosuch", "look")
	if bad.code != 2 || !strings.Contains(bad.stderr, "nosuch") {
		t.Errorf("unknown toolset: exit %d, stderr %q", bad.code, bad.stderr)
	}
}

// TestRunSkills offers the layers' skills to the model, attaches the ones a
// prompt names, and reads them through the skill tool.
func TestRunSkills(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(call("s", "skill", map[string]any{"name": "release-notes"})), answer("notes written"))
	testenv.WriteFile(t, filepath.Join(e.home, "skills/release-notes/SKILL.md"), "---\nname: release-notes\ndescription: Write release notes from the git log.\n---\nGroup the changes by component.\n", 0o644)
	testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/skills/broken/SKILL.md"), "---\nname: broken\n---\nno description\n", 0o644)
	out := e.run("run", "/skill:release-notes for v1.2")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	if sys := systemPrompt(t, reqs[0]); !strings.Contains(sys, "release-notes") || !strings.Contains(sys, "Write release notes from the git log.") {
		t.Errorf("the system prompt lacks the skill catalog:\n%s", sys)
	}
	var first anthropicRequest
	if err := reqs[0].Decode(&first); err != nil {
		t.Fatal(err)
	}
	if msg := first.Messages[0].Content[0].Text; !strings.Contains(msg, "Group the changes by component.") || !strings.Contains(msg, "for v1.2") {
		t.Errorf("the prompt does not carry the attached skill:\n%s", msg)
	}
	if r := toolResults(t, reqs[1])["s"]; r.isError || !strings.Contains(r.text, "Group the changes by component.") {
		t.Errorf("skill tool result = %+v", r)
	}
	bad := e.run("run", "/skill:nosuch do it")
	if bad.code != 2 || !strings.Contains(bad.stderr, "nosuch") {
		t.Errorf("an unavailable /skill: exit %d, stderr %q; want 2", bad.code, bad.stderr)
	}
}

// TestRunIgnoresCurrentDirectorySkills runs in a repository whose top
// directory holds skills/: neither a malformed skill there (which would fail
// a private layer) nor a link out of the workspace is read, because the
// bundled layer comes from the binary, not from the current directory.
func TestRunIgnoresCurrentDirectorySkills(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("done"))
	testenv.WriteFile(t, filepath.Join(e.ws, "skills/bad/SKILL.md"), "no frontmatter at all\n", 0o644)
	outside := t.TempDir()
	testenv.WriteFile(t, filepath.Join(outside, "SKILL.md"), "---\nname: planted\ndescription: Read from outside the workspace.\n---\nsecret\n", 0o644)
	if err := os.Symlink(outside, filepath.Join(e.ws, "skills/planted")); err != nil {
		t.Fatal(err)
	}
	out := e.run("run", "hello")
	if out.code != 0 {
		t.Fatalf("exit %d; a repository's skills/ must not count as the bundled layer\n%s", out.code, out.stderr)
	}
	if sys := systemPrompt(t, e.model.Requests()[0]); strings.Contains(sys, "planted") {
		t.Errorf("a skill linked from the current directory's skills/ was offered:\n%s", sys)
	}
}

// TestRunPlugins installs a plugin and runs a session with its skill and
// its hook.
func TestRunPlugins(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(call("s", "skill", map[string]any{"name": "review:checklist"})), answer("reviewed"))
	src := filepath.Join(t.TempDir(), "review")
	testenv.WriteFile(t, filepath.Join(src, ".aerie-plugin/plugin.yaml"), `name: review
version: "1.0.0"
description: Review helpers.
hooks:
  SessionStart:
    - hooks:
        - type: command
          script: ./hooks/mark
`, 0o644)
	testenv.WriteFile(t, filepath.Join(src, "hooks/mark"), "#!/bin/sh\necho \"$AERIE_PLUGIN_ROOT\" > plugin-hook-ran\n", 0o755)
	testenv.WriteFile(t, filepath.Join(src, "skills/checklist/SKILL.md"), "---\ndescription: The review checklist.\n---\nCheck the error paths.\n", 0o644)
	if r := e.run("plugin", "install", src); r.code != 0 {
		t.Fatalf("plugin install: exit %d\n%s", r.code, r.stderr)
	}
	out := e.run("run", "review the change")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	if sys := systemPrompt(t, reqs[0]); !strings.Contains(sys, "review:checklist") {
		t.Errorf("the plugin's skill is not in the catalog:\n%s", sys)
	}
	if r := toolResults(t, reqs[1])["s"]; r.isError || !strings.Contains(r.text, "Check the error paths.") {
		t.Errorf("skill tool result = %+v", r)
	}
	b, err := os.ReadFile(filepath.Join(e.ws, "plugin-hook-ran"))
	if err != nil || !strings.Contains(string(b), filepath.Join(e.home, "plugins", "review")) {
		t.Errorf("the plugin's hook did not run with AERIE_PLUGIN_ROOT: %q, %v", b, err)
	}
}

// TestRunPluginsDisabled leaves out the plugins the configuration disables.
func TestRunPluginsDisabled(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("ok"))
	testenv.WriteFile(t, filepath.Join(e.home, "plugins/review/.aerie-plugin/plugin.yaml"), "name: review\n", 0o644)
	testenv.WriteFile(t, filepath.Join(e.home, "plugins/review/skills/checklist/SKILL.md"), "---\ndescription: The review checklist.\n---\nCheck.\n", 0o644)
	testenv.WriteFile(t, filepath.Join(e.home, "config.toml"), "[plugins]\ndisabled = [\"review\"]\n", 0o644)
	out := e.run("run", "review")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if sys := systemPrompt(t, e.model.Requests()[0]); strings.Contains(sys, "review:checklist") {
		t.Errorf("a disabled plugin's skill was offered:\n%s", sys)
	}
	// A malformed global file is a warning, and its values are dropped.
	testenv.WriteFile(t, filepath.Join(e.home, "config.toml"), "[plugins]\ndisabled = \"review\"\n", 0o644)
	e.model.Add(answer("ok"))
	if out := e.run("run", "review"); out.code != 0 || !strings.Contains(out.stderr, "plugins.disabled") {
		t.Errorf("a malformed plugins.disabled is not reported: %s", out.stderr)
	}
}

// TestRunHookFailures runs, through `aerie run`, the hook answers that deny a
// call or fail: a PreToolUse verdict that denies, one that is not valid JSON
// (a warning; the call runs) and one past its timeout (its process group is
// torn down; the OpenVaala hook blocks on failure).
func TestRunHookFailures(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(
			call("denied", "bash", map[string]any{"command": "echo deny-me"}),
			call("malformed", "bash", map[string]any{"command": "echo malformed-ran"}),
			call("slow", "bash", map[string]any{"command": "echo slow-ran"}),
		),
		answer("done"),
	)
	testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"), `[[hooks.PreToolUse]]
matcher = "bash"
[[hooks.PreToolUse.hooks]]
command = "`+filepath.Join(e.home, "verdict.sh")+`"
`, 0o644)
	testenv.WriteFile(t, filepath.Join(e.home, "verdict.sh"), `#!/bin/sh
input=$(cat)
case "$input" in
*deny-me*) echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "denied by policy"}}' ;;
*malformed-ran*) echo '{"decision":' ;;
esac
`, 0o755)
	testenv.WriteFile(t, filepath.Join(e.home, "hooks/slow.yaml"), `hooks:
  PreToolUse:
    - matcher: bash
      hooks:
        - type: command
          script: `+filepath.Join(e.home, "slow.sh")+`
          timeout: 1
          on_failure: block
`, 0o644)
	// The slow hook leaves its pid and that of a child in the background
	// holding its output open, then waits far past its timeout.
	testenv.WriteFile(t, filepath.Join(e.home, "slow.sh"), `#!/bin/sh
input=$(cat)
case "$input" in
*slow-ran*) sleep 300 & echo $$ $! > slow.pids; wait ;;
esac
`, 0o755)

	out := e.run("run", "go")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	res := toolResults(t, e.model.Requests()[1])
	if r := res["denied"]; !r.isError || !strings.Contains(r.text, "denied by policy") || strings.Contains(r.text, "deny-me") {
		t.Errorf("denied call result = %+v", r)
	}
	if r := res["malformed"]; r.isError || !strings.Contains(r.text, "malformed-ran") {
		t.Errorf("the call under a malformed verdict did not run: %+v", r)
	}
	if r := res["slow"]; !r.isError || !strings.Contains(r.text, "timed out") || strings.Contains(r.text, "slow-ran") {
		t.Errorf("the call under a timed-out hook = %+v", r)
	}
	if !strings.Contains(out.stdout+out.stderr, "invalid JSON output") {
		t.Errorf("no warning names the malformed verdict:\n%s\n%s", out.stdout, out.stderr)
	}
	pids, err := os.ReadFile(filepath.Join(e.ws, "slow.pids"))
	if err != nil {
		t.Fatalf("the slow hook did not run: %v", err)
	}
	requireGone(t, strings.Fields(string(pids)))
	if end := out.end(t); end.Outcome != transcript.OutcomeCompleted || end.Text != "done" {
		t.Errorf("session_end = %+v", end)
	}
}

// TestRunHookEndsTurn runs sessions whose hooks answer continue: false: a
// PreToolUse hook ends the turn at its call (the calls after it do not run
// and the model is not asked again), and a UserPromptSubmit hook ends it
// before the first request. Both runs complete with the hook's reason; the
// hooks of one turn share its turn_id, and their system messages reach the
// events, not the model.
func TestRunHookEndsTurn(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(
		call("first", "bash", map[string]any{"command": "touch first-ran"}),
		call("stop", "bash", map[string]any{"command": "touch stop-ran"}),
		call("after", "bash", map[string]any{"command": "touch after-ran"}),
	), answer("never asked"))
	testenv.WriteFile(t, filepath.Join(e.home, "hooks/turn.yaml"), `hooks:
  UserPromptSubmit:
    - hooks:
        - type: command
          script: `+filepath.Join(e.home, "turn.sh")+`
  PreToolUse:
    - matcher: bash
      hooks:
        - type: command
          script: `+filepath.Join(e.home, "turn.sh")+`
`, 0o644)
	testenv.WriteFile(t, filepath.Join(e.home, "turn.sh"), `#!/bin/sh
input=$(cat)
echo "$input" >> hook-inputs.jsonl
case "$input" in
*halt*) echo '{"continue": false, "stopReason": "maintenance window"}' ;;
*stop-ran*) echo '{"continue": false, "stopReason": "budget spent", "systemMessage": "the cost guard stopped the agent"}' ;;
esac
`, 0o755)

	out := e.run("run", "go")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if end := out.end(t); end.Outcome != transcript.OutcomeCompleted || end.Reason != "a PreToolUse hook ended the turn: budget spent" {
		t.Errorf("session_end = %+v", end)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1: the turn ended at the hook", n)
	}
	for name, want := range map[string]bool{"first-ran": true, "stop-ran": false, "after-ran": false} {
		if _, err := os.Stat(filepath.Join(e.ws, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
	var messages []string
	for _, ev := range out.events {
		if ev.Type == events.Hook {
			messages = append(messages, ev.Messages...)
		}
	}
	if !slices.Equal(messages, []string{"the cost guard stopped the agent"}) {
		t.Errorf("hook system messages in the events = %q", messages)
	}
	inputs, err := os.ReadFile(filepath.Join(e.ws, "hook-inputs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	turns := map[string]int{}
	for line := range strings.Lines(string(inputs)) {
		var in struct {
			Event  string `json:"hook_event_name"`
			TurnID string `json:"turn_id"`
		}
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatalf("hook input %q: %v", line, err)
		}
		turns[in.TurnID]++
	}
	if len(turns) != 1 || turns[""] != 0 || slices.Collect(maps.Values(turns))[0] != 3 {
		t.Errorf("turn ids of the hooks' inputs (UserPromptSubmit and two PreToolUse) = %v, want one id for all three", turns)
	}

	out = e.run("run", "halt now")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if end := out.end(t); end.Outcome != transcript.OutcomeCompleted || end.Reason != "a UserPromptSubmit hook ended the turn: maintenance window" {
		t.Errorf("session_end = %+v", end)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests after the second run, want still 1", n)
	}
}

// TestRunHookApproval runs a call a hook asks a person to approve: refused
// by default, run with --hook-approval allow; an unknown policy is a
// configuration error.
func TestRunHookApproval(t *testing.T) {
	t.Parallel()
	ask := toolTurn(call("c1", "bash", map[string]any{"command": "touch approved"}))
	e := newE2E(t, ask, answer("refused"), ask, answer("ran"))
	testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"), "[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\n"+
		`command = "echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"commands need a person\"}}'"`+"\n", 0o644)

	out := e.run("run", "go")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if r := toolResults(t, e.model.Requests()[1])["c1"]; !r.isError || !strings.Contains(r.text, "approval required; denied in a headless run") {
		t.Errorf("default policy: result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "approved")); err == nil {
		t.Error("the command ran without approval")
	}

	out = e.run("run", "--hook-approval", "allow", "go")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "approved")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
	var approval string
	for _, ev := range out.events {
		if ev.Type == events.Hook && ev.Status == "PreToolUse:allow" {
			approval = ev.Reason
		}
	}
	if !strings.Contains(approval, "approved in advance") {
		t.Errorf("the hook event does not say who approved: %q", approval)
	}

	out = e.run("run", "--hook-approval", "maybe", "go")
	if out.code != 2 || !strings.Contains(out.stderr, `--hook-approval: unknown approval policy "maybe": use deny`) {
		t.Errorf("unknown policy: exit %d\n%s", out.code, out.stderr)
	}
}
