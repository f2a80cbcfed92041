package headless

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aerie-run/aerie/runner/extensions"
)

// BenchmarkLoadExtensions measures the shared loader, which a reload runs
// whole at the turn boundary after extension_manage changed something: a
// workspace with a project layer, and a user layer of 50 tools, 50 skills,
// a hooks file and prompts.
func BenchmarkLoadExtensions(b *testing.B) {
	ws, home := b.TempDir(), b.TempDir()
	files := map[string]string{
		filepath.Join(ws, ".aerie/APPEND_SYSTEM.md"): "Project append.\n",
		filepath.Join(ws, "AGENTS.md"):               "Run the tests.\n",
		filepath.Join(home, "SYSTEM.md"):             "Persona.\n",
		filepath.Join(home, "hooks.toml"):            "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"true\"\n",
	}
	for i := range 50 {
		files[filepath.Join(home, fmt.Sprintf("tools/t%d.toml", i))] = fmt.Sprintf("name = \"t%d\"\ndescription = \"T.\"\ncommand = [\"/bin/true\"]\n", i)
		files[filepath.Join(home, fmt.Sprintf("skills/s%d/SKILL.md", i))] = fmt.Sprintf("---\nname: s%d\ndescription: S.\n---\nx\n", i)
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	layers, err := extensions.Discover(extensions.DiscoverOptions{WorkDir: ws, Home: home})
	if err != nil {
		b.Fatal(err)
	}
	o := LoadOptions{Layers: layers, Dir: ws, Persona: "p"}
	for b.Loop() {
		x, err := LoadExtensions(o)
		if err != nil || x.Err() != nil || len(x.Set.Tools) != 50 || x.Skills.Len() != 50 {
			b.Fatalf("%v %v", err, x.Err())
		}
		_ = x.Report()
	}
}
