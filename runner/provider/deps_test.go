package provider_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoSDK: the neutral types link no model SDK, so that what needs
// only them (the agent loop, the journal, the events) links none either;
// the SDKs are their providers' alone.
func TestLinksNoSDK(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/aerie-run/aerie/runner/provider").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/anthropics/anthropic-sdk-go") || strings.HasPrefix(p, "github.com/openai/openai-go") {
			t.Errorf("runner/provider links %s", p)
		}
	}
}
