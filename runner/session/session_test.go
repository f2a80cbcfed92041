package session

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

var reaper *process.Reaper

func TestMain(m *testing.M) {
	if os.Getenv(mcpServerEnv) == "stdio" {
		os.Exit(serveMCPStdio())
	}
	testenv.RunSubreaped(m, &reaper)
}

// TestRunOnPostgres runs and resumes a session journaled to PostgreSQL, as
// the runner pod does, with the tools in a local executor.
func TestRunOnPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)
	st, err := dburl.Open(t.Context(), pg.NewDatabase(t))
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
	model := testenv.StartModelServer(t,
		testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "w", Name: "write_file", Arguments: `{"path": "a.txt", "content": "x"}`}}},
		testenv.Turn{Text: "wrote it"},
		testenv.Turn{Text: "still there"},
	)
	opts := Options{
		Session:    Spec{Tenant: "team-a"},
		Extensions: LoadOptions{Dir: ws, System: "be brief"},
		Prompt:     "write a.txt",
		Model: Model{
			Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
			New: func(s transcript.Settings) (agent.Model, error) {
				return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
			},
		},
		Executor: exe,
	}
	var evs []events.Event
	opts.Observe = func(e events.Event) { evs = append(evs, e) }
	rep, err := Run(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != 0 || rep.Result.Outcome != transcript.OutcomeCompleted || rep.Journal.Entries != 10 {
		t.Fatalf("exit %d, outcome %s, %d entries journaled", rep.ExitCode, rep.Result.Outcome, rep.Journal.Entries)
	}
	if evs[0].Type != events.SessionStart || evs[len(evs)-1].Type != events.SessionEnd {
		t.Errorf("events run from %s to %s", evs[0].Type, evs[len(evs)-1].Type)
	}

	opts.Session.Resume, opts.Prompt, opts.Model.Settings = rep.Session.ID.String(), "is it there?", transcript.Settings{}
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
	// Each run starts with its layers record.
	if len(es) != 15 || es[0].Kind() != transcript.KindLayers || es[10].Kind() != transcript.KindLayers {
		t.Errorf("%d entries after the resume, want 15, each run's first the layers record", len(es))
	}
	sess, err := st.Session(t.Context(), "team-a", rep.Session.ID)
	if err != nil || sess.State != store.StateCompleted {
		t.Errorf("state %q, %v", sess.State, err)
	}
	// Another tenant cannot resume it.
	opts.Session.Tenant = "team-b"
	if _, err := Run(t.Context(), st, opts); err == nil {
		t.Error("another tenant resumed the session")
	}
}

// TestRunLayersPersonaWindow runs a session with a spec layer holding a
// persona and a toolset: the persona's prompt is the model's system
// prompt, its toolset selects the tools, the layers record lists every
// layer with its digest, and the context window stated wins over the
// model's known one. A resume without the persona switches back to the
// default and records the switch.
func TestRunLayersPersonaWindow(t *testing.T) {
	t.Parallel()
	st, err := dburl.Open(t.Context(), filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ws := t.TempDir()
	spec := t.TempDir()
	for name, content := range map[string]string{
		filepath.Join(spec, "personas", "reviewer.toml"): "description = 'Reviews.'\nprompt = 'You review code and change nothing.'\ntoolset = 'readonly'\n",
		filepath.Join(spec, "toolsets.toml"):             "[toolsets.readonly]\ntools = ['read_file', 'grep']\n",
		filepath.Join(ws, ".aerie", "APPEND_SYSTEM.md"):  "Project rules.\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
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
	model := testenv.StartModelServer(t, testenv.Turn{Text: "looks fine"}, testenv.Turn{Text: "still fine"})
	layers := []layer.Layer{
		{Name: ".aerie", Kind: layer.KindProject, Dir: filepath.Join(ws, ".aerie")},
		{Name: "review", Kind: layer.KindSpec, Dir: spec, Source: "configmap/review", Digest: "sha256:" + strings.Repeat("0", 64)},
		layer.Bundled(),
	}
	opts := Options{
		Session: Spec{Tenant: "team-a"}, Prompt: "review it",
		Model: Model{
			Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
			New: func(s transcript.Settings) (agent.Model, error) {
				return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
			},
			ContextWindow: 50_000,
		},
		Extensions: LoadOptions{Dir: ws, Workspace: ws, System: "default persona", Layers: layers},
		Persona:    "reviewer", Executor: exe,
	}
	rep, err := Run(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != 0 || rep.ContextWindow != 50_000 || rep.Persona.Name != "reviewer" || rep.Settings.Persona != "reviewer" {
		t.Fatalf("exit %d, window %d, persona %+v, settings %+v", rep.ExitCode, rep.ContextWindow, rep.Persona, rep.Settings)
	}
	if want := "You review code and change nothing.\n\nProject rules."; !strings.HasPrefix(rep.System, want) {
		t.Errorf("system prompt %q, want it to start %q", rep.System, want)
	}
	var offered []string
	for _, tl := range rep.Tools {
		offered = append(offered, tl.Name)
	}
	if diff := cmp.Diff([]string{"read_file", "grep"}, offered); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}
	req := model.Requests()[0]
	if !bytes.Contains(req.Body, []byte("You review code and change nothing.")) {
		t.Errorf("the model did not get the persona's prompt: %s", req.Body)
	}

	es, err := st.Entries(t.Context(), "team-a", rep.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := es[0].Payload.(transcript.Layers)
	if !ok {
		t.Fatalf("first entry %T, want the layers record", es[0].Payload)
	}
	projDigest, err := layer.ContentDigest(ws, layers[0])
	if err != nil {
		t.Fatal(err)
	}
	specDigest, err := layer.ContentDigest(ws, layers[1])
	if err != nil {
		t.Fatal(err)
	}
	want := []transcript.Layer{
		{Name: ".aerie", Kind: "project", Source: filepath.Join(ws, ".aerie"), Digest: projDigest},
		// The digest of what was read, not the stale one given.
		{Name: "review", Kind: "spec", Source: "configmap/review", Digest: specDigest},
		{Name: "bundled", Kind: "bundled", Digest: layer.Bundled().Digest},
	}
	if diff := cmp.Diff(want, rec.Layers); diff != "" {
		t.Errorf("layers record (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(rec.Layers, layersEntry(rep.Layers).Layers); diff != "" {
		t.Errorf("report's layers differ from the record (-record +report):\n%s", diff)
	}

	// Resumed with the default persona: the switch is recorded, the
	// model's own window applies.
	opts.Session.Resume, opts.Prompt, opts.Persona, opts.Model.ContextWindow = rep.Session.ID.String(), "again", "", 0
	opts.Model.Settings = transcript.Settings{}
	rep2, err := Run(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Settings.Persona != "" || rep2.ContextWindow != 200_000 || !strings.HasPrefix(rep2.System, "default persona") {
		t.Errorf("resume: settings %+v, window %d, system %q", rep2.Settings, rep2.ContextWindow, rep2.System)
	}
	_, snap, err := st.Load(t.Context(), "team-a", rep.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Settings.Persona != "" {
		t.Errorf("stored persona after the resume %q, want the default", snap.Settings.Persona)
	}
	if _, err := Run(t.Context(), st, Options{Session: Spec{Tenant: "team-a"}, Extensions: LoadOptions{Dir: ws, Layers: layers}, Prompt: "x", Persona: "nobody", Executor: exe,
		Model: Model{New: opts.Model.New, Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "m"}}}); err == nil || !strings.Contains(err.Error(), `persona "nobody": unknown persona`) {
		t.Errorf("unknown persona: %v", err)
	}
}
