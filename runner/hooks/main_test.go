package hooks

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/executortest"
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
	l := executortest.NewLocal(t, dir, executor.Options{Reaper: testReaper, Grace: 300 * time.Millisecond, OutputDelay: 100 * time.Millisecond})
	return &workspace{dir: dir, exec: l}
}

// newLayer returns a layer of kind k in a fresh directory holding files.
func newLayer(t testing.TB, name string, k layer.Kind, files map[string]string) layer.Layer {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, files)
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

func chmod(p string, m os.FileMode) error { return os.Chmod(p, m) }
func symlink(old, new string) error       { return os.Symlink(old, new) }

type yamlNode = yaml.Node

func parseNode(t testing.TB, n *yaml.Node, s string) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(s), n); err != nil {
		t.Fatal(err)
	}
}
