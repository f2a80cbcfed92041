package layer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

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
func project(ws, rel string) Layer {
	return Layer{Name: rel, Dir: filepath.Join(ws, filepath.FromSlash(rel)), Kind: KindProject}
}

// home returns the home layer at dir.
func home(dir string) Layer { return Layer{Name: "home", Dir: dir, Kind: KindHome} }

// manifest returns a minimal valid manifest for name running program.
func manifest(name, program string) string {
	return fmt.Sprintf("name = %q\ndescription = \"The %s tool.\"\ncommand = [%q]\n", name, name, program)
}

// mustPin computes the current pin of a project manifest and its program.
func mustPin(t testing.TB, ws string, l Layer, manifest, program string) Pin {
	t.Helper()
	p, err := ComputePin(ws, l, manifest, []string{program})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
