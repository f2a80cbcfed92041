package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// heldCreate is a SQLite store whose Create waits for release, then
// stores the session, or fails with fail when it is set.
type heldCreate struct {
	store.Store
	release chan struct{}
	fail    error
	created atomic.Bool
}

func (h *heldCreate) Create(ctx context.Context, tenant string, ns store.NewSession) (store.Session, error) {
	<-h.release
	if h.fail != nil {
		return store.Session{}, h.fail
	}
	s, err := h.Store.Create(ctx, tenant, ns)
	h.created.Store(err == nil)
	return s, err
}

// pendingRun is a run whose first turn writes a file, on a store whose
// session creation is held.
type pendingRun struct {
	st    *heldCreate
	ws    string
	model *testenv.ModelServer
	opts  Options
}

func newPendingRun(t *testing.T, first testenv.Turn) *pendingRun {
	t.Helper()
	sqlite, err := dburl.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sqlite.Close(); err != nil {
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
	model := testenv.StartModelServer(t, first, testenv.Turn{Text: "wrote it"})
	return &pendingRun{
		st: &heldCreate{Store: sqlite, release: make(chan struct{})}, ws: ws, model: model,
		opts: Options{
			Session: Spec{Tenant: ws}, Extensions: LoadOptions{Dir: ws}, Prompt: "write a.txt",
			Model: Model{
				Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
				New: func(s transcript.Settings) (agent.Model, error) {
					return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
				},
			},
			Executor: exe,
		},
	}
}

var writeA = testenv.ToolCall{ID: "w", Name: "write_file", Arguments: `{"path": "a.txt", "content": "x"}`}

// TestNewSessionStoredAlongside: the first model request of a new session
// does not wait for the session to be stored, but its tool call does, and
// every entry of the run is journaled after it, in order.
func TestNewSessionStoredAlongside(t *testing.T) {
	t.Parallel()
	var requestedBeforeCreate atomic.Bool
	var r *pendingRun
	r = newPendingRun(t, testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
		requestedBeforeCreate.Store(!r.st.created.Load())
		return testenv.Turn{ToolCalls: []testenv.ToolCall{writeA}}
	}})
	// Once the loop is about to call the tool, the session is released a
	// moment later: a tool that did not wait would have written by then.
	wroteEarly := make(chan bool, 1)
	r.opts.Observe = func(e events.Event) {
		if e.Type == events.ToolCall {
			go func() {
				time.Sleep(50 * time.Millisecond)
				_, err := os.Stat(filepath.Join(r.ws, "a.txt"))
				wroteEarly <- err == nil
				close(r.st.release)
			}()
		}
	}
	rep, err := Run(t.Context(), r.st, r.opts)
	if err != nil {
		t.Fatal(err)
	}
	if !requestedBeforeCreate.Load() {
		t.Error("the first model request waited for the session to be stored")
	}
	if <-wroteEarly {
		t.Error("the tool ran before the session was stored")
	}
	if rep.Result.Outcome != transcript.OutcomeCompleted || rep.Result.Answer != "wrote it" {
		t.Fatalf("outcome %s (%s), answer %q", rep.Result.Outcome, rep.Result.Reason, rep.Result.Answer)
	}
	if b, err := os.ReadFile(filepath.Join(r.ws, "a.txt")); err != nil || string(b) != "x" {
		t.Errorf("a.txt: %q, %v", b, err)
	}
	stored, err := r.st.Session(t.Context(), r.ws, rep.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.State != store.StateCompleted || stored.Kind != store.SessionHeadless || rep.Session.CreatedAt.IsZero() {
		t.Errorf("stored session %+v; report's %+v", stored, rep.Session)
	}
	entries, err := r.st.Entries(t.Context(), r.ws, rep.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, e := range entries {
		if e.Seq != int64(i+1) {
			t.Errorf("entry %d has sequence number %d", i, e.Seq)
		}
		kinds = append(kinds, string(e.Kind()))
	}
	if len(entries) != int(rep.Journal.Entries) || kinds[0] != string(transcript.KindLayers) {
		t.Errorf("stored %v; the journal reports %d entries", kinds, rep.Journal.Entries)
	}
}

// TestNewSessionNotStored: a session the store refuses ends the run as one
// that did not start — the error, no tool run, no hook run — even when the
// refusal comes after the first model request.
func TestNewSessionNotStored(t *testing.T) {
	t.Parallel()
	var r *pendingRun
	r = newPendingRun(t, testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
		close(r.st.release)
		return testenv.Turn{ToolCalls: []testenv.ToolCall{writeA}}
	}})
	r.st.fail = errors.New("disk full")
	rep, err := Run(t.Context(), r.st, r.opts)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Run: %v, want the store's refusal", err)
	}
	if rep.Session.ID != uuid.Nil {
		t.Errorf("a report for a session that was not stored: %+v", rep.Session)
	}
	if _, err := os.Stat(filepath.Join(r.ws, "a.txt")); err == nil {
		t.Error("the tool ran for a session that was not stored")
	}

	// Hooks that run before the first request wait for the session too.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "hooks", "start.yaml"), []byte("hooks:\n  SessionStart:\n    - hooks: [{type: command, command: touch started}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r2 := newPendingRun(t, testenv.Turn{ToolCalls: []testenv.ToolCall{writeA}})
	r2.st.fail = errors.New("disk full")
	// Refused a moment after the run starts: a hook that did not wait
	// would have run by then.
	time.AfterFunc(100*time.Millisecond, func() { close(r2.st.release) })
	r2.opts.Extensions.Layers = []layer.Layer{{Name: "home", Dir: home, Kind: layer.KindHome}}
	if _, err := Run(t.Context(), r2.st, r2.opts); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Run with a SessionStart hook: %v, want the store's refusal", err)
	}
	if _, err := os.Stat(filepath.Join(r2.ws, "started")); err == nil {
		t.Error("a SessionStart hook ran for a session that was not stored")
	}
	if n := len(r2.model.Requests()); n != 0 {
		t.Errorf("%d model requests after the session was refused before the hooks", n)
	}
}

// TestNewSessionRefusedTransiently: a session whose creation failed with
// an error the store calls transient (a locked database, a lost
// connection) ends the run at once with that error: the creation is not
// made again, so the journal, whose writes wait for it, must not retry
// them for its window (an hour here).
func TestNewSessionRefusedTransiently(t *testing.T) {
	t.Parallel()
	var r *pendingRun
	r = newPendingRun(t, testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
		// Refused once the run has entries for the journal to write.
		close(r.st.release)
		return testenv.Turn{ToolCalls: []testenv.ToolCall{writeA}}
	}})
	r.st.fail = fmt.Errorf("database is locked: %w", store.ErrTransient)
	r.opts.Journal = journal.Options{RetryFor: time.Hour}
	done := make(chan error, 1)
	go func() {
		_, err := Run(t.Context(), r.st, r.opts)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrTransient) || !strings.Contains(err.Error(), "database is locked") {
			t.Fatalf("Run: %v, want the store's refusal", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run still going a minute after the session was refused: the journal retries a creation that is not made again")
	}
}

// TestNewSessionCancelledWhileStored: a run cancelled (SIGTERM) while its
// session is still being stored ends cancelled, not failed: the session is
// stored, with its entries and its final state.
func TestNewSessionCancelledWhileStored(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	var r *pendingRun
	r = newPendingRun(t, testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
		cancel(&SignalError{Signal: syscall.SIGTERM})
		time.AfterFunc(20*time.Millisecond, func() { close(r.st.release) })
		return testenv.Turn{ToolCalls: []testenv.ToolCall{writeA}}
	}})
	rep, err := Run(ctx, r.st, r.opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result.Outcome != transcript.OutcomeCancelled || rep.ExitCode != runconfig.ExitTerminated {
		t.Errorf("outcome %s, exit %d; want cancelled and %d", rep.Result.Outcome, rep.ExitCode, runconfig.ExitTerminated)
	}
	if _, err := os.Stat(filepath.Join(r.ws, "a.txt")); err == nil {
		t.Error("the tool ran after the cancel")
	}
	stored, err := r.st.Session(t.Context(), r.ws, rep.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := r.st.Entries(t.Context(), r.ws, rep.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.State != store.StateCancelled || len(entries) == 0 || int64(len(entries)) != rep.Journal.Entries {
		t.Errorf("stored state %s with %d entries, %d journaled; want cancelled with all of them", stored.State, len(entries), rep.Journal.Entries)
	}
}
