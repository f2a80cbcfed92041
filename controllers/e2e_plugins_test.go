package controllers

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// corpusMarketplace is the official Claude Code marketplace's catalog with
// six of its plugins.
const corpusMarketplace = "../runner/plugins/testdata/corpus/claude-plugins/anthropics__claude-plugins-official"

// testPlatformPlugins is a platform team shipping a marketplace selection:
// five plugins installed from the official Claude marketplace (one of them
// a strict: false entry without a manifest of its own) are packed with
// aerie plugin pack into a platform layer, and a session in a pod uses a
// skill of one of them.
func testPlatformPlugins(t *testing.T, e *e2e) {
	ns, platform := e.namespace(t), e.cp.Namespace(t)
	e = e.in(ns)
	market, err := filepath.Abs(corpusMarketplace)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	aerie := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(e.bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AERIE_HOME=" + home}
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("aerie %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return string(out)
	}
	aerie("plugin", "marketplace", "add", market)
	selection := []string{"discord", "gopls-lsp", "hookify", "pr-review-toolkit", "security-guidance"}
	for _, p := range selection {
		aerie("plugin", "install", p+"@claude-plugins-official")
	}
	manifest := aerie(append(append([]string{"plugin", "pack"}, selection...), "--name", "official-plugins", "-n", platform)...)
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(manifest), &cm); err != nil {
		t.Fatalf("the packed layer: %v", err)
	}
	if err := e.cp.Client.Create(t.Context(), &cm); err != nil {
		t.Fatalf("create the platform layer: %v", err)
	}
	e.startController(t, ns, platform)

	model := testenv.StartModelServer(t,
		testenv.Turn{
			ToolCalls: []testenv.ToolCall{{ID: "read-skill", Name: "skill", Arguments: `{"name":"discord:access"}`}},
			Usage:     testenv.TokenUsage{InputTokens: 100, OutputTokens: 10},
		},
		testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	e.session(t, "platform-plugins", model)
	s := e.waitFinished(t, "platform-plugins")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}
	var first struct {
		System json.RawMessage `json:"system"`
	}
	if err := requestForTurn(t, model, 1).Decode(&first); err != nil {
		t.Fatal(err)
	}
	for _, skill := range []string{"discord:access", "discord:configure"} {
		if !strings.Contains(string(first.System), skill) {
			t.Errorf("the system prompt does not list the plugin skill %s: %s", skill, first.System)
		}
	}
	if got := toolResults(t, requestForTurn(t, model, 2))["read-skill"]; !strings.Contains(got, "Discord Channel Access Management") {
		t.Errorf("the skill tool returned %q, want the plugin skill's body from the platform layer", got)
	}
}
