package hooks

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

// brief is what a test compares of a parsed hook.
type brief struct {
	ID, Event, Matcher, Command, Shell string
	Timeout                            time.Duration
	OnFailure                          OnFailure
	Executables                        []string
}

func briefs(hs []Hook) []brief {
	var out []brief
	for _, h := range hs {
		out = append(out, brief{
			ID: h.ID, Event: string(h.Event), Matcher: h.Matcher.String(), Command: h.Command, Shell: h.Shell,
			Timeout: h.Timeout, OnFailure: h.OnFailure, Executables: h.Executables,
		})
	}
	return out
}

func problemStrings(ps []layer.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Field+": "+p.Reason)
	}
	return out
}

func TestParseTOML(t *testing.T) {
	t.Parallel()
	src := Source{Layer: layer.Layer{Name: "home", Kind: layer.KindHome}, File: "/l/hooks.toml", Home: "/home/u"}
	tests := []struct {
		name  string
		in    string
		want  []brief
		probs []string // substrings, one per problem, in order
	}{
		{name: "empty"},
		{
			name: "spec example",
			in: `
[[hooks.PreToolUse]]
matcher = "bash|write_file"

[[hooks.PreToolUse.hooks]]
command = "./guard.sh"
timeout_secs = 10

[[hooks.Stop]]

[[hooks.Stop.hooks]]
command = "./verify.sh"
`,
			want: []brief{
				{ID: "/l/hooks.toml#PreToolUse[0].hooks[0]", Event: "PreToolUse", Matcher: "bash|write_file", Command: "./guard.sh", Shell: "sh", Timeout: 10 * time.Second, OnFailure: FailAllow, Executables: []string{"/w/guard.sh"}},
				{ID: "/l/hooks.toml#Stop[0].hooks[0]", Event: "Stop", Command: "./verify.sh", Shell: "sh", Timeout: 600 * time.Second, OnFailure: FailAllow, Executables: []string{"/w/verify.sh"}},
			},
		},
		{
			name: "bare command and home",
			in: `[[hooks.SessionStart]]
[[hooks.SessionStart.hooks]]
type = "command"
command = "gofmt -l ."
[[hooks.SessionStart.hooks]]
command = "~/bin/check 'a b'"
`,
			want: []brief{
				{ID: "/l/hooks.toml#SessionStart[0].hooks[0]", Event: "SessionStart", Command: "gofmt -l .", Shell: "sh", Timeout: 600 * time.Second, OnFailure: FailAllow},
				{ID: "/l/hooks.toml#SessionStart[0].hooks[1]", Event: "SessionStart", Command: "~/bin/check 'a b'", Shell: "sh", Timeout: 600 * time.Second, OnFailure: FailAllow, Executables: []string{"/home/u/bin/check"}},
			},
		},
		{name: "syntax", in: "[[hooks.Stop]\n", probs: []string{": invalid TOML at line 1, column 13: expected ']]' to close array table name"}},
		{name: "unknown top", in: "x = 1\n", probs: []string{"x: unknown field"}},
		{name: "hooks not table", in: "hooks = 1\n", probs: []string{"hooks: must be a table of events"}},
		{name: "unknown event", in: "[[hooks.PreToolUs]]\n[[hooks.PreToolUs.hooks]]\ncommand='x'\n", probs: []string{`hooks.PreToolUs: unknown event "PreToolUs"; the events are SessionStart,`}},
		{name: "event not array", in: "[hooks.Stop]\ncommand='x'\n", probs: []string{"hooks.Stop: must be an array of tables: write [[hooks.Stop]]"}},
		{name: "bad regexp", in: "[[hooks.PreToolUse]]\nmatcher='('\n[[hooks.PreToolUse.hooks]]\ncommand='x'\n", probs: []string{"hooks.PreToolUse[0].matcher: invalid regular expression \"(\": missing closing )"}},
		{name: "star is not a regexp", in: "[[hooks.PreToolUse]]\nmatcher='*'\n[[hooks.PreToolUse.hooks]]\ncommand='x'\n", probs: []string{"hooks.PreToolUse[0].matcher: invalid regular expression \"*\""}},
		{name: "matcher type", in: "[[hooks.PreToolUse]]\nmatcher=1\n[[hooks.PreToolUse.hooks]]\ncommand='x'\n", probs: []string{"hooks.PreToolUse[0].matcher: must be a string"}},
		{name: "no hooks", in: "[[hooks.Stop]]\nmatcher='x'\n", probs: []string{"hooks.Stop[0]: missing [[hooks.Stop[0].hooks]]"}},
		{name: "group field", in: "[[hooks.Stop]]\nwhen='x'\n[[hooks.Stop.hooks]]\ncommand='x'\n", probs: []string{"hooks.Stop[0].when: unknown field"}},
		{name: "no command", in: "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntimeout_secs=1\n", probs: []string{"hooks.Stop[0].hooks[0]: missing command"}},
		{name: "empty command", in: "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand=''\n", probs: []string{"hooks.Stop[0].hooks[0].command: must be a non-empty string"}},
		{name: "zero timeout", in: "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand='x'\ntimeout_secs=0\n", probs: []string{"hooks.Stop[0].hooks[0].timeout_secs: must be a positive whole number"}},
		{name: "float timeout", in: "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand='x'\ntimeout_secs=1.5\n", probs: []string{"timeout_secs: must be a positive whole number"}},
		{name: "huge timeout", in: "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand='x'\ntimeout_secs=9223372036854775807\n", probs: []string{"timeout_secs: must be a positive whole number"}},
		{name: "type", in: "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand='x'\ntype='prompt'\n", probs: []string{`type: must be "command"`}},
		{name: "hook field", in: "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand='x'\ntimeout=3\n", probs: []string{"hooks.Stop[0].hooks[0].timeout: unknown field; a hook has command and timeout_secs"}},
		{
			name:  "every problem is reported",
			in:    "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand=''\n[[hooks.PreToolUse]]\nmatcher='['\n[[hooks.PreToolUse.hooks]]\ncommand='x'\n",
			probs: []string{"hooks.PreToolUse[0].matcher", "hooks.Stop[0].hooks[0].command"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, probs := ParseTOML([]byte(tt.in), src, "/w")
			checkProblems(t, probs, tt.probs)
			if len(probs) > 0 && got != nil {
				t.Errorf("a file with problems yielded hooks: %v", briefs(got))
			}
			if diff := cmp.Diff(tt.want, briefs(got)); diff != "" {
				t.Errorf("hooks mismatch (-want +got):\n%s", diff)
			}
			for _, p := range probs {
				if p.File != src.File || p.Layer != "home" {
					t.Errorf("problem %+v does not name the file and layer", p)
				}
			}
		})
	}
}

func checkProblems(t *testing.T, probs []layer.Problem, want []string) {
	t.Helper()
	got := problemStrings(probs)
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d like:\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("problem %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

func TestParseYAML(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, map[string]string{
		"hooks/guard.sh":    "#!/bin/sh\nexit 0\n",
		"hooks/noshebang":   "exit 0\n",
		"hooks/notexec":     "#!/bin/sh\n",
		"scripts/up.sh":     "#!/bin/sh\n",
		"hooks/sub/deep.sh": "#!/bin/sh\n",
	})
	if err := chmod(filepath.Join(dir, "hooks/noshebang"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := chmod(filepath.Join(dir, "hooks/notexec"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	testenv.WriteTree(t, outside, map[string]string{"out.sh": "#!/bin/sh\n"})
	if err := symlink(filepath.Join(outside, "out.sh"), filepath.Join(dir, "hooks/link.sh")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "hooks/go.yaml")
	private := Source{Layer: layer.Layer{Name: "home", Dir: dir, Kind: layer.KindHome}, File: file, Dir: filepath.Join(dir, "hooks"), Root: dir, Home: outside}
	project := private
	project.Layer.Kind, project.Confined = layer.KindProject, true
	id := func(f string) string { return file + "#" + f }
	tests := []struct {
		name  string
		src   Source
		in    string
		want  []brief
		probs []string
	}{
		{name: "empty", in: ""},
		{name: "null hooks", in: "hooks:\n"},
		{
			name: "spec example",
			in: `
hooks:
  PreToolUse:
    - matcher: bash
      hooks:
        - type: command
          script: guard.sh          # relative to this yaml file
          args: [--strict, "it's"]
          timeout: 10
          on_failure: block
  PostToolUse:
    - matcher: apply_patch
      hooks:
        - type: command
          script: sub/deep.sh
  Stop:
    - hooks:
        - type: command
          command: ~/bin/check-tests.sh   # run as-is on the target machine
          timeout: 600
`,
			want: []brief{
				{ID: id("PreToolUse[0].hooks[0]"), Event: "PreToolUse", Matcher: "bash", Command: filepath.Join(dir, "hooks/guard.sh") + ` --strict 'it'\''s'`, Shell: "bash", Timeout: 10 * time.Second, OnFailure: FailBlock, Executables: []string{filepath.Join(dir, "hooks/guard.sh")}},
				{ID: id("PostToolUse[0].hooks[0]"), Event: "PostToolUse", Matcher: "apply_patch", Command: filepath.Join(dir, "hooks/sub/deep.sh"), Shell: "bash", Timeout: time.Minute, OnFailure: FailAllow, Executables: []string{filepath.Join(dir, "hooks/sub/deep.sh")}},
				{ID: id("Stop[0].hooks[0]"), Event: "Stop", Command: "~/bin/check-tests.sh", Shell: "bash", Timeout: 600 * time.Second, OnFailure: FailAllow, Executables: []string{filepath.Join(outside, "bin/check-tests.sh")}},
			},
		},
		{
			name: "json with description, fractional timeout, relative script upward in a private layer",
			in:   `{"description": "d", "hooks": {"SessionStart": [{"matcher": "", "hooks": [{"type": "command", "script": "../scripts/up.sh", "timeout": 0.5}]}]}}`,
			want: []brief{{ID: id("SessionStart[0].hooks[0]"), Event: "SessionStart", Command: filepath.Join(dir, "scripts/up.sh"), Shell: "bash", Timeout: 500 * time.Millisecond, OnFailure: FailAllow, Executables: []string{filepath.Join(dir, "scripts/up.sh")}}},
		},
		{
			name: "absolute script in a private layer",
			in:   "hooks:\n  Stop:\n    - hooks:\n        - {type: command, script: " + filepath.Join(outside, "out.sh") + "}\n",
			want: []brief{{ID: id("Stop[0].hooks[0]"), Event: "Stop", Command: filepath.Join(outside, "out.sh"), Shell: "bash", Timeout: time.Minute, OnFailure: FailAllow, Executables: []string{filepath.Join(outside, "out.sh")}}},
		},
		{
			name:  "anchors and aliases",
			in:    "x: &h {type: command, command: true}\n",
			probs: []string{"x: line 1: unknown field"},
		},
		{
			name: "aliases inside hooks",
			in:   "hooks:\n  Stop:\n    - hooks: [&h {type: command, command: 'true'}, *h]\n",
			want: []brief{
				{ID: id("Stop[0].hooks[0]"), Event: "Stop", Command: "true", Shell: "bash", Timeout: time.Minute, OnFailure: FailAllow},
				{ID: id("Stop[0].hooks[1]"), Event: "Stop", Command: "true", Shell: "bash", Timeout: time.Minute, OnFailure: FailAllow},
			},
		},
		{name: "project script", src: project, in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: guard.sh}]\n",
			want: []brief{{ID: id("Stop[0].hooks[0]"), Event: "Stop", Command: filepath.Join(dir, "hooks/guard.sh"), Shell: "bash", Timeout: time.Minute, OnFailure: FailAllow, Executables: []string{filepath.Join(dir, "hooks/guard.sh")}}}},
		{name: "project absolute script", src: project, in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: /bin/true}]\n", probs: []string{"hooks.Stop[0].hooks[0].script: line 3: must be a path relative to the project layer, inside it"}},
		{name: "project home script", src: project, in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: ~/x.sh}]\n", probs: []string{"script: line 3: must be a path relative to the project layer"}},
		{name: "project script escaping", src: project, in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: ../../etc/passwd}]\n", probs: []string{"script: line 3: must stay inside the project layer"}},
		{name: "project script symlink out", src: project, in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: link.sh}]\n", probs: []string{"script: line 3: cannot open script link.sh"}},
		{name: "missing script", in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: nope.sh}]\n", probs: []string{"script: line 3: script nope.sh does not exist"}},
		{name: "no shebang", in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: noshebang}]\n", probs: []string{"script noshebang does not start with a shebang (#!)"}},
		{name: "not executable", in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: notexec}]\n", probs: []string{"script notexec is not executable; chmod +x it"}},
		{name: "directory script", in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: sub}]\n", probs: []string{"script sub is not a regular file"}},
		{name: "syntax", in: "hooks: [\n", probs: []string{": invalid YAML: line 1: did not find expected node content"}},
		{name: "two documents", in: "hooks: {}\n---\nhooks: {}\n", probs: []string{"more than one YAML document"}},
		{name: "not a mapping", in: "- a\n", probs: []string{": line 1: must be a mapping with a hooks field"}},
		{name: "unknown event", in: "hooks:\n  BeforeTool: []\n", probs: []string{`hooks.BeforeTool: line 2: unknown event "BeforeTool"`}},
		{name: "event not list", in: "hooks:\n  Stop: {hooks: []}\n", probs: []string{"hooks.Stop: line 2: must be a list of groups"}},
		{name: "duplicate event", in: "hooks:\n  Stop: []\n  Stop: []\n", probs: []string{"hooks.Stop: line 3: appears twice"}},
		{name: "missing hooks", in: "hooks:\n  Stop:\n    - matcher: x\n", probs: []string{"hooks.Stop[0]: line 3: missing hooks"}},
		{name: "bad regexp", in: "hooks:\n  PreToolUse:\n    - matcher: 'mcp__(.*'\n      hooks: [{type: command, command: x}]\n", probs: []string{`hooks.PreToolUse[0].matcher: line 3: invalid regular expression "mcp__(.*"`}},
		{name: "missing type", in: "hooks:\n  Stop:\n    - hooks: [{command: x}]\n", probs: []string{"hooks.Stop[0].hooks[0].type: line 3: missing: write type: command"}},
		{name: "prompt type", in: "hooks:\n  Stop:\n    - hooks: [{type: prompt, command: x}]\n", probs: []string{`type: line 3: "prompt" is not supported: only type command`}},
		{name: "both", in: "hooks:\n  Stop:\n    - hooks: [{type: command, command: x, script: guard.sh}]\n", probs: []string{"has both command and script; write exactly one"}},
		{name: "neither", in: "hooks:\n  Stop:\n    - hooks: [{type: command}]\n", probs: []string{"has neither command nor script; write exactly one"}},
		{name: "args with command", in: "hooks:\n  Stop:\n    - hooks: [{type: command, command: x, args: [a]}]\n", probs: []string{"args: line 3: is only valid with script"}},
		{name: "args not strings", in: "hooks:\n  Stop:\n    - hooks: [{type: command, script: guard.sh, args: [[a]]}]\n", probs: []string{"args: line 3: must be a list of strings"}},
		{name: "zero timeout", in: "hooks:\n  Stop:\n    - hooks: [{type: command, command: x, timeout: 0}]\n", probs: []string{"timeout: line 3: must be a positive number of seconds"}},
		{name: "string timeout", in: "hooks:\n  Stop:\n    - hooks: [{type: command, command: x, timeout: '5'}]\n", probs: []string{"timeout: line 3: must be a positive number of seconds"}},
		{name: "on_failure on Stop", in: "hooks:\n  Stop:\n    - hooks: [{type: command, command: x, on_failure: block}]\n", probs: []string{"on_failure: line 3: is only valid for PreToolUse and UserPromptSubmit hooks"}},
		{name: "on_failure value", in: "hooks:\n  PreToolUse:\n    - hooks: [{type: command, command: x, on_failure: deny}]\n", probs: []string{"on_failure: line 3: must be allow or block"}},
		{name: "claude if", in: "hooks:\n  PostToolUse:\n    - hooks: [{type: command, command: x, if: 'Bash(git commit:*)'}]\n", probs: []string{"hooks.PostToolUse[0].hooks[0].if: line 3: conditional hooks (if) are not supported"}},
		{name: "unknown hook field", in: "hooks:\n  Stop:\n    - hooks: [{type: command, command: x, retries: 2}]\n", probs: []string{"retries: line 3: unknown field; a hook has type, command or script, args, timeout and on_failure"}},
		{name: "top unknown", in: "hook:\n  Stop: []\n", probs: []string{"hook: line 2: unknown field; a hooks file has hooks"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := tt.src
			if src.File == "" {
				src = private
			}
			got, probs := ParseYAML([]byte(tt.in), src, "/w")
			checkProblems(t, probs, tt.probs)
			if len(probs) > 0 && got != nil {
				t.Errorf("a file with problems yielded hooks: %v", briefs(got))
			}
			if diff := cmp.Diff(tt.want, briefs(got)); diff != "" {
				t.Errorf("hooks mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseYAMLAliasBomb checks that aliases cannot make a small file
// expensive.
func TestParseYAMLAliasBomb(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("a: &a [{type: command, command: x}, {type: command, command: x}, {type: command, command: x}, {type: command, command: x}]\n")
	prev := "a"
	for i := range 12 {
		name := string(rune('b' + i))
		b.WriteString(name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n")
		prev = name
	}
	b.WriteString("hooks:\n  Stop:\n    - hooks: *" + prev + "\n")
	_, probs := ParseYAML([]byte(b.String()), Source{File: "/bomb.yaml"}, "/w")
	if len(probs) == 0 {
		t.Fatal("an alias bomb parsed without a problem")
	}
}

func TestMatcher(t *testing.T) {
	t.Parallel()
	tests := []struct {
		format  Format
		pattern string
		match   []string
		nomatch []string
	}{
		{FormatTOML, "", []string{"bash", "x"}, nil},
		{FormatTOML, "bash|write_file", []string{"bash", "write_file"}, []string{"bash2", "xbash", "Bash", "write"}},
		{FormatTOML, "mcp__.*", []string{"mcp__a__b"}, []string{"x_mcp__a"}},
		{FormatTOML, "Bash", nil, []string{"bash"}}, // no aliases in hooks.toml
		{FormatYAML, "", []string{"bash"}, nil},
		{FormatYAML, "*", []string{"bash", "read_file"}, nil},
		{FormatYAML, "bash|apply_patch", []string{"bash", "apply_patch"}, []string{"bash2", "ba", "read_file"}},
		{FormatYAML, "Bash", []string{"bash"}, []string{"Bashful", "apply_patch"}},
		{FormatYAML, "Write", []string{"apply_patch", "write_file"}, []string{"edit_file", "bash"}},
		{FormatYAML, "Edit", []string{"apply_patch", "edit_file"}, []string{"write_file"}},
		{FormatYAML, "Read", []string{"read_file"}, []string{"read"}},
		{FormatYAML, "Agent", []string{"spawn_agent"}, nil},
		{FormatYAML, "Edit|Write|MultiEdit|NotebookEdit", []string{"apply_patch", "write_file", "edit_file"}, []string{"bash"}},
		{FormatYAML, "file", nil, []string{"read_file"}},                                // a list: exact names
		{FormatYAML, "_file$", []string{"read_file", "write_file"}, []string{"file_x"}}, // a regexp: unanchored
		{FormatYAML, "mcp__.*", []string{"mcp__a__b", "x_mcp__a"}, []string{"mcp_"}},
		{FormatYAML, "^Ba", []string{"bash"}, []string{"abash"}}, // through the alias Bash
	}
	for _, tt := range tests {
		t.Run(string(tt.format)+"/"+tt.pattern, func(t *testing.T) {
			t.Parallel()
			compile := compileYAML
			if tt.format == FormatTOML {
				compile = compileTOML
			}
			m, err := compile(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tt.match {
				if !m.Match(n) {
					t.Errorf("%q does not match %q", tt.pattern, n)
				}
			}
			for _, n := range tt.nomatch {
				if m.Match(n) {
					t.Errorf("%q matches %q", tt.pattern, n)
				}
			}
		})
	}
}

func TestCommandExecutable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd  string
		want string // "" = none
	}{
		{"./guard.sh", "/w/guard.sh"},
		{"./guard.sh --strict", "/w/guard.sh"},
		{"  scripts/x.sh;echo", "/w/scripts/x.sh"},
		{"/usr/bin/env python3 x.py", "/usr/bin/env"},
		{"'./my dir/x.sh' a", "/w/my dir/x.sh"},
		{`"./my dir/x.sh"`, "/w/my dir/x.sh"},
		{`./my\ dir/x.sh`, "/w/my dir/x.sh"},
		{"FOO=1 BAR=2 ./x.sh", "/w/x.sh"},
		{"~/bin/check.sh", "/home/u/bin/check.sh"},
		{"~other/bin/check.sh", "~other/bin/check.sh"},
		{`"${CLAUDE_PLUGIN_ROOT}/hooks/stop.sh"`, "${CLAUDE_PLUGIN_ROOT}/hooks/stop.sh"},
		{"$HOME/x.sh", "$HOME/x.sh"},
		{"gofmt -l .", ""},
		{`node "$(git rev-parse --show-toplevel)/.codex/hooks/x.mjs"`, ""},
		{"FOO=/a/b", ""},
		{"", ""},
		{"'unterminated/x", "unterminated/x"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			t.Parallel()
			got, ok := commandExecutable(tt.cmd, "/w", "/home/u")
			if !ok {
				got = ""
			}
			if got != tt.want {
				t.Errorf("commandExecutable(%q) = %q, want %q", tt.cmd, got, tt.want)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a":          "a",
		"/a/b.sh":    "/a/b.sh",
		"":           "''",
		"a b":        "'a b'",
		"it's":       `'it'\''s'`,
		"$HOME":      "'$HOME'",
		"--x=1,2":    "--x=1,2",
		"a;rm -rf /": "'a;rm -rf /'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
