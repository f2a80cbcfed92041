package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/transcript"
)

// TestPendingApproval: a call with an ApprovalRequest and no result is
// pending, with its last decision; a ToolCall journaled again after the
// request (the approved call started) or a result ends it; Unanswered
// leaves a pending call open and answers a started one as interrupted.
func TestPendingApproval(t *testing.T) {
	t.Parallel()
	assistant := transcript.AssistantMessage{Content: []transcript.Block{
		{Type: transcript.BlockToolUse, ID: "a", Name: "bash", Input: json.RawMessage(`{"command":"rm x"}`)},
		{Type: transcript.BlockToolUse, ID: "b", Name: "read_file"},
	}}
	call := transcript.ToolCall{CallID: "a", Name: "bash", Input: json.RawMessage(`{"command":"rm x"}`)}
	req := transcript.ApprovalRequest{CallID: "a", Tool: "bash", Reason: "rm"}
	notRun := transcript.ToolResult{CallID: "b", Content: []transcript.Block{{Type: transcript.BlockText, Text: "not run"}}, IsError: true}
	allow := transcript.ApprovalDecision{CallID: "a", Allowed: true}
	deny := transcript.ApprovalDecision{CallID: "a", Reason: "no"}
	snap := func(ps ...transcript.Payload) transcript.Snapshot {
		var s transcript.Snapshot
		for i, p := range ps {
			s.Entries = append(s.Entries, transcript.Entry{Seq: int64(i + 1), Payload: p})
		}
		return s
	}
	result := transcript.ToolResult{CallID: "a", Content: []transcript.Block{{Type: transcript.BlockText, Text: "ok"}}}
	tests := []struct {
		name       string
		snap       transcript.Snapshot
		pending    bool
		decision   *transcript.ApprovalDecision
		unanswered int
	}{
		{"paused", snap(assistant, call, req, transcript.ToolCall{CallID: "b", Name: "read_file"}, notRun), true, nil, 1},
		{"decided, last wins", snap(assistant, call, req, notRun, allow, deny), true, &deny, 0},
		{"approved call started", snap(assistant, call, req, notRun, allow, call), false, nil, 2},
		{"answered", snap(assistant, call, req, notRun, allow, call, result), false, nil, 1},
		{"no request", snap(assistant, call), false, nil, 3},
		{"user message after", snap(assistant, call, req, transcript.UserMessage{}), false, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, ok := PendingApproval(tt.snap)
			if ok != tt.pending {
				t.Fatalf("pending %v, want %v", ok, tt.pending)
			}
			if ok {
				if p.Call.CallID != "a" || !cmp.Equal(p.Request, req) || !cmp.Equal(p.Decision, tt.decision) {
					t.Errorf("pending %+v", p)
				}
			}
			if n := len(Unanswered(tt.snap)); n != tt.unanswered {
				t.Errorf("Unanswered gave %d entries, want %d: %+v", n, tt.unanswered, Unanswered(tt.snap))
			}
		})
	}
}

func TestPreview(t *testing.T) {
	t.Parallel()
	long := `{"command":"` + strings.Repeat("é", 300) + `"}`
	if p := Preview(long); len(p) > MaxPreview+len("…") {
		t.Errorf("preview of %d bytes", len(p))
	}
	if p := Preview("{\n  \"a\": 1\n}"); p != `{ "a": 1 }` {
		t.Errorf("preview %q", p)
	}
}
