package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aerie-run/aerie/runner/tools"
)

// TestToolHooksRunWhereTheCallRuns wraps the real bash tool routed to two
// executors: its PreToolUse and PostToolUse hooks run on the executor of
// each call, in that executor's directory, and are told its name; a
// session-level hook runs on the default.
func TestToolHooksRunWhereTheCallRuns(t *testing.T) {
	t.Parallel()
	main, other := newWorkspace(t), newWorkspace(t)
	// Each hook leaves a file where it ran, holding its input.
	files := map[string]string{"hooks/a.yaml": yamlFile(t,
		spec{Event: PreToolUse, Matcher: "bash", Command: "cat > pre.json"},
		spec{Event: PostToolUse, Matcher: "bash", Command: "cat > post.json"},
		spec{Event: SessionStart, Command: "cat > start.json"},
	)}
	e := main.engine(t, files, Options{On: func(name string) (Commands, string, bool) {
		if name != "tools" {
			return nil, "", false
		}
		return other.exec, other.dir, true
	}})
	var bash tools.Tool
	for _, tl := range tools.BuiltinOn([]tools.Place{
		{Name: "workspace", Files: main.exec, Commands: main.exec},
		{Name: "tools", Files: other.exec, Commands: other.exec},
	}) {
		if tl.Name() == "bash" {
			bash = Wrap(tl, e)
		}
	}
	if res := bash.Run(t.Context(), json.RawMessage(`{"command":"pwd","executor":"tools"}`)); res.IsError || res.Content != other.dir+"\n" {
		t.Fatalf("bash on tools: %+v", res)
	}
	for _, f := range []string{"pre.json", "post.json"} {
		var in Input
		b, err := os.ReadFile(filepath.Join(other.dir, f))
		if err != nil {
			t.Fatalf("the hook did not run on tools: %v", err)
		}
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatal(err)
		}
		if in.Executor != "tools" || in.Cwd != other.dir {
			t.Errorf("%s: executor %q, cwd %q; want tools, %s", f, in.Executor, in.Cwd, other.dir)
		}
		if _, err := os.Stat(filepath.Join(main.dir, f)); err == nil {
			t.Errorf("%s written on the default executor too", f)
		}
	}
	if res := bash.Run(t.Context(), json.RawMessage(`{"command":"pwd"}`)); res.IsError {
		t.Fatalf("bash on the default: %+v", res)
	}
	var in Input
	b, err := os.ReadFile(filepath.Join(main.dir, "pre.json"))
	if err != nil {
		t.Fatalf("the hook of a default call did not run on the default: %v", err)
	}
	if err := json.Unmarshal(b, &in); err != nil || in.Executor != "" || in.Cwd != main.dir {
		t.Errorf("default call's hook input %+v (%v)", in, err)
	}
	if _, err := e.SessionStart(t.Context(), "startup"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(main.dir, "start.json")); err != nil {
		t.Errorf("SessionStart did not run on the default: %v", err)
	}
}
