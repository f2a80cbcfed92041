package session

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// BenchmarkLoadExtensions measures what a session does with its layers
// before the first model request, through the calls a run makes: layer
// discovery, then newEquipment — trust pins, custom tools (trust hashing
// included), prompt composition, tool descriptions, toolsets, hooks,
// plugins, skills and their catalog, MCP declarations.
//
// The tree is the one the performance target names: 20 layers (the .aerie
// and .osprey directories of nine nested directories, $AERIE_HOME and the
// bundled layer) holding 500 skills, 100 custom tools and 50 hook files,
// with a SYSTEM.md and an APPEND_SYSTEM.md in every layer and an AGENTS.md
// in every directory. Every project tool and hook file is pinned, so the
// trust of each is computed.
//
//	go test -run '^$' -bench LoadExtensions -benchtime 20x -count 5 ./runner/session/
func BenchmarkLoadExtensions(b *testing.B) {
	tr := benchTree(b)
	exe, err := executor.NewLocal(tr.workDir, executor.Options{Reaper: reaper})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := exe.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	builtin := tools.Builtin(exe, exe, tools.NewBackground(exe))
	opts := Options{
		Extensions: LoadOptions{Dir: tr.workDir, Workspace: tr.workspace, System: "persona"}, Prompt: "hello",
		Executor: exe, Logger: slog.New(slog.DiscardHandler),
	}
	b.ReportAllocs()
	report := testenv.ReportCPU(b)
	for b.Loop() {
		layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: tr.workDir, Workspace: tr.workspace, Home: tr.home})
		if err != nil {
			b.Fatal(err)
		}
		opts.Extensions.Layers = layers
		k, err := newEquipment(opts, builtin)
		if err != nil {
			b.Fatal(err)
		}
		if len(layers) != 20 || len(k.ext.Set.Tools) != 100 || k.ext.Skills.Len() != 500 || len(k.ext.Hooks.Files) != 50 || len(k.ext.Hooks.Problems) != 0 {
			b.Fatalf("%d layers, %d tools, %d skills, %d hook files, hook problems %v", len(layers), len(k.ext.Set.Tools), k.ext.Skills.Len(), len(k.ext.Hooks.Files), k.ext.Hooks.Problems)
		}
	}
	report()
}

type benchLayout struct {
	workspace, workDir, home string
}

// benchTree writes the tree BenchmarkLoadExtensions loads and the pins
// of its project tools and hook files.
func benchTree(b *testing.B) benchLayout {
	b.Helper()
	dir := b.TempDir()
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	files := map[string]string{}
	agents := strings.Repeat("Keep functions short and tested.\n", 64)
	body := strings.Repeat("Follow these steps carefully. ", 140)
	skill := func(l string, n int) {
		name := fmt.Sprintf("skill-%s-%d", strings.NewReplacer("/", "-", ".", "").Replace(l), n)
		desc := "Use when " + strings.Repeat("working on things of kind "+name+", ", 5)
		files[filepath.Join(l, "skills", name, "SKILL.md")] = "---\nname: " + name + "\ndescription: " + desc + "\nlicense: MIT\n---\n" + body
		files[filepath.Join(l, "skills", name, "references", "guide.md")] = "guide"
	}
	guard := "#!/bin/sh\nexit 0\n"
	var pinned []string // manifests (tools and hook files) to pin, with their scripts
	level := ""
	for i := range 9 {
		if i > 0 {
			level = filepath.Join(level, fmt.Sprintf("d%d", i))
		}
		files[filepath.Join("ws", level, "AGENTS.md")] = agents
		for _, name := range layer.ProjectDirs() {
			l := filepath.Join("ws", level, name)
			files[filepath.Join(l, "SYSTEM.md")] = "system " + l
			files[filepath.Join(l, "APPEND_SYSTEM.md")] = "append " + l
			if name == ".aerie" {
				files[filepath.Join(l, "toolsets.toml")] = "[toolsets.ro]\ntools = [\"read_file\"]\n"
				files[filepath.Join(l, "tool-descriptions.toml")] = "bash = \"Run it.\"\n"
			}
			// 5 tools, 25 skills and 2 YAML hook files per layer, and a
			// hooks.toml in the .aerie of the four nearest levels.
			for j := range 5 {
				tool := fmt.Sprintf("t%d_%s_%d", i, strings.TrimPrefix(name, "."), j)
				files[filepath.Join(l, "tools", tool+".toml")] = fmt.Sprintf("name = %q\ndescription = \"Echo.\"\ncommand = [\"./%s.sh\"]\n[parameters.text]\ntype = \"string\"\n", tool, tool)
				files[filepath.Join(l, "tools", tool+".sh")] = "#!/bin/sh\ncat\n"
				pinned = append(pinned, filepath.Join(l, "tools", tool+".toml"))
			}
			for j := range 25 {
				skill(l, j)
			}
			files[filepath.Join(l, "hooks", "guard.sh")] = guard
			for j := range 2 {
				hf := filepath.Join(l, "hooks", fmt.Sprintf("h%d.yaml", j))
				files[hf] = "hooks:\n  PreToolUse:\n    - matcher: Bash|Write\n      hooks:\n        - type: command\n          script: guard.sh\n          args: [--strict]\n          on_failure: block\n  PostToolUse:\n    - matcher: mcp__.*\n      hooks:\n        - type: command\n          command: logger -t aerie\n"
				pinned = append(pinned, hf)
			}
			if i >= 5 && name == ".aerie" {
				files[filepath.Join(l, "hooks.toml")] = "[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\ncommand = \"guard --strict\"\n"
				pinned = append(pinned, filepath.Join(l, "hooks.toml"))
			}
		}
	}
	// $AERIE_HOME: 10 tools, 50 skills, a hooks.toml and 9 YAML files,
	// for 100 tools, 500 skills and 50 hook files in all.
	for j := range 10 {
		files[filepath.Join("home", "tools", fmt.Sprintf("h%d.toml", j))] = fmt.Sprintf("name = \"h%d\"\ndescription = \"Cat.\"\ncommand = [\"/bin/cat\"]\n", j)
	}
	for j := range 50 {
		skill("home", j)
	}
	files["home/APPEND_SYSTEM.md"] = "home append"
	files["home/hooks.toml"] = "[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\ncommand = \"guard --strict\"\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"make test\"\n"
	for j := range 9 {
		files[filepath.Join("home", "hooks", fmt.Sprintf("h%d.yaml", j))] = "hooks:\n  SessionStart:\n    - hooks:\n        - type: command\n          command: echo hi\n"
	}
	testenv.WriteTree(b, dir, files)
	workDir := filepath.Join(ws, level)
	var pins strings.Builder
	for _, m := range pinned {
		man := filepath.Join(dir, m)
		var exes []string
		switch {
		case strings.HasSuffix(m, ".yaml"):
			exes = []string{filepath.Join(filepath.Dir(man), "guard.sh")}
		case strings.Contains(m, "/tools/"):
			exes = []string{strings.TrimSuffix(man, ".toml") + ".sh"}
		}
		p, err := layer.ComputePin(ws, layer.Layer{Kind: layer.KindProject}, man, exes)
		if err != nil {
			b.Fatal(err)
		}
		pins.WriteString(p.TOML())
	}
	if err := os.WriteFile(filepath.Join(home, layer.TrustFile), []byte(pins.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return benchLayout{workspace: ws, workDir: workDir, home: home}
}

// BenchmarkReload measures the shared loader, which a reload runs
// whole at the turn boundary after extension_manage changed something: a
// workspace with a project layer, and a user layer of 50 tools, 50 skills,
// a hooks file and prompts.
func BenchmarkReload(b *testing.B) {
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
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: ws, Home: home})
	if err != nil {
		b.Fatal(err)
	}
	o := LoadOptions{Layers: layers, Dir: ws, System: "p"}
	for b.Loop() {
		x, err := LoadExtensions(o)
		if err != nil || x.Err() != nil || len(x.Set.Tools) != 50 || x.Skills.Len() != 50 {
			b.Fatalf("%v %v", err, x.Err())
		}
		_ = x.Report()
	}
}
