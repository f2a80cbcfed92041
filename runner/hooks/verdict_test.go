package hooks

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseOutput(t *testing.T) {
	t.Parallel()
	f := false
	tests := []struct {
		in   string
		want Output
		err  string
	}{
		{in: `{}`},
		{in: `{"decision":"block","reason":"r","systemMessage":"s","continue":false,"stopReason":"sr","suppressOutput":true}`,
			want: Output{Decision: "block", Reason: "r", SystemMessage: "s", Continue: &f, StopReason: "sr"}},
		{in: `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no","updatedInput":{"a":1},"additionalContext":"c"}}`,
			want: Output{HookSpecificOutput: &SpecificOutput{HookEventName: "PreToolUse", PermissionDecision: "deny", PermissionDecisionReason: "no", UpdatedInput: []byte(`{"a":1}`), AdditionalContext: "c"}}},
		{in: `{"hookSpecificOutput":{"updatedInput":null}}`, want: Output{HookSpecificOutput: &SpecificOutput{}}},
		{in: `{"decision":"approve"}`, want: Output{Decision: "approve"}},
		{in: `{"decision":"deny"}`, err: `decision "deny" is not block or approve`},
		{in: `{"decision":1}`, err: "field decision must be a string, not number"},
		{in: `{"continue":"no"}`, err: "field continue must be a boolean, not string"},
		{in: `{"hookSpecificOutput":"x"}`, err: "field hookSpecificOutput must be an object, not string"},
		{in: `{"hookSpecificOutput":{"permissionDecision":"maybe"}}`, err: `permissionDecision "maybe" is not allow, deny, ask or defer`},
		{in: `{"hookSpecificOutput":{"updatedInput":"rm -rf /"}}`, err: "updatedInput must be a JSON object"},
		{in: `{"hookSpecificOutput":{"updatedInput":[1]}}`, err: "updatedInput must be a JSON object"},
		{in: `{} {}`, err: "text after the JSON object"},
		{in: `{} x`, err: "text after the JSON object"},
		{in: `{"a":`, err: "not a JSON object"},
		{in: `[1]`, err: "must be a JSON object, not array"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseOutput([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInterpret covers how each format reads each kind of answer.
func TestInterpret(t *testing.T) {
	t.Parallel()
	hook := func(f Format, ev Event) *Hook { return &Hook{ID: "h", Format: f, Event: ev} }
	tests := []struct {
		name           string
		hook           *Hook
		exit           int
		stdout, stderr string
		want           answer
	}{
		{"empty allows", hook(FormatTOML, PreToolUse), 0, " \n", "log", answer{}},
		{"toml exit 2 blocks", hook(FormatTOML, PreToolUse), 2, "", "no rm\n", answer{decision: Block, reason: "no rm"}},
		{"toml exit 2 without reason fails", hook(FormatTOML, PreToolUse), 2, "", " \n", answer{failed: "exit status 2 without a reason on standard error"}},
		{"toml exit 2 on SessionStart is ignored", hook(FormatTOML, SessionStart), 2, "", "x", answer{ignored: []string{"a block (exit status 2): SessionStart cannot be blocked"}}},
		{"yaml exit 2 without reason blocks", hook(FormatYAML, Stop), 2, "", "", answer{decision: Block, reason: "blocked by hook h"}},
		{"yaml exit 2 on SessionStart fails", hook(FormatYAML, SessionStart), 2, "", "x", answer{failed: "exit status 2, but SessionStart cannot be blocked"}},
		{"yaml exit 2 on SubagentStart fails", hook(FormatYAML, SubagentStart), 2, "", "x", answer{failed: "exit status 2, but SubagentStart cannot be blocked"}},
		{"other exit fails", hook(FormatYAML, PreToolUse), 1, `{"decision":"block"}`, "", answer{failed: "exit status 1"}},
		{"toml plain text is malformed", hook(FormatTOML, PreToolUse), 0, "ok", "", answer{failed: "output is not a JSON verdict"}},
		{"yaml plain text is context on UserPromptSubmit", hook(FormatYAML, UserPromptSubmit), 0, "today is Monday\n", "", answer{context: "today is Monday"}},
		{"yaml plain text is context on SessionStart", hook(FormatYAML, SessionStart), 0, "ctx", "", answer{context: "ctx"}},
		{"yaml plain text is ignored on PreToolUse", hook(FormatYAML, PreToolUse), 0, "ok", "", answer{ignored: []string{"plain-text output: it adds context only on SessionStart, SubagentStart and UserPromptSubmit, not PreToolUse"}}},
		{"invalid json fails", hook(FormatYAML, PreToolUse), 0, "{not json", "", answer{failed: "invalid JSON output: not a JSON object: invalid character 'n' looking for beginning of object key string"}},
		{"deny", hook(FormatYAML, PreToolUse), 0, `{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no"}}`, "", answer{decision: Block, reason: "no"}},
		{"deny falls back on reason", hook(FormatTOML, PreToolUse), 0, `{"reason":"r","hookSpecificOutput":{"permissionDecision":"deny"}}`, "", answer{decision: Block, reason: "r"}},
		{"deny without reason", hook(FormatTOML, PreToolUse), 0, `{"hookSpecificOutput":{"permissionDecision":"deny"}}`, "", answer{decision: Block, reason: "denied by hook h"}},
		{"allow", hook(FormatYAML, PreToolUse), 0, `{"hookSpecificOutput":{"permissionDecision":"allow"}}`, "", answer{decision: Allow}},
		{"legacy approve", hook(FormatTOML, PreToolUse), 0, `{"decision":"approve"}`, "", answer{decision: Allow}},
		{"legacy block on PreToolUse denies", hook(FormatYAML, PreToolUse), 0, `{"decision":"block","reason":"r"}`, "", answer{decision: Block, reason: "r"}},
		{"toml ask", hook(FormatTOML, PreToolUse), 0, `{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}`, "", answer{decision: Ask, reason: "sure?"}},
		{"yaml ask fails", hook(FormatYAML, PreToolUse), 0, `{"hookSpecificOutput":{"permissionDecision":"ask"}}`, "", answer{failed: `permissionDecision "ask" is a hook failure for hooks/*.yaml hooks`}},
		{"yaml defer fails", hook(FormatYAML, PreToolUse), 0, `{"hookSpecificOutput":{"permissionDecision":"defer"}}`, "", answer{failed: `permissionDecision "defer" is a hook failure for hooks/*.yaml hooks`}},
		{"toml defer is malformed", hook(FormatTOML, PreToolUse), 0, `{"hookSpecificOutput":{"permissionDecision":"defer"}}`, "", answer{failed: `permissionDecision "defer" is not part of the hooks.toml verdict`}},
		{"updated input", hook(FormatTOML, PreToolUse), 0, `{"hookSpecificOutput":{"updatedInput":{"command":"ls"},"additionalContext":"rewrote"}}`, "", answer{updatedInput: []byte(`{"command":"ls"}`), context: "rewrote"}},
		{"updated input ignored on PostToolUse", hook(FormatYAML, PostToolUse), 0, `{"hookSpecificOutput":{"updatedInput":{"a":1}}}`, "", answer{ignored: []string{"permissionDecision and updatedInput apply to PreToolUse only, not PostToolUse"}}},
		{"post block", hook(FormatYAML, PostToolUse), 0, `{"decision":"block","reason":"secret in output"}`, "", answer{decision: Block, reason: "secret in output"}},
		{"stop block", hook(FormatTOML, Stop), 0, `{"decision":"block","reason":"tests fail"}`, "", answer{decision: Block, reason: "tests fail"}},
		{"block on SubagentStart ignored", hook(FormatYAML, SubagentStart), 0, `{"decision":"block","hookSpecificOutput":{"additionalContext":"c"}}`, "", answer{context: "c", ignored: []string{"decision block: SubagentStart cannot be blocked"}}},
		{"continue false", hook(FormatYAML, PostToolUse), 0, `{"continue":false,"stopReason":"enough","systemMessage":"bye"}`, "", answer{stop: true, stopReason: "enough", systemMessage: "bye"}},
		{"continue false without reason", hook(FormatYAML, UserPromptSubmit), 0, `{"continue":false}`, "", answer{stop: true, stopReason: "stopped by hook h"}},
		{"toml SessionStart only observes", hook(FormatTOML, SessionStart), 0, `{"continue":false,"systemMessage":"hi","hookSpecificOutput":{"additionalContext":"c"}}`, "", answer{systemMessage: "hi", ignored: []string{"the verdict: SessionStart hooks in hooks.toml only observe"}}},
		{"yaml SessionStart context", hook(FormatYAML, SessionStart), 0, `{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"c"}}`, "", answer{context: "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := interpret(tt.hook, tt.exit, tt.stdout, tt.stderr)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(answer{})); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrimPartialRune(t *testing.T) {
	t.Parallel()
	s := "aé€😀"
	for i := 0; i <= len(s); i++ {
		got := string(trimPartialRune([]byte(s[:i])))
		if !strings.HasPrefix(s, got) || len(s[:i])-len(got) > 3 || !utf8Valid(got) {
			t.Errorf("trimPartialRune(%q) = %q", s[:i], got)
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
