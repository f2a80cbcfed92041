package extensions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/executortest"
	"github.com/aerie-run/aerie/runner/layer"
)

// TestLoadToolOnExecutor loads manifests naming executors: one the session
// has runs there and says so in the report; the default's name is the
// default; an unknown one is skipped, naming the file and the fix.
func TestLoadToolOnExecutor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"on_tools.toml":   "name = \"on_tools\"\ndescription = \"d\"\ncommand = [\"/bin/true\"]\nexecutor = \"tools\"\n",
		"on_default.toml": "name = \"on_default\"\ndescription = \"d\"\ncommand = [\"/bin/true\"]\nexecutor = \"workspace\"\n",
		"on_gpu.toml":     "name = \"on_gpu\"\ndescription = \"d\"\ncommand = [\"/bin/true\"]\nexecutor = \"gpu\"\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, ToolsDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ToolsDir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	def := executortest.NewLocal(t, t.TempDir(), executor.Options{})
	other := executortest.NewLocal(t, t.TempDir(), executor.Options{})
	src := layer.Source{Layers: []layer.Layer{{Name: "home", Dir: dir, Kind: layer.KindHome}}, Workspace: t.TempDir()}
	loaded, arts, err := LoadTools(src, ToolOptions{
		Commands: def, Executors: []NamedCommands{{Name: "tools", Commands: other}},
	})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Tool{}
	for _, tl := range loaded {
		byName[tl.Name()] = tl
	}
	if tl := byName["on_tools"]; tl == nil || tl.cmds != other || tl.ExecutorOf(nil) != "tools" {
		t.Errorf("on_tools does not run on tools: %+v", tl)
	}
	if tl := byName["on_default"]; tl == nil || tl.cmds != def || tl.ExecutorOf(nil) != "" {
		t.Errorf("on_default does not run on the default: %+v", tl)
	}
	m := byPath(arts)
	gpu := filepath.Join(dir, ToolsDir, "on_gpu.toml")
	if a := m[gpu]; a.Status != layer.StatusSkipped ||
		!strings.Contains(a.Reason, `executor: "gpu" is not an executor of the session (workspace, tools): name one of them, or leave executor out`) {
		t.Errorf("on_gpu: %s %q", a.Status, a.Reason)
	}
	if a := m[filepath.Join(dir, ToolsDir, "on_tools.toml")]; a.Executor != "tools" {
		t.Errorf("the report's on_tools runs on %q", a.Executor)
	}
}
