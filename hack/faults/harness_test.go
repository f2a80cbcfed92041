package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// steps is the length of every session's task: one shell command a step.
const steps = 8

// bgStep is the step whose command leaves a background process behind, one
// the runner must end with the call (or, after a crash, with the session).
const bgStep = 3

// env is an aerie home, its session database and a fake model server that
// the sessions of a test share.
type env struct {
	t     *testing.T
	home  string
	dbURL string // the session database's URL
	model *testenv.ModelServer
	// extraEnv is added to the environment of every aerie process.
	extraEnv []string
}

// newEnv returns an env whose database is dbURL; "" is SQLite in the home.
func newEnv(t *testing.T, dbURL string) *env {
	t.Helper()
	e := &env{t: t, home: t.TempDir(), dbURL: dbURL, model: testenv.StartModelServer(t)}
	if dbURL == "" {
		e.dbURL = store.SQLiteURL(filepath.Join(e.home, "sessions.db"))
	}
	e.writeConfig(t)
	return e
}

// writeConfig writes the home's global config, naming the database.
func (e *env) writeConfig(t *testing.T) {
	t.Helper()
	cfg := fmt.Sprintf("database_url = %q\n", e.dbURL)
	if err := os.WriteFile(config.GlobalFile(e.home), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// violation records a broken invariant: counted, and failing the test.
func violation(t *testing.T, format string, args ...any) {
	t.Helper()
	counts.violations.Add(1)
	t.Errorf("violation: "+format, args...)
}

// sess is one session of an env, with what the suite has seen of it.
type sess struct {
	e      *env
	t      *testing.T
	ws     string // its workspace, the current directory of its runs
	label  string
	prompt string
	// seen is every entry read back after a fault, by sequence number,
	// as JSON: each must be there, byte-identical, at the end.
	seen map[int64]string
	// model answers the session's requests; stepModel unless set.
	model func(testenv.ModelRequest) testenv.Turn
}

// session returns a new session of e, scripted with the step model.
func (e *env) session(t *testing.T, label string) *sess {
	t.Helper()
	s := &sess{e: e, t: t, ws: t.TempDir(), label: label, seen: map[int64]string{}}
	s.prompt = "session " + label + ": work through the steps"
	s.model = s.stepModel
	turns := make([]testenv.Turn, 400)
	for i := range turns {
		turns[i] = testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn { return s.model(req) }}
	}
	e.model.Conversation(s.prompt, turns...)
	counts.sessions.Add(1)
	return s
}

// scripted returns a new session of e whose model answers with turns.
func (e *env) scripted(t *testing.T, label string, turns ...testenv.Turn) *sess {
	t.Helper()
	s := &sess{e: e, t: t, ws: t.TempDir(), label: label, seen: map[int64]string{}}
	s.prompt = "session " + label + ": answer"
	e.model.Conversation(s.prompt, turns...)
	counts.sessions.Add(1)
	return s
}

// request is what the suite reads of a Messages API request.
type request struct {
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		} `json:"content"`
	} `json:"messages"`
}

// stepModel works through the steps, one shell command each, deciding
// from the conversation it is sent as a real model would: after the last
// step it sees itself call comes the next, unless that call's result says
// it was not run, when it calls the step again. A call whose record was
// lost in a crash is therefore made again, and its command runs again,
// which the side-effect check catches.
func (s *sess) stepModel(req testenv.ModelRequest) testenv.Turn {
	next, err := testenv.NextStep(req)
	if err != nil {
		s.t.Errorf("decode the request: %v", err)
	}
	if next > steps {
		return testenv.Turn{Text: "all steps done", Delay: 20 * time.Millisecond}
	}
	// The command appends its line first, the side effect counted outside
	// the runner, then records its shell's pid, then works a while.
	cmd := fmt.Sprintf("echo step%d >> steps.log; echo $$ >> pids.log; sleep 0.2", next)
	if next == bgStep {
		cmd = fmt.Sprintf("echo step%d >> steps.log; echo $$ >> pids.log; sleep 30 >/dev/null 2>&1 & echo $! >> pids.log; sleep 0.2", next)
	}
	args, _ := json.Marshal(map[string]any{"command": cmd})
	return testenv.Turn{
		ToolCalls: []testenv.ToolCall{{ID: fmt.Sprintf("step%d-%d", next, req.Turn), Name: "bash", Arguments: string(args)}},
		Usage:     testenv.TokenUsage{InputTokens: 100, OutputTokens: 10},
		Delay:     50 * time.Millisecond,
	}
}

// command returns the aerie process that starts or resumes the session.
func (s *sess) command(ctx context.Context) *exec.Cmd {
	args := []string{"run", "--provider", "anthropic", "--model", "claude-sonnet-4-5", "--base-url", s.e.model.URL()}
	if s.stored() {
		args = append(args, "--resume", s.label)
	} else {
		args = append(args, "--label", s.label, s.prompt)
	}
	cmd := exec.CommandContext(ctx, aerieBin, args...)
	cmd.Dir = s.ws
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.e.home,
		"AERIE_HOME=" + s.e.home,
		"ANTHROPIC_API_KEY=sk-ant-faults-secret",
	}, s.e.extraEnv...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// outcome is how one aerie process ended.
type outcome struct {
	code   int // exit code; -1 when killed by a signal
	stderr string
	took   time.Duration
	maxRSS int64 // the process's peak resident memory, bytes
}

// run runs aerie for the session to its end, within limit.
func (s *sess) run(limit time.Duration) outcome {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), limit)
	defer cancel()
	cmd := s.command(ctx)
	rss := filepath.Join(s.t.TempDir(), "peakrss")
	cmd.Path, cmd.Args = peakrssBin, append([]string{peakrssBin, rss}, cmd.Args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	out := outcome{stderr: stderr.String(), took: time.Since(start)}
	if b, err := os.ReadFile(rss); err == nil {
		kib, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		out.maxRSS = kib << 10
	}
	if ctx.Err() != nil {
		violation(s.t, "session %s: aerie still running after %v; stderr:\n%s", s.label, limit, tail(out.stderr))
	}
	return withCode(out, err, s.t)
}

func withCode(out outcome, err error, t *testing.T) outcome {
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		out.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run aerie: %v", err)
	}
	return out
}

// tail is the end of a long output, for messages.
func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// requests counts the model requests of the session so far.
func (s *sess) requests() int {
	n := 0
	for _, r := range s.e.model.Requests() {
		if bytes.Contains(r.Body, []byte(s.prompt)) {
			n++
		}
	}
	return n
}

// killed runs aerie for the session and kills it with SIGKILL delay after
// its first model request; it reports whether the run ended by itself
// first, with exit code 0.
func (s *sess) killed(delay time.Duration) (completed bool) {
	s.t.Helper()
	asked := s.requests()
	cmd := s.command(s.t.Context())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for start := time.Now(); s.requests() == asked && time.Since(start) < 30*time.Second; {
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case err := <-exited:
		out := withCode(outcome{stderr: stderr.String()}, err, s.t)
		if out.code != 0 {
			s.t.Fatalf("session %s: aerie exited %d before it was killed; stderr:\n%s", s.label, out.code, tail(out.stderr))
		}
		return true
	case <-time.After(delay):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if err := <-exited; err == nil {
			return true // it ended just before the kill
		}
		counts.faults.Add(1)
		return false
	}
}

// stored reports whether the session exists in the database: a run killed
// before it stored its new session left nothing to resume.
func (s *sess) stored() bool {
	st := s.open()
	defer st.Close()
	_, err := st.Resolve(s.t.Context(), s.ws, s.label)
	return err == nil
}

func (s *sess) open() *store.DB {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	st, err := dburl.Open(ctx, s.e.dbURL)
	if err != nil {
		s.t.Fatalf("open the session database: %v", err)
	}
	return st
}

// entries returns the session's stored entries.
func (s *sess) entries() []transcript.Entry {
	s.t.Helper()
	st := s.open()
	defer st.Close()
	ctx := s.t.Context()
	sn, err := st.Resolve(ctx, s.ws, s.label)
	if err != nil {
		s.t.Fatalf("session %s: %v", s.label, err)
	}
	es, err := st.Entries(ctx, s.ws, sn.ID)
	if err != nil {
		s.t.Fatalf("session %s: entries: %v", s.label, err)
	}
	return es
}
