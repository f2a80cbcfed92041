package decide_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/decide"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/transcript"
)

const tenant = "ns"

// paused stores a session of state that paused on call-1 awaiting approval,
// or, without pending, one that ended.
func paused(t *testing.T, st store.Store, state store.State, pending bool) store.Session {
	t.Helper()
	now := time.Now()
	in := json.RawMessage(`{"command":"git push"}`)
	ps := []transcript.Payload{
		transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "push"}}},
		transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockToolUse, ID: "call-1", Name: "bash", Input: in}}},
		transcript.ToolCall{CallID: "call-1", Name: "bash", Input: in},
	}
	if pending {
		ps = append(ps, transcript.ApprovalRequest{CallID: "call-1", Tool: "bash", Preview: "git push"})
	} else {
		ps = append(ps, transcript.ToolResult{CallID: "call-1"})
	}
	var es []transcript.Entry
	for i, p := range ps {
		es = append(es, transcript.Entry{Seq: int64(i + 1), Payload: p, CreatedAt: now})
	}
	s, err := st.Create(context.Background(), tenant, store.NewSession{State: state, Entries: es})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRecord(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, tc := range []struct {
		name    string
		state   store.State
		pending bool
		call    string
		want    string // the error's text; "" for success
	}{
		{"the pending call", store.StateIdle, true, "", ""},
		{"the pending call by its id", store.StateIdle, true, "call-1", ""},
		{"another call", store.StateIdle, true, "call-9", "call call-9 does not await approval"},
		{"nothing pending", store.StateCompleted, false, "", decide.ErrNothingPending.Error()},
		{"an active session", store.StateActive, true, "", "is active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := paused(t, st, tc.state, tc.pending)
			d := transcript.ApprovalDecision{CallID: tc.call, Allowed: true, Reason: "ok", By: "test"}
			got, err := decide.Record(context.Background(), st, tenant, s.ID.String(), d)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Record: %v, want an error saying %q", err, tc.want)
				}
				if tc.want == decide.ErrNothingPending.Error() && !errors.Is(err, decide.ErrNothingPending) {
					t.Errorf("Record: %v does not match ErrNothingPending", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Session.ID != s.ID || got.Pending.Call.CallID != "call-1" {
				t.Errorf("Record decided %+v, want call-1 of %s", got, s.ID)
			}
			es, err := st.Entries(context.Background(), tenant, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := transcript.ApprovalDecision{CallID: "call-1", Allowed: true, Reason: "ok", By: "test"}
			if diff := cmp.Diff(want, es[len(es)-1].Payload); diff != "" {
				t.Errorf("last entry (-want +got):\n%s", diff)
			}
		})
	}
}
