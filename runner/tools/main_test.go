package tools

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/executortest"
	"github.com/aerie-run/aerie/runner/process"
)

// testReaper makes this test binary a child subreaper, as the executor
// is, so that torn-down orphans come back here and are reaped: a process
// checked for in /proc is then really gone, not a zombie of init's.
var testReaper *process.Reaper

func TestMain(m *testing.M) {
	testenv.RunSubreaped(m, &testReaper)
}

// newWorkspace returns a Local executor on a fresh workspace and the
// workspace's directory.
func newWorkspace(t testing.TB) (*executor.Local, string) {
	t.Helper()
	dir := t.TempDir()
	return executortest.NewLocal(t, dir, executor.Options{Reaper: testReaper, Grace: 500 * time.Millisecond}), dir
}

func args(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// check compares a result with the expected error flag and substrings.
func check(t *testing.T, got Result, wantErr bool, contains ...string) {
	t.Helper()
	if got.IsError != wantErr {
		t.Errorf("IsError = %v, want %v; content:\n%s", got.IsError, wantErr, got.Content)
	}
	for _, s := range contains {
		if !strings.Contains(got.Content, s) {
			t.Errorf("content does not contain %q:\n%s", s, got.Content)
		}
	}
}
