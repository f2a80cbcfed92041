package instructions

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/executortest"
	"github.com/aerie-run/aerie/runner/provider"
)

// TestExecutorsOncePerConversation reads another executor's AGENTS.md
// through a real Local executor: added after the first call there only,
// found again in a resumed conversation, and restored after a compaction
// that dropped the result carrying it.
func TestExecutorsOncePerConversation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.WriteTree(t, dir, map[string]string{"AGENTS.md": "Use make check.\n"})
	l := executortest.NewLocal(t, dir, executor.Options{Grace: 100 * time.Millisecond})
	empty := executortest.NewLocal(t, t.TempDir(), executor.Options{Grace: 100 * time.Millisecond})
	files := func(name string) (Files, bool) {
		switch name {
		case "tools":
			return l, true
		case "bare":
			return empty, true
		}
		return nil, false
	}
	ctx := context.Background()
	e := NewExecutors(files)
	first := e.Used(ctx, "c1", "tools")
	if !strings.Contains(first, "Project instructions of executor tools, from AGENTS.md:\nUse make check.") {
		t.Fatalf("first use: %q", first)
	}
	for _, name := range []string{"tools", "workspace", "bare", ""} {
		if r := e.Used(ctx, "c2", name); r != "" {
			t.Errorf("a later call on %q adds %q", name, r)
		}
	}
	history := []provider.Message{{Role: provider.RoleUser, Content: []provider.Content{
		{Type: provider.ContentToolResult, ToolCallID: "c1", Text: "ok\n\n" + first},
	}}}
	resumed := NewExecutors(files)
	resumed.Seed(history)
	if r := resumed.Used(ctx, "c3", "tools"); r != "" {
		t.Errorf("a resumed conversation adds them again: %q", r)
	}
	if r := resumed.Restore(ctx, history); r != "" {
		t.Errorf("a compaction that keeps the carrier restores %q", r)
	}
	r := resumed.Restore(ctx, nil)
	if !strings.Contains(r, "which the conversation held before it was compacted") || !strings.Contains(r, "Use make check.") {
		t.Errorf("restored after the carrier was dropped: %q", r)
	}
	if again := resumed.Used(ctx, "c4", "tools"); again != "" {
		t.Errorf("added after the restore: %q", again)
	}
}
