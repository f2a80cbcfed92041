package provider_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/provider"
)

const demoScript = `# A demo session.
turns:
  - reasoning: I should look before I change anything.
    text: I'll list the files first.
    tool_calls:
      - name: bash
        arguments: {command: ls -la, timeout_seconds: 30}
      - name: read_file
        id: read-1
        arguments: '{"path": "README.md"}'
    usage: {input_tokens: 1200, output_tokens: 35, cache_read_tokens: 1000, cache_write_tokens: 100}
  - text: There are two files.
    stop_reason: end_turn
  - tool_calls:
      - name: no_such_tool
        arguments: '{"broken": '
`

func TestScriptedReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.yaml")
	if err := os.WriteFile(path, []byte(demoScript), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := provider.LoadScripted(provider.Config{Provider: "scripted", Model: "demo", ScriptPath: path})
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.Response{
		{
			Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
				{Type: provider.ContentReasoning, Text: "I should look before I change anything."},
				provider.Text("I'll list the files first."),
				provider.ToolCall("call_1_1", "bash", `{"command":"ls -la","timeout_seconds":30}`),
				provider.ToolCall("read-1", "read_file", `{"path": "README.md"}`),
			}},
			Usage:      provider.Usage{InputTokens: 1200, OutputTokens: 35, CacheReadTokens: 1000, CacheWriteTokens: 100},
			StopReason: provider.StopToolUse,
		},
		{
			Message:    provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text("There are two files.")}},
			StopReason: provider.StopEndTurn,
		},
		{
			// Malformed on purpose: the arguments are passed on as written.
			Message:    provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.ToolCall("call_3_1", "no_such_tool", `{"broken": `)}},
			StopReason: provider.StopToolUse,
		},
	}
	for i, w := range want {
		got, err := provider.Collect(p.Stream(t.Context(), userRequest("go")))
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("turn %d (-want +got):\n%s", i+1, diff)
		}
	}

	_, err = provider.Collect(p.Stream(t.Context(), userRequest("one more")))
	if !errors.Is(err, provider.ErrScriptExhausted) {
		t.Fatalf("error %v, want ErrScriptExhausted", err)
	}
	for _, s := range []string{"demo.yaml", "request 4", "3 turns"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

func TestScriptedJSON(t *testing.T) {
	turns, err := provider.ParseScript("demo.json", []byte(`{"turns": [
		{"text": "hi", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}], "usage": {"input_tokens": 3}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.Response{{
		Message:    provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text("hi"), provider.ToolCall("call_1_1", "bash", `{"command":"ls"}`)}},
		Usage:      provider.Usage{InputTokens: 3},
		StopReason: provider.StopToolUse,
	}}
	if diff := cmp.Diff(want, turns); diff != "" {
		t.Errorf("turns (-want +got):\n%s", diff)
	}
}

func TestScriptedChecksRequests(t *testing.T) {
	p := provider.NewScripted("inline", []provider.Response{{Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text("hi")}}}})
	bad := provider.Request{Messages: []provider.Message{provider.UserMessage("hi"), provider.SystemMessage("late")}}
	if _, err := provider.Collect(p.Stream(t.Context(), bad)); err == nil || !strings.Contains(err.Error(), "system message after") {
		t.Errorf("error %v, want the conversation rejected as a real provider would", err)
	}
	if p.Remaining() != 1 {
		t.Errorf("a rejected request used a turn")
	}
}

func TestScriptedParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         []string
	}{
		{"empty", "", []string{"bad.yaml", "empty"}},
		{"not yaml", "turns: [", []string{"bad.yaml", "yaml"}},
		{"not a mapping", "- text: hi", []string{"bad.yaml:1", "want a mapping"}},
		{"unknown top field", "turns: []\nmodel: x", []string{"bad.yaml:2", `unknown field "model"`}},
		{"no turns", "turns: []", []string{"bad.yaml:1", "no turns"}},
		{"turns not a list", "turns: {text: hi}", []string{"bad.yaml:1", "turns: want a list"}},
		{"empty turn", "turns:\n  - text: hi\n  - stop_reason: end_turn\n", []string{"bad.yaml:3", "turns[1]", "needs text, reasoning or tool_calls"}},
		{"misspelt field", "turns:\n  - text: hi\n    tool_call: []\n", []string{"bad.yaml:3", "turns[0]", `unknown field "tool_call"`}},
		{"text not a string", "turns:\n  - text: [a]\n", []string{"bad.yaml:2", "turns[0].text: want a string"}},
		{"tool without name", "turns:\n  - tool_calls:\n      - arguments: {}\n", []string{"bad.yaml:3", "turns[0].tool_calls[0]: name is required"}},
		{"arguments a number", "turns:\n  - tool_calls:\n      - name: t\n        arguments: 3\n", []string{"bad.yaml:4", "arguments: want a mapping"}},
		{"duplicate id", "turns:\n  - tool_calls:\n      - {name: a, id: x}\n  - tool_calls:\n      - {name: b, id: x}\n", []string{"bad.yaml:5", `id "x" is already used by turns[0].tool_calls[0]`}},
		{"bad stop reason", "turns:\n  - text: hi\n    stop_reason: done\n", []string{"bad.yaml:2", `"done" is not a stop reason`}},
		{"negative usage", "turns:\n  - text: hi\n    usage: {output_tokens: -1}\n", []string{"bad.yaml:3", "usage.output_tokens", "whole number"}},
		{"usage not a number", "turns:\n  - text: hi\n    usage: {input_tokens: lots}\n", []string{"bad.yaml:3", "usage.input_tokens"}},
		{"cache above input", "turns:\n  - text: hi\n    usage: {input_tokens: 10, cache_read_tokens: 11}\n", []string{"bad.yaml:3", "parts of input_tokens"}},
		{"unknown usage field", "turns:\n  - text: hi\n    usage: {tokens: 1}\n", []string{"bad.yaml:3", `unknown field "tokens"`}},
		{"field twice", "turns:\n  - text: a\n    text: b\n", []string{"bad.yaml:3", `"text" is given twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := provider.ParseScript("bad.yaml", []byte(tc.script))
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestScriptedAnchors(t *testing.T) {
	script := "turns:\n  - &ls {text: listing, tool_calls: [{name: bash, arguments: &args {command: ls}}]}\n  - {text: again, tool_calls: [{name: bash, id: second, arguments: *args}]}\n"
	turns, err := provider.ParseScript("anchors.yaml", []byte(script))
	if err != nil {
		t.Fatal(err)
	}
	if got := turns[1].Message.ToolCalls()[0].Arguments; got != `{"command":"ls"}` {
		t.Errorf("aliased arguments %q", got)
	}
}

func TestLoadScriptedChecksConfig(t *testing.T) {
	script := filepath.Join(t.TempDir(), "demo.yaml")
	if err := os.WriteFile(script, []byte("turns:\n  - text: hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := provider.LoadScripted(provider.Config{Provider: "scripted", ScriptPath: script})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "scripted" || p.Remaining() != 1 {
		t.Errorf("Name() = %q with %d turns, want scripted with 1", p.Name(), p.Remaining())
	}
	for _, tc := range []struct {
		name    string
		cfg     provider.Config
		wantErr []string // substrings of the error
	}{
		{name: "scripted without script", cfg: provider.Config{Provider: "scripted"},
			wantErr: []string{"scripted", "Config.ScriptPath is empty"}},
		{name: "scripted with key", cfg: provider.Config{Provider: "scripted", ScriptPath: script, APIKey: "k"},
			wantErr: []string{"takes no key"}},
		{name: "scripted with API", cfg: provider.Config{Provider: "scripted", ScriptPath: script, API: "responses"},
			wantErr: []string{`Config.API "responses"`}},
		{name: "scripted missing file", cfg: provider.Config{Provider: "scripted", ScriptPath: filepath.Join(t.TempDir(), "nope.yaml")},
			wantErr: []string{"nope.yaml", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := provider.LoadScripted(tc.cfg)
			if err == nil {
				t.Fatalf("LoadScripted succeeded, want an error")
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}
