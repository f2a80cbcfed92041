package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/executortest"
)

// workspace is a Local executor on a fresh directory, closed at the end
// of the test.
func workspace(t testing.TB) (*executor.Local, string) {
	t.Helper()
	dir := t.TempDir()
	return executortest.NewLocal(t, dir, executor.Options{Reaper: testReaper, Grace: 500 * time.Millisecond}), dir
}

// selfServer declares this test binary as a stdio server in mode.
func selfServer(t testing.TB, id, mode string, mods ...func(*Server)) Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := Server{ID: id, Type: TypeStdio, Command: exe, Env: map[string]string{serverEnv: mode, "DECLARED": "${NOT_EXPANDED}"},
		StartupTimeout: 20 * time.Second, ToolTimeout: 20 * time.Second, File: "/l/mcp_servers/" + id + ".yaml"}
	for _, m := range mods {
		m(&s)
	}
	return s
}

// gone waits a while for pid to be gone, reaped by testReaper: not even a
// zombie is left.
func gone(pid int) bool {
	return testenv.Poll(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
}

// waitGone waits for the executor to have no process group left.
func waitGone(t *testing.T, l *executor.Local) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		infos, err := l.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process groups left: %+v", infos)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStdioServer runs a real MCP server process through the executor:
// started in the working directory in its own process group, with a
// secret-free environment plus its declared variables, and torn down —
// with what it started — when the manager closes.
func TestStdioServer(t *testing.T) {
	t.Parallel()
	l, dir := workspace(t)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/u", "OPENAI_API_KEY=sk-secret", "AERIE_DATABASE_URL=postgres://secret", "UNLISTED=1", "EXTRA_OK=1"}
	m := New([]Server{selfServer(t, "t", "serve")}, Options{Commands: l, Dir: sub, Base: base, Pass: []string{"EXTRA_*"}, ExitWait: 5 * time.Second})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	run := func(tool, args string) string {
		t.Helper()
		r := lookup(t, m, "mcp__t__"+tool).Run(t.Context(), json.RawMessage(args))
		if r.IsError {
			t.Fatalf("%s: %s", tool, r.Content)
		}
		return r.Content
	}
	if got := run("echo", `{"text":"over stdio"}`); got != "over stdio" {
		t.Errorf("echo %q", got)
	}
	if got := run("pwd", `{}`); got != sub {
		t.Errorf("working directory %q, want %q", got, sub)
	}
	for name, want := range map[string]string{
		"OPENAI_API_KEY": "(unset)", "AERIE_DATABASE_URL": "(unset)", "UNLISTED": "(unset)",
		"HOME": "/home/u", "EXTRA_OK": "1", "DECLARED": "${NOT_EXPANDED}", serverEnv: "serve",
	} {
		if got := run("getenv", `{"name":"`+name+`"}`); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	pid, err := strconv.Atoi(run("spawn", `{}`))
	if err != nil || !testenv.Alive(pid) {
		t.Fatalf("spawn: %v", err)
	}
	infos, err := l.List(t.Context())
	if err != nil || len(infos) != 1 || !strings.HasSuffix(infos[0].Argv[0], filepath.Base(os.Args[0])) {
		t.Fatalf("process groups %+v, %v", infos, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, l)
	if !gone(pid) {
		t.Errorf("the server's child %d outlived it", pid)
	}
}

// The server's process group lives no longer than the session's context,
// even without Close.
func TestStdioServerEndsWithSession(t *testing.T) {
	t.Parallel()
	l, dir := workspace(t)
	ctx, cancel := context.WithCancel(t.Context())
	m := New([]Server{selfServer(t, "t", "serve")}, Options{Commands: l, Dir: dir})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(lookup(t, m, "mcp__t__spawn").Run(t.Context(), nil).Content)
	cancel()
	waitGone(t, l)
	if !gone(pid) {
		t.Errorf("the server's child %d outlived the session", pid)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

func TestStdioServerFailures(t *testing.T) {
	t.Parallel()
	l, dir := workspace(t)
	required := func(s *Server) { s.Required = true }
	servers := []Server{
		selfServer(t, "crash", "crash", required),
		selfServer(t, "hang", "hang", required, func(s *Server) { s.StartupTimeout = 500 * time.Millisecond }),
		selfServer(t, "missing", "serve", required, func(s *Server) { s.Command = "no-such-mcp-server" }),
	}
	m := New(servers, Options{Commands: l, Dir: dir, ExitWait: 100 * time.Millisecond})
	err := m.Start(t.Context())
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"required MCP server crash (/l/mcp_servers/crash.yaml): connect: ",
		"the server exited with status 7; its standard error ends: boom: cannot read the configuration",
		"required MCP server hang (/l/mcp_servers/hang.yaml): connect: no answer within the startup timeout of 500ms",
		"required MCP server missing (/l/mcp_servers/missing.yaml): connect: start no-such-mcp-server: ",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	// A server that did not answer is not left running.
	waitGone(t, l)
}

// A server that exits mid-session makes its tools fail until Ensure
// starts it again.
func TestStdioServerRestart(t *testing.T) {
	t.Parallel()
	l, dir := workspace(t)
	m := New([]Server{selfServer(t, "t", "serve", func(s *Server) { s.Required = true })}, Options{Commands: l, Dir: dir})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	if r := lookup(t, m, "mcp__t__exit").Run(t.Context(), nil); !r.IsError {
		t.Errorf("exit: %+v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Status()[0].State != StateFailed {
		if time.Now().After(deadline) {
			t.Fatal("the exit was not noticed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := m.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := lookup(t, m, "mcp__t__echo").Run(t.Context(), json.RawMessage(`{"text":"again"}`)); r.Content != "again" {
		t.Errorf("%+v", r)
	}
	if err := m.Close(); err != nil && !errors.Is(err, executor.ErrNotFound) {
		t.Fatal(err)
	}
	waitGone(t, l)
}
