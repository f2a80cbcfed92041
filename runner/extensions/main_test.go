package extensions

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/executortest"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/process"
)

// testReaper makes this test binary a child subreaper, as the executor
// is, so that a process a torn-down tool left behind comes back here and
// is reaped: a process checked for in /proc is then really gone.
var testReaper *process.Reaper

func TestMain(m *testing.M) {
	testenv.RunSubreaped(m, &testReaper)
}

// newExecutor returns a Local executor on workspace, closed at the end of
// the test.
func newExecutor(t testing.TB, workspace string) *executor.Local {
	t.Helper()
	return executortest.NewLocal(t, workspace, executor.Options{Reaper: testReaper, Grace: 500 * time.Millisecond})
}

// project returns a Layer for the project directory rel (".aerie") of ws.
func project(ws, rel string) layer.Layer {
	return layer.Layer{Name: rel, Dir: filepath.Join(ws, filepath.FromSlash(rel)), Kind: layer.KindProject}
}

// home returns the home layer at dir.
func home(dir string) layer.Layer { return layer.Layer{Name: "home", Dir: dir, Kind: layer.KindHome} }

// manifest returns a minimal valid manifest for name running program.
func manifest(name, program string) string {
	return fmt.Sprintf("name = %q\ndescription = \"The %s tool.\"\ncommand = [%q]\n", name, name, program)
}

// byPath indexes artifacts by path, for tests that look one up.
func byPath(arts []layer.Artifact) map[string]layer.Artifact {
	m := make(map[string]layer.Artifact, len(arts))
	for _, a := range arts {
		m[a.Path] = a
	}
	return m
}

// mustPin computes the current pin of a project manifest and its program.
func mustPin(t testing.TB, ws string, l layer.Layer, manifest, program string) layer.Pin {
	t.Helper()
	p, err := layer.ComputePin(ws, l, manifest, []string{program})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
