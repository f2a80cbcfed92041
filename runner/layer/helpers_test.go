package layer

import (
	"fmt"
	"path/filepath"
	"testing"
)

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
