package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/layer"
)

// checkParsed checks what a parser returned for any input: no panic got
// through, problems and hooks exclude each other, and every hook is
// complete.
func checkParsed(t *testing.T, hooks []Hook, probs []layer.Problem) {
	t.Helper()
	for _, p := range probs {
		if strings.Contains(p.Reason, "internal error") {
			t.Fatalf("the parser panicked: %v", p)
		}
		if p.Reason == "" || p.File == "" {
			t.Fatalf("incomplete problem %+v", p)
		}
	}
	if len(probs) > 0 && hooks != nil {
		t.Fatalf("hooks despite problems")
	}
	for _, h := range hooks {
		if _, ok := knownEvent(string(h.Event)); !ok || h.Command == "" || h.Timeout <= 0 || h.ID == "" || (h.Shell != "sh" && h.Shell != "bash") {
			t.Fatalf("incomplete hook %+v", h)
		}
		h.Matcher.Match("bash")
	}
}

func corpusSeeds(f *testing.F) {
	matches, _ := filepath.Glob("testdata/corpus/*/*/*/*/hooks.json")
	more, _ := filepath.Glob("testdata/corpus/*/*/*/hooks.json")
	more2, _ := filepath.Glob("testdata/corpus/*/.codex/hooks.json")
	for _, m := range slices.Concat(matches, more, more2) {
		if b, err := os.ReadFile(m); err == nil {
			f.Add(string(b))
		}
	}
}

func FuzzParseTOML(f *testing.F) {
	f.Add("[[hooks.PreToolUse]]\nmatcher = \"bash|write_file\"\n[[hooks.PreToolUse.hooks]]\ncommand = \"./guard.sh\"\ntimeout_secs = 10\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"./verify.sh\"\n")
	f.Add("[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand=''\n[[hooks.PreToolUse]]\nmatcher='['\n")
	f.Add("hooks = { Stop = [ { hooks = [ { command = \"x\", timeout_secs = 1 } ] } ] }\n")
	f.Add("[hooks]\nStop = 1\n")
	src := Source{Layer: layer.Layer{Name: "l"}, File: "/l/hooks.toml", Home: "/home/u"}
	f.Fuzz(func(t *testing.T, in string) {
		hooks, probs := ParseTOML([]byte(in), src, "/w")
		checkParsed(t, hooks, probs)
		again, probs2 := ParseTOML([]byte(in), src, "/w")
		if diff := cmp.Diff(problemStrings(probs), problemStrings(probs2)); diff != "" || len(again) != len(hooks) {
			t.Fatalf("parsing twice differs:\n%s", diff)
		}
	})
}

func FuzzParseYAML(f *testing.F) {
	f.Add("hooks:\n  PreToolUse:\n    - matcher: bash\n      hooks:\n        - type: command\n          command: ./guard.sh\n          timeout: 10\n          on_failure: block\n")
	f.Add("hooks:\n  Stop:\n    - hooks: [&h {type: command, command: 'true'}, *h]\n")
	f.Add("a: &a [x, x]\nb: &b [*a, *a]\nhooks: {Stop: [{hooks: *b}]}\n")
	f.Add("hooks:\n  Stop:\n    - hooks: [{type: command, script: guard.sh, args: [a, 'b c']}]\n")
	f.Add(`{"hooks": {"PreToolUse": [{"matcher": "mcp__.*", "hooks": [{"type": "command", "command": "x", "timeout": 1.5}]}]}}`)
	corpusSeeds(f)
	dir := f.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hooks"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hooks/guard.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		f.Fatal(err)
	}
	srcs := []Source{
		{Layer: layer.Layer{Name: "home", Dir: dir, Kind: layer.KindHome}, File: filepath.Join(dir, "hooks/a.yaml"), Dir: filepath.Join(dir, "hooks"), Root: dir, Home: dir},
		{Layer: layer.Layer{Name: "proj", Dir: dir, Kind: layer.KindProject}, File: filepath.Join(dir, "hooks/a.yaml"), Dir: filepath.Join(dir, "hooks"), Root: dir, Confined: true},
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, src := range srcs {
			hooks, probs := ParseYAML([]byte(in), src, "/w")
			checkParsed(t, hooks, probs)
			for _, h := range hooks {
				if src.Confined && strings.Contains(h.Command, "/") && len(h.Executables) == 1 && h.Executables[0] == h.Command {
					// A script hook in a confined source stays inside it.
					if !strings.HasPrefix(h.Command, dir+"/") {
						t.Fatalf("confined script outside the layer: %q", h.Command)
					}
				}
			}
		}
	})
}

// FuzzParseClaude: a Claude or Codex hooks.json either is refused whole
// or yields parts, one active part for each hook that runs, and every
// skipped part with its reason.
func FuzzParseClaude(f *testing.F) {
	f.Add(`{"hooks": {"Notification": [{"hooks": [{"type": "command", "command": "n"}]}], "Stop": [{"hooks": [{"type": "prompt", "prompt": "p"}, {"type": "command", "command": "\"${CLAUDE_PLUGIN_ROOT}/s.sh\"", "if": "Bash(git:*)", "statusMessage": "m"}]}]}}`)
	f.Add(`{"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}, {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "x", "timeout": 0}]}]}}`)
	f.Add("hooks:\n  Stop: [{hooks: [&h {type: command, command: 'true', async: true}, *h]}]\n")
	corpusSeeds(f)
	src := Source{Layer: layer.Layer{Name: "home", Kind: layer.KindHome}, File: "/p/hooks/hooks.json", Dir: "/p", Root: "/p",
		Confined: true, Env: []string{"CLAUDE_PLUGIN_ROOT=/p"}}
	f.Fuzz(func(t *testing.T, in string) {
		hooks, parts, probs := ParseClaude([]byte(in), src, "/w")
		checkParsed(t, hooks, probs)
		if len(probs) > 0 && parts != nil {
			t.Fatalf("parts despite problems")
		}
		active := 0
		for _, p := range parts {
			if (p.Field == "") != (p.Event == "") || (p.Skipped && p.Reason == "") {
				t.Fatalf("incomplete part %+v", p)
			}
			if !p.Skipped {
				active++
			}
		}
		if active != len(hooks) {
			t.Fatalf("%d active parts for %d hooks", active, len(hooks))
		}
	})
}

func FuzzParseOutput(f *testing.F) {
	f.Add(`{"decision":"block","reason":"r","systemMessage":"s","continue":false,"stopReason":"x"}`, 0, "")
	f.Add(`{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"?","updatedInput":{"a":[1,2]},"additionalContext":"c"}}`, 0, "")
	f.Add(`{"hookSpecificOutput":{"updatedInput":null}}`, 0, "")
	f.Add(`{"decision":"approve"} `, 2, "reason")
	f.Add("plain text", 0, "")
	f.Add(`{"continue":"no"}`, 1, "")
	f.Fuzz(func(t *testing.T, out string, exit int, stderr string) {
		o, err := ParseOutput([]byte(out))
		if err == nil {
			b, merr := json.Marshal(o)
			if merr != nil {
				t.Fatalf("a parsed output does not marshal: %v", merr)
			}
			o2, err := ParseOutput(b)
			if err != nil {
				t.Fatalf("a marshalled output does not parse: %v\n%s", err, b)
			}
			if diff := cmp.Diff(normalize(o), normalize(o2)); diff != "" {
				t.Fatalf("round trip (-first +second):\n%s", diff)
			}
		}
		for _, format := range []Format{FormatTOML, FormatYAML} {
			for _, ev := range Events {
				a := interpret(&Hook{ID: "h", Event: ev, Format: format}, exit, out, stderr)
				if a.failed != "" && (a.decision != Proceed || a.context != "" || a.updatedInput != nil) {
					t.Fatalf("a failure with effects: %+v", a)
				}
				if a.decision == Block && a.reason == "" {
					t.Fatalf("a block without a reason: %+v", a)
				}
				if a.decision == Ask && (format != FormatTOML || ev != PreToolUse) {
					t.Fatalf("ask from %s %s", format, ev)
				}
				if a.decision == Block && !ev.canBlock() {
					t.Fatalf("%s blocked", ev)
				}
				if a.updatedInput != nil && ev != PreToolUse {
					t.Fatalf("updatedInput on %s", ev)
				}
			}
		}
	})
}

// normalize compacts updatedInput, which a round trip re-encodes.
func normalize(o Output) Output {
	if o.HookSpecificOutput != nil && o.HookSpecificOutput.UpdatedInput != nil {
		s := *o.HookSpecificOutput
		var v any
		_ = json.Unmarshal(s.UpdatedInput, &v)
		s.UpdatedInput, _ = json.Marshal(v)
		o.HookSpecificOutput = &s
	}
	return o
}
