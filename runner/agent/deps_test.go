package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoModelSDK: the loop talks to a model through provider's
// neutral types only; which API's SDK a session uses is the program's
// choice, and the loop links none.
func TestLinksNoModelSDK(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/aerie-run/aerie/runner/agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/anthropics/anthropic-sdk-go") || strings.HasPrefix(p, "github.com/openai/openai-go") {
			t.Errorf("runner/agent links %s", p)
		}
	}
}
