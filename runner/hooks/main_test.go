package hooks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/tools"
)

// testReaper makes this test binary a child subreaper, as the executor
// is, so that the orphans of a torn-down hook come back here and are
// reaped: a process checked for in /proc is then really gone.
var testReaper *process.Reaper

func TestMain(m *testing.M) {
	testenv.RunSubreaped(m, &testReaper)
}

// workspace is a Local executor on a fresh directory.
type workspace struct {
	dir  string
	exec *executor.Local
}

func newWorkspace(t testing.TB) *workspace {
	t.Helper()
	dir := t.TempDir()
	l, err := executor.NewLocal(dir, executor.Options{Reaper: testReaper, Grace: 300 * time.Millisecond, OutputDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("close executor: %v", err)
		}
	})
	return &workspace{dir: dir, exec: l}
}

// writeFiles creates files (slash path → content) under dir; a path
// ending in .sh is made executable.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		perm := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			perm = 0o755
		}
		if err := os.WriteFile(p, []byte(content), perm); err != nil {
			t.Fatal(err)
		}
	}
}

// newLayer returns a layer of kind k in a fresh directory holding files.
func newLayer(t testing.TB, name string, k layer.Kind, files map[string]string) layer.Layer {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return layer.Layer{Name: name, Dir: dir, Kind: k}
}

// engine loads files as a home layer and returns an engine on ws.
func (ws *workspace) engine(t testing.TB, files map[string]string, opts Options) *Engine {
	t.Helper()
	l := newLayer(t, "home", layer.KindHome, files)
	loaded, err := Load([]layer.Layer{l}, nil, LoadOptions{Dir: ws.dir})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Dir == "" {
		opts.Dir = ws.dir
	}
	if opts.SessionID == "" {
		opts.SessionID = "session-1"
	}
	return New(ws.exec, loaded.Hooks, opts)
}

// echoTool is a real tool for the decorator to wrap: it records the
// arguments of each call and returns them.
type echoTool struct {
	name  string
	mu    sync.Mutex
	calls []string
}

func (t *echoTool) Name() string            { return t.name }
func (t *echoTool) Description() string     { return "returns its arguments" }
func (t *echoTool) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (t *echoTool) Run(_ context.Context, call json.RawMessage) tools.Result {
	t.mu.Lock()
	t.calls = append(t.calls, string(call))
	t.mu.Unlock()
	return tools.Result{Content: "ran with " + string(call)}
}

func (t *echoTool) ran() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.calls...)
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

func chmod(p string, m os.FileMode) error { return os.Chmod(p, m) }
func symlink(old, new string) error       { return os.Symlink(old, new) }

type yamlNode = yaml.Node

func parseNode(t testing.TB, n *yaml.Node, s string) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(s), n); err != nil {
		t.Fatal(err)
	}
}
