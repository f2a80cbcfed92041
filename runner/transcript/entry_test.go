package transcript_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

func asEntryError(err error, target **transcript.EntryError) bool {
	return errors.As(err, target) && errors.Is(err, transcript.ErrCorruptEntry)
}

func TestDecodeEntryRoundTrip(t *testing.T) {
	t.Parallel()
	child := uuid.New()
	payloads := []transcript.Payload{
		transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "hi"}}},
		transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockToolUse, ID: "c", Name: "bash", Input: json.RawMessage(`{"a":1}`)}}, StopReason: "tool_use"},
		transcript.ToolResult{CallID: "c", Content: []transcript.Block{{Type: transcript.BlockText, Text: "out"}}, IsError: true},
		transcript.ToolCall{CallID: "c", Name: "bash", Input: json.RawMessage(`{"a":1}`)},
		transcript.ToolCompletion{CallID: "c", Status: transcript.ToolTimeout, Duration: time.Minute, Error: "timed out"},
		transcript.ProviderChange{Provider: "p"},
		transcript.ModelChange{Model: "m"},
		transcript.PersonaChange{Persona: "x"},
		transcript.ReasoningChange{Effort: "low"},
		transcript.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5, Requests: 6, CostUSD: 7.5, ContextTokens: 8},
		transcript.Checkpoint{Turn: 2, Outcome: "completed", Result: "ok"},
		transcript.Compaction{Replacement: []transcript.Block{{Type: transcript.BlockText, Text: "s"}}, FirstKept: 3,
			Provenance: transcript.Provenance{Trigger: "overflow", PendingChildren: []uuid.UUID{child}}},
		transcript.Fork{Source: child, SourceSeq: 9},
		transcript.SubagentOutcome{Session: child, Outcome: "completed", Usage: &transcript.Usage{Requests: 1}},
		transcript.Layers{Layers: []transcript.Layer{
			{Name: ".aerie", Kind: "project", Source: "/workspace/.aerie", Digest: "sha256:ab"},
			{Name: "go", Kind: "spec", Source: "configmap/go-tools"},
		}},
		transcript.HookVerdict{Event: "PreToolUse", CallID: "c", Tool: "bash", Decision: "block", Reason: "no",
			Approval: &transcript.HookApproval{Reason: "nobody can approve", Policy: "deny"}, UpdatedInput: json.RawMessage(`{"a":2}`),
			Context: "ctx", SystemMessages: []string{"m"}, Stop: true, StopReason: "s",
			Runs: []transcript.HookRun{{Hook: "/h.yaml#PreToolUse[0].hooks[0]", Exit: 0, Duration: time.Second, Decision: "ask", Reason: "sure?"}, {Hook: "x", Exit: -1, Skipped: "modified"}}},
		transcript.ApprovalRequest{CallID: "c", Tool: "bash", Preview: `{"command":"rm -rf build"}`, Hooks: []string{"h#0"}, Reason: "rm needs a person"},
		transcript.ApprovalDecision{CallID: "c", Allowed: true, Reason: "fine", By: "aerie approve"},
		transcript.WorkspaceDiff{Base: "4b825dc642cb6eb9a060e54bf8d69288fbee4904", Stat: " a | 1 +\n", Patch: "diff --git",
			Bytes: 20, Cap: 10, Truncated: true, Error: "git diff: exit 128"},
		transcript.Result{Value: json.RawMessage(`{"ok":true,"files":["a.go"]}`), SchemaDigest: "sha256:ab"},
	}
	for _, p := range payloads {
		t.Run(string(p.EntryKind()), func(t *testing.T) {
			t.Parallel()
			b, err := transcript.EncodePayload(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := transcript.DecodeEntry(uuid.New(), 1, p.EntryKind(), string(b))
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
		{"diff without base", "workspace_diff", `{"patch":"x","bytes":1}`, "without base commit"},
		{"diff longer than its size", "workspace_diff", `{"base":"a","patch":"xyz","bytes":1}`, "holds a longer patch"},
		{"diff truncated but whole", "workspace_diff", `{"base":"a","patch":"x","bytes":1,"truncated":true}`, "all of its 1 bytes kept"},
		{"verdict run without hook", "hook_verdict", `{"event":"Stop","runs":[{"exit":0}]}`, "run 0 without hook"},
		{"approval request without call", "approval_request", `{"tool":"bash"}`, "approval request without call id"},
		{"approval request without tool", "approval_request", `{"call_id":"c"}`, "without tool name"},
		{"approval decision without call", "approval_decision", `{"allowed":true}`, "approval decision without call id"},
		{"approval decision allowed not a boolean", "approval_decision", `{"call_id":"c","allowed":"yes"}`, "decode payload"},
		{"result without value", "result", `{"schema_digest":"sha256:00"}`, "without value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := transcript.DecodeEntry(session, 17, transcript.EntryKind(tt.kind), tt.payload)
			var entryErr *transcript.EntryError
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
	for _, p := range []transcript.Payload{nil, transcript.ToolCall{}, transcript.Fork{}, transcript.Compaction{FirstKept: 0}} {
		if _, err := transcript.EncodePayload(p); err == nil {
			t.Errorf("EncodePayload(%#v) succeeded", p)
		}
	}
}

func TestKindOfDoesNotAllocate(t *testing.T) {
	raw := []byte("tool_result")
	if n := testing.AllocsPerRun(100, func() { _ = transcript.KindOf(raw) }); n != 0 {
		t.Errorf("KindOf allocates %v times", n)
	}
	if got := transcript.KindOf([]byte("new_kind")); got != "new_kind" {
		t.Errorf("KindOf of an unknown kind = %q", got)
	}
}
