package session

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// TestProblemsLogged starts a run's extensions from layers holding a file
// of each kind that is skipped or left inactive: the run's log names each
// file with the report's reason, and no secret from a file reaches it.
func TestProblemsLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	const secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL"
	files := map[string]string{
		"ws/.aerie/tools/bad.toml":                       "name = \"bad\"\ncommand = \"not a list " + secret + "\"\n",
		"ws/.aerie/tools/unpinned.toml":                  "name = \"unpinned\"\ndescription = \"x\"\ncommand = [\"./u.sh\"]\n",
		"ws/.aerie/tools/u.sh":                           "#!/bin/sh\n",
		"ws/.aerie/toolsets.toml":                        "[toolsets.a]\ntools = \"x\"\n",
		"ws/.aerie/tool-descriptions.toml":               "bash = 1\n",
		"ws/.aerie/hooks/guard.yaml":                     "hooks:\n  Stop:\n    - hooks:\n        - type: command\n          command: make test\n",
		"ws/.aerie/skills/Bad_Name/SKILL.md":             "---\nname: Bad_Name\ndescription: x\n---\n",
		"ws/.aerie/mcp_servers/broken.yaml":              "id: [\n",
		"ws/.aerie/plugins/p/.claude-plugin/plugin.json": "{",
	}
	testenv.WriteTree(t, dir, files)
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: ws, Workspace: ws, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := exe.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	var log bytes.Buffer
	opts := Options{
		Extensions: LoadOptions{Dir: ws, Workspace: ws, Layers: layers, System: "persona"}, Prompt: "hello",
		Executor: exe, Logger: slog.New(slog.NewTextHandler(&log, nil)),
	}
	if _, err := newEquipment(opts, tools.Builtin(exe, exe, tools.NewBackground(exe))); err != nil {
		t.Fatal(err)
	}
	got := log.String()
	for _, want := range []string{
		`msg="extension skipped" type=tool file=` + filepath.Join(ws, ".aerie/tools/bad.toml"),
		`msg="extension inactive" type=tool file=` + filepath.Join(ws, ".aerie/tools/unpinned.toml") + " trust=untrusted",
		`msg="extension skipped" type=toolsets file=` + filepath.Join(ws, ".aerie/toolsets.toml"),
		`msg="extension skipped" type=tool_descriptions file=` + filepath.Join(ws, ".aerie/tool-descriptions.toml"),
		`msg="hook file inactive" file=` + filepath.Join(ws, ".aerie/hooks/guard.yaml"),
		`msg="skill skipped"`,
		`msg="MCP server declaration skipped"`,
		`msg="plugin skipped" dir=` + filepath.Join(ws, ".aerie/plugins/p"),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %s\n%s", want, got)
		}
	}
	if strings.Contains(got, secret) {
		t.Errorf("the log holds a secret from a file:\n%s", got)
	}
}
