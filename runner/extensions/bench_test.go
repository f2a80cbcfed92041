package extensions

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
)

// benchTree writes 20 layers — 18 project layers (.aerie and .osprey at
// nine levels), $AERIE_HOME and the bundled layer — holding 100 custom
// tools (5 per project layer, all pinned, and 10 in home), a SYSTEM.md
// and an APPEND_SYSTEM.md in every layer, a toolsets.toml and a
// tool-descriptions.toml in every other layer, and an AGENTS.md of 2 KiB
// in every directory. It returns the discovery options of a session in the
// deepest directory.
func benchTree(b *testing.B) layer.DiscoverOptions {
	b.Helper()
	dir := b.TempDir()
	ws, h := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	files := map[string]string{}
	var pins strings.Builder
	level := ""
	agents := strings.Repeat("Keep functions short and tested.\n", 64)
	for i := range 9 {
		if i > 0 {
			level = filepath.Join(level, fmt.Sprintf("d%d", i))
		}
		files[filepath.Join("ws", level, "AGENTS.md")] = agents
		for _, name := range layer.ProjectDirs() {
			dir := filepath.Join(level, name)
			files[filepath.Join("ws", dir, "SYSTEM.md")] = "system " + dir
			files[filepath.Join("ws", dir, "APPEND_SYSTEM.md")] = "append " + dir
			if name == ".aerie" {
				files[filepath.Join("ws", dir, "toolsets.toml")] = "[toolsets.ro]\ntools = [\"read_file\"]\n"
				files[filepath.Join("ws", dir, "tool-descriptions.toml")] = "bash = \"Run it.\"\n"
			}
			for j := range 5 {
				tool := fmt.Sprintf("t%d_%s_%d", i, strings.TrimPrefix(name, "."), j)
				files[filepath.Join("ws", dir, "tools", tool+".toml")] = manifest(tool, "./"+tool+".sh") + "[parameters.text]\ntype = \"string\"\n"
				files[filepath.Join("ws", dir, "tools", tool+".sh")] = "#!/bin/sh\ncat\n"
			}
		}
	}
	for j := range 10 {
		files[filepath.Join("home", "tools", fmt.Sprintf("h%d.toml", j))] = manifest(fmt.Sprintf("h%d", j), "/bin/cat")
	}
	files["home/APPEND_SYSTEM.md"] = "home append"
	testenv.WriteTree(b, dir, files)
	for name := range files {
		if strings.HasPrefix(name, "ws/") && strings.HasSuffix(name, ".toml") && strings.Contains(name, "/tools/") {
			man := filepath.Join(dir, name)
			p, err := layer.ComputePin(ws, layer.Layer{Kind: layer.KindProject}, man, []string{strings.TrimSuffix(man, ".toml") + ".sh"})
			if err != nil {
				b.Fatal(err)
			}
			pins.WriteString(p.TOML())
		}
	}
	testenv.WriteTree(b, h, map[string]string{"trust.toml": pins.String()})
	return layer.DiscoverOptions{WorkDir: filepath.Join(ws, level), Workspace: ws, Home: h}
}

// BenchmarkLoad measures what a session does at start: discovery and
// loading every artifact of this package (trust hashing included) from 20
// layers holding 100 tools.
func BenchmarkLoad(b *testing.B) {
	opts := benchTree(b)
	b.ResetTimer()
	for b.Loop() {
		layers, err := layer.Discover(opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(layers) != 20 {
			b.Fatalf("%d layers", len(layers))
		}
		set, err := Load(layer.Source{Layers: layers, Workspace: opts.Workspace, WorkDir: opts.WorkDir}, Options{Persona: "persona"})
		if err != nil {
			b.Fatal(err)
		}
		if len(set.Tools) != 100 {
			b.Fatalf("%d tools", len(set.Tools))
		}
	}
}

// BenchmarkComposePrompt measures prompt composition alone over the same
// layers.
func BenchmarkComposePrompt(b *testing.B) {
	opts := benchTree(b)
	layers, err := layer.Discover(opts)
	if err != nil {
		b.Fatal(err)
	}
	src := layer.Source{Layers: layers, Workspace: opts.Workspace, WorkDir: opts.WorkDir}
	b.ResetTimer()
	for b.Loop() {
		p, _, err := ComposePrompt(src, "persona")
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Instructions) != 9 || len(p.Appends) != 19 {
			b.Fatalf("%d instructions, %d appends", len(p.Instructions), len(p.Appends))
		}
	}
}
