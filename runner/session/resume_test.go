package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// probe is a tool that, when it runs, reads the session's stored entries
// and records how many of its own calls they hold.
type probe struct {
	st      store.Store
	tenant  string
	session uuid.UUID

	mu     sync.Mutex
	stored []int // per run, the probe calls stored when it started
}

func (*probe) Name() string            { return "probe" }
func (*probe) Description() string     { return "look at the journal" }
func (*probe) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (p *probe) Run(ctx context.Context, _ json.RawMessage) tools.Result {
	es, err := p.st.Entries(ctx, p.tenant, p.session)
	if err != nil {
		return tools.Result{Content: err.Error(), IsError: true}
	}
	n := 0
	for _, e := range es {
		if c, ok := e.Payload.(transcript.ToolCall); ok && c.Name == "probe" {
			n++
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stored = append(p.stored, n)
	return tools.Result{Content: "looked"}
}

// TestToolCallDurableBeforeItRuns checks the write-ahead rule on both
// stores: when a tool starts, its call is in the database, so a crash
// while it runs cannot lose it.
func TestToolCallDurableBeforeItRuns(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := "sqlite:" + filepath.Join(t.TempDir(), "sessions.db")
			if backend == "postgres" {
				url = testenv.StartPostgres(t).NewDatabase(t)
			}
			st, err := dburl.Open(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := st.Close(); err != nil {
					t.Error(err)
				}
			})
			ws := t.TempDir()
			exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := exe.Close(context.Background()); err != nil {
					t.Error(err)
				}
			})
			p := &probe{st: st, tenant: ws, session: uuid.New()}
			model := testenv.StartModelServer(t,
				testenv.Turn{ToolCalls: []testenv.ToolCall{{Name: "probe"}, {Name: "probe"}}},
				testenv.Turn{ToolCalls: []testenv.ToolCall{{Name: "probe"}}},
				testenv.Turn{Text: "done"},
			)
			rep, err := Run(t.Context(), st, Options{
				Session:    Spec{Tenant: ws, ID: p.session},
				Extensions: LoadOptions{Dir: ws},
				Prompt:     "probe",
				Model: Model{
					Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
					New: func(s transcript.Settings) (agent.Model, error) {
						return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
					},
				},
				Executor: exe,
				Tools:    []tools.Tool{p},
			})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Result.Outcome != transcript.OutcomeCompleted {
				t.Fatalf("outcome %s: %s", rep.Result.Outcome, rep.Result.Reason)
			}
			if diff := cmp.Diff([]int{1, 2, 3}, p.stored); diff != "" {
				t.Errorf("probe calls stored when each started (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResumeAnswersInterruptedCall resumes a session whose last run
// stopped while the first of two calls ran: the model is told that call
// was interrupted and may have partly run, and that the second never
// started; neither is run again, and the answers are journaled, which
// closes the calls, so that the session can be forked through its end.
func TestResumeAnswersInterruptedCall(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ws := t.TempDir()
	exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := exe.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	sess, err := st.Create(t.Context(), ws, store.NewSession{Dir: ws, Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"}})
	if err != nil {
		t.Fatal(err)
	}
	bash := func(id, file string) transcript.Block {
		return transcript.Block{Type: transcript.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{"command":"echo ran >> ` + file + `"}`)}
	}
	crashed := []transcript.Payload{
		transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "run both"}}},
		transcript.AssistantMessage{StopReason: "tool_use", Content: []transcript.Block{bash("a", "a.log"), bash("b", "b.log")}},
		transcript.Usage{InputTokens: 10, OutputTokens: 2, Requests: 1},
		transcript.ToolCall{CallID: "a", Name: "bash", Input: json.RawMessage(`{"command":"echo ran >> a.log"}`)},
	}
	var es []transcript.Entry
	for i, p := range crashed {
		es = append(es, transcript.Entry{Seq: int64(i + 1), Payload: p, CreatedAt: time.Now()})
	}
	if err := st.Append(t.Context(), ws, sess.ID, es); err != nil {
		t.Fatal(err)
	}

	model := testenv.StartModelServer(t, testenv.Turn{Text: "I will check a.log first"})
	rep, err := Run(t.Context(), st, Options{
		Session:    Spec{Tenant: ws, Resume: sess.ID.String()},
		Extensions: LoadOptions{Dir: ws},
		Model: Model{New: func(s transcript.Settings) (agent.Model, error) {
			return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
		}},
		Executor: exe,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("outcome %s: %s", rep.Result.Outcome, rep.Result.Reason)
	}
	_, _, results := decodeReq(t, model.Requests()[0])
	if !strings.Contains(results["a"], "interrupted") || !strings.Contains(results["a"], "may have partly run") {
		t.Errorf("the interrupted call was answered %s", results["a"])
	}
	if !strings.Contains(results["b"], "not run") {
		t.Errorf("the call that never started was answered %s", results["b"])
	}
	for _, f := range []string{"a.log", "b.log"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err == nil {
			t.Errorf("%s exists: a call of the crashed run was run again", f)
		}
	}

	stored, err := st.Entries(t.Context(), ws, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range stored[len(crashed):] {
		switch p := e.Payload.(type) {
		case transcript.ToolResult:
			got = append(got, "result "+p.CallID)
		case transcript.ToolCompletion:
			got = append(got, "completion "+p.CallID+" "+string(p.Status))
		case transcript.ToolCall:
			got = append(got, "call "+p.CallID)
		}
	}
	if diff := cmp.Diff([]string{"result a", "completion a interrupted", "result b"}, got); diff != "" {
		t.Errorf("tool entries journaled by the resume (-want +got):\n%s", diff)
	}
	if _, err := st.Fork(t.Context(), ws, sess.ID, store.ForkOptions{}); err != nil {
		t.Errorf("fork through the resumed session's end: %v", err)
	}
}
