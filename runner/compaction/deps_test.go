package compaction_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoModelSDK: compaction is logic over provider's neutral types;
// the summarizer behind its interface is the program's choice.
func TestLinksNoModelSDK(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/aerie-run/aerie/runner/compaction").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/anthropics/anthropic-sdk-go") || strings.HasPrefix(p, "github.com/openai/openai-go") ||
			strings.HasPrefix(p, "github.com/jackc/pgx") || strings.HasPrefix(p, "modernc.org/sqlite") {
			t.Errorf("runner/compaction links %s", p)
		}
	}
}
