package hooks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
)

// claudeSource is the source of a plugin's hooks.json at /p.
var claudeSource = Source{
	Layer: layer.Layer{Name: "plugin", Kind: layer.KindHome}, File: "/p/hooks/hooks.json", Dir: "/p", Root: "/p",
	Confined: true, Env: []string{"CLAUDE_PLUGIN_ROOT=/p", "AERIE_PLUGIN_ROOT=/p"},
}

// partStrings are parts as "field [matcher] status: reason".
func partStrings(ps []Part) []string {
	var out []string
	for _, p := range ps {
		s := "active"
		if p.Skipped {
			s = "skipped"
		}
		out = append(out, p.Field+" ["+p.Matcher+"] "+s+": "+p.Reason)
	}
	return out
}

// TestParseClaudeCorpus reads every Claude and Codex hooks.json of the
// corpus as the other agent means it: each hook runs, or is skipped with
// its precise reason, and no file is refused.
func TestParseClaudeCorpus(t *testing.T) {
	t.Parallel()
	const (
		ifWhy = "if: line %d: a condition (if) aerie cannot evaluate: the hook is skipped rather than run where it " +
			"was meant not to; test the input in the command instead; asyncRewake: line %d: asynchronous hooks " +
			"(asyncRewake) are not supported: run to completion, its verdict would act at once where it was meant to wake the agent later"
		sg = `bash "/p/hooks/sg-python.sh" "/p/hooks/security_reminder_hook.py"`
	)
	b := func(id string, ev Event, matcher, cmd string, timeout time.Duration, exes ...string) brief {
		return brief{ID: claudeSource.File + "#" + id, Event: string(ev), Matcher: matcher, Command: cmd, Shell: "bash",
			Timeout: timeout, OnFailure: FailAllow, Executables: exes}
	}
	skip := func(field, matcher, why string, lines ...any) string {
		return field + " [" + matcher + "] skipped: " + strings.TrimSpace(sprintf(why, lines...))
	}
	tests := map[string]struct {
		hooks []brief
		parts []string
	}{
		"openai__plugins/plugins/replayio/hooks.json": {
			hooks: []brief{
				b("PostToolUse[0].hooks[0]", PostToolUse, "Bash", "./scripts/post_bash_upload.sh", time.Minute, "/w/scripts/post_bash_upload.sh"),
				b("Stop[0].hooks[0]", Stop, "", "./scripts/stop_close_and_upload.sh", time.Minute, "/w/scripts/stop_close_and_upload.sh"),
			},
			parts: []string{"PostToolUse[0].hooks[0] [Bash] active: ", "Stop[0].hooks[0] [] active: "},
		},
		"openai__openai-agents-js/.codex/hooks.json": {
			hooks: []brief{b("Stop[0].hooks[0]", Stop, "", `node "$(git rev-parse --show-toplevel)/.codex/hooks/stopRepoTidy.mjs"`, 20*time.Second)},
			parts: []string{"Stop[0].hooks[0] [] active: "},
		},
		"openai__codex-plugin-cc/plugins/codex/hooks/hooks.json": {
			hooks: []brief{
				b("SessionStart[0].hooks[0]", SessionStart, "", `node "/p/scripts/session-lifecycle-hook.mjs" SessionStart`, 5*time.Second),
				b("SessionEnd[0].hooks[0]", SessionEnd, "", `node "/p/scripts/session-lifecycle-hook.mjs" SessionEnd`, 5*time.Second),
				b("Stop[0].hooks[0]", Stop, "", `node "/p/scripts/stop-review-gate-hook.mjs"`, 900*time.Second),
			},
			parts: []string{"SessionStart[0].hooks[0] [] active: ", "SessionEnd[0].hooks[0] [] active: ", "Stop[0].hooks[0] [] active: "},
		},
		"anthropics__claude-plugins-official/plugins/hookify/hooks/hooks.json": {
			hooks: []brief{
				b("PreToolUse[0].hooks[0]", PreToolUse, "", `python3 "/p/hooks/pretooluse.py"`, 10*time.Second),
				b("PostToolUse[0].hooks[0]", PostToolUse, "", `python3 "/p/hooks/posttooluse.py"`, 10*time.Second),
				b("Stop[0].hooks[0]", Stop, "", `python3 "/p/hooks/stop.py"`, 10*time.Second),
				b("UserPromptSubmit[0].hooks[0]", UserPromptSubmit, "", `python3 "/p/hooks/userpromptsubmit.py"`, 10*time.Second),
			},
			parts: []string{"PreToolUse[0].hooks[0] [] active: ", "PostToolUse[0].hooks[0] [] active: ",
				"Stop[0].hooks[0] [] active: ", "UserPromptSubmit[0].hooks[0] [] active: "},
		},
		"anthropics__claude-plugins-official/plugins/ralph-loop/hooks/hooks.json": {
			hooks: []brief{b("Stop[0].hooks[0]", Stop, "", `bash "/p/hooks/stop-hook.sh"`, time.Minute)},
			parts: []string{"Stop[0].hooks[0] [] active: "},
		},
		"anthropics__claude-plugins-official/plugins/security-guidance/hooks/hooks.json": {
			hooks: []brief{
				b("SessionStart[0].hooks[0]", SessionStart, "", `bash "/p/hooks/sg-python.sh" "/p/hooks/ensure_agent_sdk.py"`, 180*time.Second),
				b("UserPromptSubmit[0].hooks[0]", UserPromptSubmit, "", sg, time.Minute),
				b("PostToolUse[0].hooks[0]", PostToolUse, "Edit|Write|MultiEdit|NotebookEdit", sg, time.Minute),
			},
			parts: []string{
				"SessionStart[0].hooks[0] [] active: ",
				"UserPromptSubmit[0].hooks[0] [] active: ",
				"PostToolUse[0].hooks[0] [Edit|Write|MultiEdit|NotebookEdit] active: ",
				skip("PostToolUse[1].hooks[0]", "Bash", ifWhy, 40, 41),
				skip("PostToolUse[1].hooks[1]", "Bash", ifWhy, 48, 49),
				skip("PostToolUse[1].hooks[2]", "Bash", ifWhy, 56, 57),
				skip("PostToolUse[1].hooks[3]", "Bash", ifWhy, 64, 65),
				skip("PostToolUse[1].hooks[4]", "Bash", ifWhy, 72, 73),
				skip("Stop[0].hooks[0]", "", "asyncRewake: line 87: asynchronous hooks (asyncRewake) are not supported: "+
					"run to completion, its verdict would act at once where it was meant to wake the agent later"),
			},
		},
	}
	for name, w := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata/corpus", name))
			if err != nil {
				t.Fatal(err)
			}
			hooks, parts, probs := ParseClaude(data, claudeSource, "/w")
			if len(probs) > 0 {
				t.Fatalf("problems:\n%s", strings.Join(problemStrings(probs), "\n"))
			}
			if diff := cmp.Diff(w.hooks, briefs(hooks)); diff != "" {
				t.Errorf("hooks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(w.parts, partStrings(parts)); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
		})
	}
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return strings.TrimSpace(fmt.Sprintf(format, args...))
}

// TestParseClaude: what aerie does not have skips that part of the file
// with its reason, the rest loads; only a file that is not a hooks file
// at all is refused.
func TestParseClaude(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		hooks int
		parts []string
		probs []string
	}{
		{name: "unknown events", hooks: 1,
			in: `{"hooks": {"Notification": [{"hooks": [{"type": "command", "command": "notify"}]}],
				"PermissionRequest": 1, "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}`,
			parts: []string{
				"Notification [] skipped: unsupported event: aerie has no event \"Notification\" (its events are " + eventNames() + "); its hooks do not run",
				"PermissionRequest [] skipped: unsupported event: aerie has no event \"PermissionRequest\" (its events are " + eventNames() + "); its hooks do not run",
				"Stop[0].hooks[0] [] active: ",
			}},
		{name: "other hook types", hooks: 1,
			in: `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
				{"type": "prompt", "prompt": "is this safe?", "model": "haiku"},
				{"type": "agent", "prompt": "check"},
				{"type": "http", "url": "http://x"},
				{"type": "command", "command": "guard"}]}]}}`,
			parts: []string{
				`PreToolUse[0].hooks[0] [Bash] skipped: type: line 2: unsupported hook type "prompt": aerie runs only command hooks (not prompt, agent or http)`,
				`PreToolUse[0].hooks[1] [Bash] skipped: type: line 3: unsupported hook type "agent": aerie runs only command hooks (not prompt, agent or http)`,
				`PreToolUse[0].hooks[2] [Bash] skipped: type: line 4: unsupported hook type "http": aerie runs only command hooks (not prompt, agent or http)`,
				"PreToolUse[0].hooks[3] [Bash] active: ",
			}},
		{name: "ignored and refused fields", hooks: 1,
			in: `{"hooks": {"Stop": [{"hooks": [
				{"type": "command", "command": "a", "statusMessage": "checking"},
				{"type": "command", "command": "b", "async": true},
				{"type": "command", "command": "c", "once": true},
				{"type": "command", "command": "d", "colour": "red"}]}]}}`,
			parts: []string{
				"Stop[0].hooks[0] [] active: statusMessage is ignored: aerie shows no spinner",
				"Stop[0].hooks[1] [] skipped: async: line 3: asynchronous hooks (async) are not supported: run to completion, its verdict would block where it was meant to be ignored",
				"Stop[0].hooks[2] [] skipped: once: line 4: once is not supported: the hook would run again where it was meant to run once",
				"Stop[0].hooks[3] [] skipped: colour: line 5: unknown field; a hook has type, command or script, args, timeout and on_failure",
			}},
		{name: "bad group and hook", hooks: 1,
			in: `{"hooks": {"PreToolUse": [
				{"matcher": "(", "hooks": [{"type": "command", "command": "x"}]},
				{"hooks": [{"type": "command", "timeout": 0}]},
				{"matcher": "*", "hooks": [{"type": "command", "command": "y"}]}],
				"Stop": {"hooks": []}}}`,
			parts: []string{
				`PreToolUse[0] [(] skipped: matcher: line 2: invalid regular expression "(": missing closing ): ` + "`(`",
				"PreToolUse[1].hooks[0] [] skipped: timeout: line 3: must be a positive number of seconds (the default is 60); line 3: has neither command nor script; write exactly one",
				"PreToolUse[2].hooks[0] [*] active: ",
				"Stop [] skipped: line 5: must be a list of groups, each with hooks (and an optional matcher)",
			}},
		{name: "not JSON", in: `{"hooks": [`, probs: []string{": invalid YAML"}},
		{name: "no hooks field", in: `{"hook": {}}`, probs: []string{"hook: line 1: unknown field"}},
		{name: "empty", in: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hooks, parts, probs := ParseClaude([]byte(tt.in), claudeSource, "/w")
			if got := problemStrings(probs); len(got) != len(tt.probs) {
				t.Fatalf("problems %q, want %q", got, tt.probs)
			} else {
				for i := range got {
					if !strings.HasPrefix(got[i], tt.probs[i]) {
						t.Errorf("problem %q, want %q…", got[i], tt.probs[i])
					}
				}
			}
			if len(hooks) != tt.hooks {
				t.Errorf("%d hooks, want %d", len(hooks), tt.hooks)
			}
			if diff := cmp.Diff(tt.parts, partStrings(parts)); tt.probs == nil && diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseClaudeRoot: ${CLAUDE_PLUGIN_ROOT} becomes the plugin's
// directory in the command, unless the directory holds a character the
// shell reads inside double quotes: then bash expands it from the
// environment, where it is either way.
func TestParseClaudeRoot(t *testing.T) {
	t.Parallel()
	in := []byte(`{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "\"${CLAUDE_PLUGIN_ROOT}/x.sh\" ${AERIE_PLUGIN_ROOT} ${HOME}"}]}]}}`)
	for root, want := range map[string]string{
		"/p":       `"/p/x.sh" /p ${HOME}`,
		"/p/$(id)": `"${CLAUDE_PLUGIN_ROOT}/x.sh" ${AERIE_PLUGIN_ROOT} ${HOME}`,
		`/p/a"b`:   `"${CLAUDE_PLUGIN_ROOT}/x.sh" ${AERIE_PLUGIN_ROOT} ${HOME}`,
	} {
		src := claudeSource
		src.Dir, src.Root = root, root
		src.Env = []string{"CLAUDE_PLUGIN_ROOT=" + root, "AERIE_PLUGIN_ROOT=" + root}
		hooks, _, probs := ParseClaude(in, src, "/w")
		if len(probs) > 0 || len(hooks) != 1 {
			t.Fatalf("%s: %d hooks, problems %v", root, len(hooks), probs)
		}
		if hooks[0].Command != want {
			t.Errorf("%s: command %q, want %q", root, hooks[0].Command, want)
		}
	}
}
