package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/provider"
)

// FuzzScriptedParse checks that the script decoder never panics, that what it
// accepts is a well-formed script, and that the Scripted provider replays each
// accepted turn exactly.
func FuzzScriptedParse(f *testing.F) {
	for _, seed := range []string{
		demoScript,
		"turns:\n  - text: hi\n",
		`{"turns": [{"text": "hi", "tool_calls": [{"name": "t", "arguments": {"a": [1, 2.5, null, true]}}]}]}`,
		"turns:\n  - tool_calls: [{name: t, arguments: '{bad'}]\n    stop_reason: max_tokens\n",
		"turns:\n  - &a {text: x}\n  - *a\n",
		"turns:\n  - {reasoning: r, usage: {input_tokens: 0x10, cache_write_tokens: 16}}\n",
		"turns:\n  - tool_calls: [{name: t, arguments: {1: 2}}]\n",
		"turns: [{text: \"\\u00e9\\t\"}]\n---\nturns: []\n",
		"",
		"{",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		turns, err := provider.ParseScript("fuzz.yaml", data)
		if err != nil {
			return
		}
		if len(turns) == 0 {
			t.Fatal("accepted a script without turns")
		}
		ids := map[string]bool{}
		for i, turn := range turns {
			if turn.Message.Role != provider.RoleAssistant || len(turn.Message.Content) == 0 {
				t.Fatalf("turn %d: accepted an empty turn: %+v", i, turn)
			}
			if turn.StopReason == "" {
				t.Fatalf("turn %d: no stop reason", i)
			}
			u := turn.Usage
			if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 ||
				u.CacheReadTokens+u.CacheWriteTokens > u.InputTokens {
				t.Fatalf("turn %d: accepted usage %+v", i, u)
			}
			for _, c := range turn.Message.ToolCalls() {
				if c.ToolName == "" || c.ToolCallID == "" || c.Arguments == "" || ids[c.ToolCallID] {
					t.Fatalf("turn %d: accepted tool call %+v", i, c)
				}
				ids[c.ToolCallID] = true
			}
			if _, err := json.Marshal(turn); err != nil {
				t.Fatalf("turn %d: cannot be journaled: %v", i, err)
			}
		}
		p := provider.NewScripted("fuzz.yaml", turns)
		for i, want := range turns {
			got, err := provider.Collect(p.Stream(t.Context(), userRequest("go")))
			if err != nil {
				t.Fatalf("replay of turn %d: %v", i, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("replay of turn %d (-want +got):\n%s", i, diff)
			}
		}
	})
}

func userRequest(text string) provider.Request {
	return provider.Request{Messages: []provider.Message{provider.UserMessage(text)}}
}
