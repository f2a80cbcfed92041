package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestRunProjectPluginNoPin runs a session with a native plugin in the
// project layer: the repository wrote it, and a plugin has no trust pin,
// so its hook and its stdio MCP server do not run, and the report says
// why and where to install the plugin instead.
func TestRunProjectPluginNoPin(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("ok"))
	dir := filepath.Join(e.ws, ".aerie", "plugins", "review")
	testenv.WriteFile(t, filepath.Join(dir, ".aerie-plugin/plugin.yaml"), `name: review
hooks:
  SessionStart:
    - hooks:
        - type: command
          script: ./hooks/mark
mcp_servers:
  - id: lint
    type: stdio
    command: ${AERIE_PLUGIN_ROOT}/server
    required: true
`, 0o644)
	testenv.WriteFile(t, filepath.Join(dir, "hooks/mark"), "#!/bin/sh\ntouch \"$AERIE_PLUGIN_ROOT/hook-ran\"\n", 0o755)
	testenv.WriteFile(t, filepath.Join(dir, "server"), "#!/bin/sh\ntouch \"$AERIE_PLUGIN_ROOT/server-ran\"\n", 0o755)

	out := e.run("run", "review")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	for _, marker := range []string{"hook-ran", "server-ran"} {
		if _, err := os.Stat(filepath.Join(dir, marker)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the project plugin's %s exists: %v", marker, err)
		}
	}

	got := e.pluginComponents()
	for name, want := range map[string]string{
		"review hooks":    "skipped: a project layer's plugin hooks do not run: the repository wrote them; install the plugin into $AERIE_HOME",
		"review mcp lint": "skipped: a project layer's plugin stdio MCP servers do not run: the repository wrote them; install the plugin into $AERIE_HOME",
	} {
		if !strings.HasPrefix(got[name], want) {
			t.Errorf("%s: %q, want %q…\nall: %v", name, got[name], want, got)
		}
	}
}
