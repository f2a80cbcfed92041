package headless

import (
	"context"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/store"
)

var reaper *process.Reaper

func TestMain(m *testing.M) {
	testenv.RunSubreaped(m, &reaper)
}

// TestRunOnPostgres runs and resumes a session journaled to PostgreSQL, as
// the runner pod does, with the tools in a local executor.
func TestRunOnPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)
	st, err := store.Open(t.Context(), pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ws := t.TempDir()
	exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exe.Close(context.Background()) })
	model := testenv.StartModelServer(t,
		testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "w", Name: "write_file", Arguments: `{"path": "a.txt", "content": "x"}`}}},
		testenv.Turn{Text: "wrote it"},
		testenv.Turn{Text: "still there"},
	)
	opts := Options{
		Tenant:   "team-a",
		Dir:      ws,
		Prompt:   "write a.txt",
		Settings: store.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
		NewModel: func(s store.Settings) (agent.Model, error) {
			return provider.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
		},
		System:   "be brief",
		Executor: exe,
	}
	var events []agent.Event
	opts.Observe = func(e agent.Event) { events = append(events, e) }
	rep, err := Run(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != 0 || rep.Result.Outcome != agent.Completed || rep.Journal.Entries != 9 {
		t.Fatalf("exit %d, outcome %s, %d entries journaled", rep.ExitCode, rep.Result.Outcome, rep.Journal.Entries)
	}
	if events[0].Type != agent.EventSessionStart || events[len(events)-1].Type != agent.EventSessionEnd {
		t.Errorf("events run from %s to %s", events[0].Type, events[len(events)-1].Type)
	}

	opts.Resume, opts.Prompt, opts.Settings = rep.Session.ID.String(), "is it there?", store.Settings{}
	rep2, err := Run(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Session.ID != rep.Session.ID || rep2.Settings.Model != "claude-sonnet-4-5" || rep2.Result.Answer != "still there" {
		t.Errorf("resume: session %s, model %s, answer %q", rep2.Session.ID, rep2.Settings.Model, rep2.Result.Answer)
	}
	es, err := st.Entries(t.Context(), "team-a", rep.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 13 {
		t.Errorf("%d entries after the resume, want 13", len(es))
	}
	sess, err := st.Session(t.Context(), "team-a", rep.Session.ID)
	if err != nil || sess.State != store.StateCompleted {
		t.Errorf("state %q, %v", sess.State, err)
	}
	// Another tenant cannot resume it.
	opts.Tenant = "team-b"
	if _, err := Run(t.Context(), st, opts); err == nil {
		t.Error("another tenant resumed the session")
	}
}
