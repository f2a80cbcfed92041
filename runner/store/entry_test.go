package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
)

func asEntryError(err error, target **store.EntryError) bool {
	return errors.As(err, target) && errors.Is(err, store.ErrCorruptEntry)
}

func TestDecodeEntryRoundTrip(t *testing.T) {
	t.Parallel()
	child := uuid.New()
	payloads := []store.Payload{
		store.UserMessage{Content: []store.Block{{Type: store.BlockText, Text: "hi"}}},
		store.AssistantMessage{Content: []store.Block{{Type: store.BlockToolUse, ID: "c", Name: "bash", Input: json.RawMessage(`{"a":1}`)}}, StopReason: "tool_use"},
		store.ToolResult{CallID: "c", Content: []store.Block{{Type: store.BlockText, Text: "out"}}, IsError: true},
		store.ToolCall{CallID: "c", Name: "bash", Input: json.RawMessage(`{"a":1}`)},
		store.ToolCompletion{CallID: "c", Status: store.ToolTimeout, Duration: time.Minute, Error: "timed out"},
		store.ProviderChange{Provider: "p"},
		store.ModelChange{Model: "m"},
		store.PersonaChange{Persona: "x"},
		store.ReasoningChange{Effort: "low"},
		store.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5, Requests: 6, CostUSD: 7.5, ContextTokens: 8},
		store.Checkpoint{Turn: 2, Outcome: "completed", Result: "ok"},
		store.Compaction{Replacement: []store.Block{{Type: store.BlockText, Text: "s"}}, FirstKept: 3,
			Provenance: store.Provenance{Trigger: "overflow", PendingChildren: []uuid.UUID{child}}},
		store.Fork{Source: child, SourceSeq: 9},
		store.SubagentOutcome{Session: child, Outcome: "completed", Usage: &store.Usage{Requests: 1}},
		store.Layers{Layers: []store.Layer{
			{Name: ".aerie", Kind: "project", Source: "/workspace/.aerie", Digest: "sha256:ab"},
			{Name: "go", Kind: "spec", Source: "configmap/go-tools"},
		}},
		store.HookVerdict{Event: "PreToolUse", CallID: "c", Tool: "bash", Decision: "block", Reason: "no",
			Approval: &store.HookApproval{Reason: "nobody can approve", Policy: "deny"}, UpdatedInput: json.RawMessage(`{"a":2}`),
			Context: "ctx", SystemMessages: []string{"m"}, Stop: true, StopReason: "s",
			Runs: []store.HookRun{{Hook: "/h.yaml#PreToolUse[0].hooks[0]", Exit: 0, Duration: time.Second, Decision: "ask", Reason: "sure?"}, {Hook: "x", Exit: -1, Skipped: "modified"}}},
	}
	for _, p := range payloads {
		t.Run(string(p.EntryKind()), func(t *testing.T) {
			t.Parallel()
			b, err := store.EncodePayload(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := store.DecodeEntry(uuid.New(), 1, string(p.EntryKind()), b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(p, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeEntryRejects(t *testing.T) {
	t.Parallel()
	session := uuid.MustParse("00000000-0000-4000-8000-00000000abcd")
	tests := []struct {
		name, kind, payload, want string
	}{
		{"unknown kind", "dream", `{}`, "unknown entry kind"},
		{"empty kind", "", `{}`, "unknown entry kind"},
		{"malformed", "usage", `{"input_tokens":`, "decode payload"},
		{"trailing data", "usage", `{} {}`, "decode payload"},
		{"null", "usage", `null`, "not a JSON object"},
		{"array", "usage", `[]`, "not a JSON object"},
		{"empty", "usage", ``, "not a JSON object"},
		{"wrong field type", "model_change", `{"model":3}`, "decode payload"},
		{"missing model", "model_change", `{}`, "without model"},
		{"missing call id", "tool_call", `{"name":"bash"}`, "without call id"},
		{"missing tool name", "tool_call", `{"call_id":"c"}`, "without tool name"},
		{"missing status", "tool_completion", `{"call_id":"c"}`, "without status"},
		{"layer without name", "layers", `{"layers":[{"kind":"spec"}]}`, "layer 0 has no name"},
		{"layer without kind", "layers", `{"layers":[{"name":"a","kind":"spec"},{"name":"b"}]}`, "layer 1 (b) has no kind"},
		{"untyped block", "user_message", `{"content":[{"text":"x"}]}`, "no type"},
		{"compaction without cut", "compaction", `{"replacement":[]}`, "first kept"},
		{"fork without source", "fork", `{"source_seq":1}`, "without source"},
		{"bad uuid", "fork", `{"source":"nope"}`, "decode payload"},
		{"outcome without session", "subagent_outcome", `{"outcome":"done"}`, "without session"},
		{"verdict without event", "hook_verdict", `{"decision":"block"}`, "without event"},
		{"verdict run without hook", "hook_verdict", `{"event":"Stop","runs":[{"exit":0}]}`, "run 0 without hook"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := store.DecodeEntry(session, 17, tt.kind, []byte(tt.payload))
			var entryErr *store.EntryError
			if !asEntryError(err, &entryErr) {
				t.Fatalf("error %v is not a corrupt entry error", err)
			}
			msg := err.Error()
			for _, want := range []string{session.String(), "entry 17", tt.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
		})
	}
}

func TestEncodePayloadRefusesInvalid(t *testing.T) {
	t.Parallel()
	for _, p := range []store.Payload{nil, store.ToolCall{}, store.Fork{}, store.Compaction{FirstKept: 0}} {
		if _, err := store.EncodePayload(p); err == nil {
			t.Errorf("EncodePayload(%#v) succeeded", p)
		}
	}
}
