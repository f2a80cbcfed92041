package hooks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// TestTrustRecheckedBeforeEachRun: a pinned project hook whose file or
// script changes after the session loaded it is skipped, with the reason
// recorded in the verdict, and runs again once its pinned bytes are back.
func TestTrustRecheckedBeforeEachRun(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	deny := "#!/bin/sh\necho '{\"hookSpecificOutput\":{\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"no\"}}'\n"
	const (
		yamlFile = ".aerie/hooks/guard.yaml"
		script   = ".aerie/hooks/deny.sh"
		tomlFile = ".aerie/hooks.toml"
		program  = ".aerie/context.sh"
	)
	testenv.WriteTree(t, ws.dir, map[string]string{
		yamlFile: "hooks:\n  PreToolUse:\n    - matcher: bash\n      hooks: [{type: command, script: deny.sh}]\n",
		script:   deny,
		tomlFile: "[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\ncommand = \"./.aerie/context.sh\"\n",
		program:  "#!/bin/sh\necho '{\"hookSpecificOutput\":{\"additionalContext\":\"checked\"}}'\n",
	})
	l := layer.Layer{Name: ".aerie", Dir: filepath.Join(ws.dir, ".aerie"), Kind: layer.KindProject}
	abs := func(rel string) string { return filepath.Join(ws.dir, rel) }
	var pinned []layer.Pin
	for man, exe := range map[string]string{yamlFile: script, tomlFile: program} {
		p, err := layer.ComputePin(ws.dir, l, abs(man), []string{abs(exe)})
		if err != nil {
			t.Fatal(err)
		}
		pinned = append(pinned, p)
	}
	loaded, err := Load([]layer.Layer{l}, layer.NewPins(ws.dir, pinned...), LoadOptions{Dir: ws.dir})
	if err != nil || len(loaded.Hooks) != 2 || len(loaded.Problems) != 0 {
		t.Fatalf("load: %d hooks, problems %v, %v", len(loaded.Hooks), loaded.Problems, err)
	}
	var (
		mu       sync.Mutex
		observed []Verdict
	)
	e := New(ws.exec, loaded.Hooks, Options{Dir: ws.dir, Observe: func(_ context.Context, v Verdict) {
		mu.Lock()
		observed = append(observed, v)
		mu.Unlock()
	}})
	call := func() Verdict {
		t.Helper()
		v, err := e.PreToolUse(t.Context(), "bash", json.RawMessage(`{"command":"ls"}`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	skipped := func(v Verdict) []string {
		var out []string
		for _, r := range v.Runs {
			if r.Skipped != "" {
				out = append(out, filepath.Base(r.Hook[:strings.IndexByte(r.Hook, '#')])+": "+r.Skipped)
			}
		}
		return out
	}

	// As pinned: the TOML hook adds context, the YAML one denies.
	if v := call(); !v.Blocked() || v.Context != "checked" || len(skipped(v)) != 0 {
		t.Fatalf("as pinned: %+v", v)
	}
	// The script changes mid-session: its file's hooks are skipped.
	testenv.WriteTree(t, ws.dir, map[string]string{script: "#!/bin/sh\nexit 0\n"})
	v := call()
	if v.Blocked() || v.Context != "checked" {
		t.Errorf("a modified script ran: %+v", v)
	}
	if s := skipped(v); len(s) != 1 || !strings.HasPrefix(s[0], "guard.yaml: not run: modified since trust was checked: .aerie/hooks/guard.yaml or an executable it runs changed since it was pinned") {
		t.Errorf("skipped %q", s)
	}
	// The TOML file itself changes: its hook is skipped too.
	testenv.WriteTree(t, ws.dir, map[string]string{tomlFile: "[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\ncommand = \"./.aerie/context.sh\"\ntimeout_secs = 5\n"})
	if v := call(); v.Context != "" || len(skipped(v)) != 2 {
		t.Errorf("a modified hooks.toml ran: %+v", v)
	}
	// The pinned bytes back: the hooks run again.
	testenv.WriteTree(t, ws.dir, map[string]string{script: deny})
	if err := os.Remove(abs(tomlFile)); err != nil {
		t.Fatal(err)
	}
	if v := call(); !v.Blocked() || len(skipped(v)) != 1 || !strings.Contains(skipped(v)[0], "hooks.toml: not run: untrusted since trust was checked") {
		t.Errorf("restored script: %+v, skipped %q", v, skipped(v))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(observed) != 4 || len(observed[1].Runs) != 2 || observed[1].Runs[1].Skipped == "" {
		t.Errorf("observed %d verdicts: %+v", len(observed), observed)
	}
}

// TestToolUseIDFromRegistry: a wrapped tool run through the tool registry
// gives its hooks the id of the model's call, and the verdict carries it.
func TestToolUseIDFromRegistry(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	seen := filepath.Join(t.TempDir(), "event.json")
	var (
		mu  sync.Mutex
		ids []string
	)
	e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: "cat > " + seen})}, Options{
		Observe: func(_ context.Context, v Verdict) {
			mu.Lock()
			ids = append(ids, v.ToolUseID)
			mu.Unlock()
		},
	})
	reg, err := tools.NewRegistry(nil, Wrap(&echoTool{name: "echo"}, e))
	if err != nil {
		t.Fatal(err)
	}
	if res := reg.Run(t.Context(), "toolu_42", "echo", json.RawMessage(`{}`)); res.IsError {
		t.Fatal(res.Content)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil || in.ToolUseID != "toolu_42" {
		t.Errorf("event %s: tool_use_id %q, %v", b, in.ToolUseID, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 1 || ids[0] != "toolu_42" {
		t.Errorf("verdict tool_use_id %q", ids)
	}
}

// TestRegexpsRemember: within one Load a pattern compiles once.
func TestRegexpsRemember(t *testing.T) {
	t.Parallel()
	c := new(regexps)
	a, err := c.compileYAML("mcp__.*")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.compileYAML("mcp__.*")
	if err != nil || a.re != b.re || !b.Match("mcp__s__t") || b.Match("bash") {
		t.Errorf("compiled again or wrongly: %p %p %v", a.re, b.re, err)
	}
	if _, err := c.compileYAML("("); err == nil || len(c.m) != 1 {
		t.Errorf("invalid pattern: %v, %d kept", err, len(c.m))
	}
	if m, err := (*regexps)(nil).compileYAML("a.*"); err != nil || !m.Match("abc") {
		t.Errorf("without a cache: %v", err)
	}
}
