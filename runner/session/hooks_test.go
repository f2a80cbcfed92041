package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/atif"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestHookVerdictsJournaled runs a session in which a SessionStart hook adds
// context and a PreToolUse hook denies the model's command, journaled to a
// SQLite file: the verdicts are entries of the session, in order with the
// messages and the tool call they were about, and a resume reads past them.
func TestHookVerdictsJournaled(t *testing.T) {
	t.Parallel()
	st, err := dburl.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ws, home := t.TempDir(), t.TempDir()
	for name, content := range map[string]string{
		"hooks/start.yaml": "hooks:\n  SessionStart:\n    - hooks: [{type: command, command: echo on branch main}]\n",
		"hooks/guard.yaml": "hooks:\n  PreToolUse:\n    - matcher: bash\n      hooks:\n        - type: command\n          command: |\n            echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"no deleting\"}}'\n",
		// A hook that only watches: its verdicts decide nothing and are
		// not journaled.
		"hooks/watch.yaml": "hooks:\n  UserPromptSubmit:\n    - hooks: [{type: command, command: 'true'}]\n",
	} {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := exe.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	model := testenv.StartModelServer(t,
		testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "toolu_1", Name: "bash", Arguments: `{"command": "rm -rf build"}`}}},
		testenv.Turn{Text: "I may not delete it."},
		testenv.Turn{Text: "Still not."},
	)
	opts := Options{
		Session: Spec{Tenant: ws}, Prompt: "delete build",
		Model: Model{
			Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
			New: func(s transcript.Settings) (agent.Model, error) {
				return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
			},
		},
		Extensions: LoadOptions{Dir: ws, Layers: []layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}}},
		Executor:   exe,
	}
	rep, err := Run(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("outcome %s: %s", rep.Result.Outcome, rep.Result.Reason)
	}
	entries, err := st.Entries(t.Context(), ws, rep.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var verdicts []transcript.HookVerdict
	for _, e := range entries {
		kinds = append(kinds, string(e.Kind()))
		if v, ok := e.Payload.(transcript.HookVerdict); ok {
			verdicts = append(verdicts, v)
		}
	}
	want := []string{
		"layers",       // what the run was made with
		"hook_verdict", // SessionStart: context
		"user_message", "assistant_message", "usage",
		"tool_call", "hook_verdict", // PreToolUse: denied
		"tool_result", "tool_completion",
		"assistant_message", "usage", "checkpoint",
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Fatalf("entries (-want +got):\n%s", diff)
	}
	if v := verdicts[0]; v.Event != "SessionStart" || v.Context != "on branch main" || len(v.Runs) != 1 || v.Runs[0].Exit != 0 {
		t.Errorf("SessionStart verdict %+v", v)
	}
	deny := verdicts[1]
	if deny.Event != "PreToolUse" || deny.CallID != "toolu_1" || deny.Tool != "bash" || deny.Decision != "block" || deny.Reason != "no deleting" ||
		len(deny.Runs) != 1 || !strings.HasSuffix(deny.Runs[0].Hook, "guard.yaml#PreToolUse[0].hooks[0]") || deny.Runs[0].Decision != "block" {
		t.Errorf("PreToolUse verdict %+v", deny)
	}
	if r, ok := entries[7].Payload.(transcript.ToolResult); !ok || !r.IsError || !strings.Contains(r.Content[0].Text, "blocked by a PreToolUse hook: no deleting") {
		t.Errorf("tool result %+v", entries[7].Payload)
	}

	// The trajectory puts the denial on the call.
	tr, err := atif.BuildTrajectory(atif.TrajectoryInput{Session: atif.SessionRecord{ID: rep.Session.ID}, Entries: entries, Agent: atif.AgentInfo{Name: "aerie", Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Extra["skipped_entries"] != nil {
		t.Errorf("trajectory skipped %v", tr.Extra["skipped_entries"])
	}
	if hs, _ := tr.Steps[2].ToolCalls[0].Extra["hooks"].([]atif.Hook); len(hs) != 1 || hs[0].Seq != 7 || hs[0].Decision != "block" {
		t.Errorf("trajectory hooks of the call: %+v", tr.Steps[2].ToolCalls[0].Extra)
	}

	// A resume reads past the verdicts: the conversation it sends is the
	// messages alone.
	opts.Session.Resume, opts.Prompt = rep.Session.ID.String(), "try again"
	if rep2, err := Run(t.Context(), st, opts); err != nil || rep2.Result.Answer != "Still not." {
		t.Fatalf("resume: %+v, %v", rep2.Result, err)
	}
	reqs := model.Requests()
	var body struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := reqs[len(reqs)-1].Decode(&body); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]string{"user", "assistant", "user", "assistant", "user"}, roles); diff != "" {
		t.Errorf("resumed conversation (-want +got):\n%s", diff)
	}
}

func TestHookEntry(t *testing.T) {
	t.Parallel()
	ran := []hooks.Run{{Hook: "h#Stop[0].hooks[0]"}}
	tests := []struct {
		name string
		v    hooks.Verdict
		keep bool
	}{
		{"nothing decided", hooks.Verdict{Event: hooks.PostToolUse, Runs: ran}, false},
		{"allowed", hooks.Verdict{Event: hooks.PreToolUse, Decision: hooks.Allow, Runs: ran}, true},
		{"blocked", hooks.Verdict{Event: hooks.Stop, Decision: hooks.Block, Reason: "tests", Runs: ran}, true},
		{"rewrote", hooks.Verdict{Event: hooks.PreToolUse, UpdatedInput: json.RawMessage(`{}`), Runs: ran}, true},
		{"context", hooks.Verdict{Event: hooks.SessionStart, Context: "c", Runs: ran}, true},
		{"stopped", hooks.Verdict{Event: hooks.PostToolUse, Stop: true, Runs: ran}, true},
		{"approval", hooks.Verdict{Event: hooks.PreToolUse, Decision: hooks.Block, Approval: &hooks.Approval{Reason: "r", Policy: "deny"}, Runs: ran}, true},
		{"message", hooks.Verdict{Event: hooks.Stop, SystemMessages: []string{"m"}, Runs: ran}, true},
		{"failed", hooks.Verdict{Event: hooks.Stop, Runs: []hooks.Run{{Hook: "h", Exit: 1, Failed: "exit status 1"}}}, true},
		{"ignored", hooks.Verdict{Event: hooks.SessionEnd, Runs: []hooks.Run{{Hook: "h", Ignored: "observe only"}}}, true},
		{"skipped", hooks.Verdict{Event: hooks.Stop, Runs: []hooks.Run{{Hook: "h", Exit: -1, Skipped: "modified"}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, ok := hookEntry(tt.v)
			if ok != tt.keep {
				t.Fatalf("kept %v, want %v", ok, tt.keep)
			}
			if !ok {
				return
			}
			if e.Event != string(tt.v.Event) || len(e.Runs) != len(tt.v.Runs) || e.Runs[0].Hook != tt.v.Runs[0].Hook || (tt.v.Approval != nil) != (e.Approval != nil) {
				t.Errorf("entry %+v", e)
			}
			if _, err := transcript.EncodePayload(e); err != nil {
				t.Errorf("not storable: %v", err)
			}
		})
	}
}
