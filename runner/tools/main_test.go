package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
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
	l, err := executor.NewLocal(dir, executor.Options{Reaper: testReaper, Grace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("close executor: %v", err)
		}
	})
	return l, dir
}

// writeFiles creates files (path → content) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func args(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// eventually waits up to d for cond.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
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
