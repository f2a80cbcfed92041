package extensions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
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
	l, err := executor.NewLocal(workspace, executor.Options{Reaper: testReaper, Grace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("close executor: %v", err)
		}
	})
	return l
}

// tree writes files under dir: path → content. A content starting with
// "#!" is made executable; "->target" makes a symbolic link; "<dir>" makes
// a directory; "<fifo>" a named pipe.
func tree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(content, "->"):
			err = os.Symlink(strings.TrimPrefix(content, "->"), p)
		case content == "<dir>":
			err = os.MkdirAll(p, 0o755)
		case content == "<fifo>":
			err = syscall.Mkfifo(p, 0o644)
		case strings.HasPrefix(content, "#!"):
			err = os.WriteFile(p, []byte(content), 0o755)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
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
