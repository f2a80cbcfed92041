package controllers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// platformLayer is a platform layer ConfigMap's content: a skill and an
// executable custom tool, keys spelling paths with "__".
var platformLayer = map[string]string{
	"skills__release-notes__SKILL.md": `---
name: release-notes
description: Write the release notes of a version from its merged changes.
---
# Release notes

Group the changes by kind; the marker of this body is platform-skill-body.
`,
	"tools__workspace_probe.toml": `name = "workspace_probe"
description = "Reports the user and directory it runs as, and leaves its arguments in the workspace."
command = ["./workspace_probe.sh"]
timeout_secs = 30

[parameters.marker]
type = "string"
description = "A word to leave in the workspace."
required = true
`,
	"tools__workspace_probe.sh": `#!/bin/sh
set -eu
read -r args
printf '%s\n' "$args" > /workspace/probe.txt
echo "uid=$(id -u) cwd=$(pwd)"
`,
}

// testPlatformLayer puts a skill and an executable custom tool in a
// platform layer ConfigMap: the runner pod gets its mirror, the model is
// offered both, and the tool runs in the workspace container. Platform
// layers are the submitter's side, not the workspace's, so their
// executables run without a trust pin (layer.Layer.NeedsTrust).
func testPlatformLayer(t *testing.T, e *e2e) {
	e, src := e.withPlatformLayer(t)

	model := testenv.StartModelServer(t,
		testenv.Turn{
			ToolCalls: []testenv.ToolCall{
				{ID: "probe", Name: "workspace_probe", Arguments: `{"marker":"platform-e2e"}`},
				{ID: "read-skill", Name: "skill", Arguments: `{"name":"release-notes"}`},
			},
			Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 10},
		},
		testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	e.session(t, "platform-layer", model)
	pod := e.pod(t, "platform-layer")
	s := e.waitFinished(t, "platform-layer")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}

	// The pod mounts the layer's immutable mirror in the session's
	// namespace, the script executable.
	var mirrors corev1.ConfigMapList
	if err := e.cp.Client.List(t.Context(), &mirrors, client.InNamespace(e.ns), client.MatchingLabels{LabelPlatformLayer: src.Name}); err != nil {
		t.Fatal(err)
	}
	if len(mirrors.Items) != 1 || mirrors.Items[0].Immutable == nil || !*mirrors.Items[0].Immutable {
		t.Fatalf("mirrors of %s in %s: %+v, want one immutable", src.Name, e.ns, mirrors.Items)
	}
	mirror := mirrors.Items[0].Name
	var mounted bool
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == mirror {
			mounted = true
			for _, it := range v.ConfigMap.Items {
				if it.Path == "tools/workspace_probe.sh" && (it.Mode == nil || *it.Mode&0o111 == 0) {
					t.Errorf("the script's item has mode %v, want executable", it.Mode)
				}
			}
		}
	}
	if !mounted {
		t.Errorf("the runner pod does not mount the mirror %s: volumes %+v", mirror, pod.Spec.Volumes)
	}
	rc := runnerConfigOf(t, e, "platform-layer", 1)
	if len(rc.Layers) != 1 || rc.Layers[0].Kind != runconfig.LayerPlatform || rc.Layers[0].Name != src.Name || !strings.HasPrefix(rc.Layers[0].Digest, "sha256:") {
		t.Errorf("runner config layers %+v, want the platform layer %s with its digest", rc.Layers, src.Name)
	}

	// The model was offered the skill (in the system prompt's catalog, and
	// the tool that reads it) and the custom tool.
	var first struct {
		System json.RawMessage `json:"system"`
		Tools  []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := requestForTurn(t, model, 1).Decode(&first); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(first.System, []byte("release-notes: Write the release notes of a version from its merged changes.")) {
		t.Errorf("the system prompt does not list the skill: %s", first.System)
	}
	offered := map[string]string{}
	for _, tool := range first.Tools {
		offered[tool.Name] = tool.Description + " " + string(tool.InputSchema)
	}
	if d := offered["workspace_probe"]; !strings.Contains(d, "Reports the user and directory") || !strings.Contains(d, `"marker"`) {
		t.Errorf("the custom tool offered as %q, want its description and its parameter", d)
	}
	if _, ok := offered["skill"]; !ok {
		t.Errorf("no skill tool offered; tools: %v", offered)
	}

	// The tool ran as the workspace container's user, from the layer's
	// tools directory, with the workspace at /workspace; the skill's body
	// came back from the layer.
	results := toolResults(t, requestForTurn(t, model, 2))
	probe := results["probe"]
	wantCwd := "/etc/aerie/layers/0/tools"
	if e.runner.Mounts() != testenv.MountNamespace {
		wantCwd = "/tools" // a local path under the path map
	}
	if !strings.Contains(probe, "uid="+strconv.Itoa(DefaultWorkspaceUser)+" ") || !strings.Contains(probe, wantCwd) {
		t.Errorf("workspace_probe returned %q, want uid=%d and a working directory ending in %s", probe, DefaultWorkspaceUser, wantCwd)
	}
	if !strings.Contains(results["read-skill"], "platform-skill-body") {
		t.Errorf("the skill tool returned %q, want the skill's body", results["read-skill"])
	}
	if e.runner.Mounts() == testenv.MountNamespace {
		b, err := os.ReadFile(filepath.Join(e.runner.VolumePath(pod, volumeWorkspace), "probe.txt"))
		if err != nil || !bytes.Contains(b, []byte(`"marker":"platform-e2e"`)) {
			t.Errorf("probe.txt in the workspace = %q, %v; want the call's arguments", b, err)
		}
	}
	if u := s.Status.Usage; u == nil || u.ToolCalls != 2 {
		t.Errorf("usage %+v, want 2 tool calls", u)
	}
}

// runnerConfigOf is the runner configuration of a session's attempt n.
func runnerConfigOf(t *testing.T, e *e2e, session string, n int32) *runconfig.Config {
	t.Helper()
	var cm corev1.ConfigMap
	if err := e.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: e.ns, Name: childName(session, n)}, &cm); err != nil {
		t.Fatalf("runner config of %s: %v", session, err)
	}
	rc, err := runconfig.Parse([]byte(cm.Data[runconfig.FileName]))
	if err != nil {
		t.Fatalf("runner config of %s: %v", session, err)
	}
	return rc
}

// toolResults are the text of the tool results an Anthropic request
// carries, by call id.
func toolResults(t *testing.T, r testenv.ModelRequest) map[string]string {
	t.Helper()
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := r.Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range body.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			var parts []struct{ Text string }
			if json.Unmarshal(b.Content, &parts) == nil {
				for _, p := range parts {
					out[b.ToolUseID] += p.Text
				}
			} else {
				var s string
				_ = json.Unmarshal(b.Content, &s)
				out[b.ToolUseID] += s
			}
		}
	}
	return out
}

// testNamespaceLayerConfig caps tool results in a namespace layer
// ConfigMap's config.toml: the runner pod reads it, and the model gets the
// bash output capped at the layer's max_bytes, not the spec's default.
func testNamespaceLayerConfig(t *testing.T, e *e2e) {
	e, layer := e.withNamespaceLayer(t, "team-defaults", map[string]string{"config.toml": "[tool_results]\nmax_bytes = 400\nhead_bytes = 150\ntail_bytes = 150\n"})

	model := testenv.StartModelServer(t,
		bashTurn("big", `printf 'x%.0s' $(seq 1 5000); echo; echo the-end`),
		testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	e.session(t, "layer-config", model)
	s := e.waitFinished(t, "layer-config")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
	}
	rc := runnerConfigOf(t, e, "layer-config", 1)
	if len(rc.Layers) != 1 || rc.Layers[0].Kind != runconfig.LayerNamespace || rc.Layers[0].Name != layer.Name {
		t.Errorf("runner config layers %+v, want the namespace layer %s", rc.Layers, layer.Name)
	}
	got := toolResults(t, requestForTurn(t, model, 2))["big"]
	// The model sees the kept head and tail and, on a line of its own
	// between them, the note that says what was dropped and where the
	// whole output is.
	kept := regexp.MustCompile(`\[\.\.\. \d+ bytes dropped[^\]]*\]`).ReplaceAllString(got, "")
	if len(kept) > 150+150+4 || kept == got || !strings.HasSuffix(strings.TrimSpace(got), "the-end") {
		t.Errorf("bash result keeps %d bytes besides its note, want the layer's 150 + 150:\n%s", len(kept), got)
	}
}

// testNamespaceLayerChanged changes a namespace layer while a session runs:
// the session goes on seeing the layer as it was when it started (on a
// real node, after the kubelet's sync would have swapped a mutable
// ConfigMap's files), and the next session sees the change.
func testNamespaceLayerChanged(t *testing.T, e *e2e) {
	e, layer := e.withNamespaceLayer(t, "team-notes", map[string]string{"notes.txt": "version one\n"})
	read := "cat " + runconfig.LayerDir(0) + "/notes.txt"
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	model := testenv.StartModelServer(t,
		bashTurn("before", read),
		testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			close(held)
			<-release
			return bashTurn("after", read)
		}},
		answer("Done."))
	t.Cleanup(unblock)
	e.session(t, "layer-changed", model)
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the session did not ask for its second turn within 2m")
	}
	layer.Data["notes.txt"] = "version two\n"
	if err := e.cp.Client.Update(t.Context(), layer); err != nil {
		t.Fatalf("change the namespace layer: %v", err)
	}
	if e.local == nil {
		// The node's kubelet syncs its pods every 10 s: a mounted mutable
		// ConfigMap's files would have been swapped by now.
		time.Sleep(25 * time.Second)
	}
	unblock()
	if s := e.waitFinished(t, "layer-changed"); s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s, want Succeeded", s.Status.Phase)
	}
	results := allToolResults(t, model)
	for _, id := range []string{"before", "after"} {
		if got := results[id]; !strings.Contains(got, "version one") {
			t.Errorf("the tool call %s read %q, want the layer as it was when the session started", id, got)
		}
	}

	next := testenv.StartModelServer(t, bashTurn("next", read), answer("Done."))
	e.session(t, "layer-changed-next", next)
	if s := e.waitFinished(t, "layer-changed-next"); s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s, want Succeeded", s.Status.Phase)
	}
	if got := allToolResults(t, next)["next"]; !strings.Contains(got, "version two") {
		t.Errorf("the next session read %q, want the changed layer", got)
	}
}

// withPlatformLayer is e for the sessions of a new namespace, whose
// controller has its platform layers in a namespace of their own, with
// the layer platformLayer in it, which it returns.
func (e *e2e) withPlatformLayer(t *testing.T) (*e2e, *corev1.ConfigMap) {
	t.Helper()
	ns, platform := e.namespace(t), e.cp.Namespace(t)
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "platform-tools", Namespace: platform,
			Labels:      map[string]string{runconfig.LayerLabel: ""},
			Annotations: map[string]string{runconfig.ExecutablesAnnotation: `["tools/workspace_probe.sh"]`},
		},
		Data: platformLayer,
	}
	if err := e.cp.Client.Create(t.Context(), src); err != nil {
		t.Fatalf("create the platform layer: %v", err)
	}
	e.startController(t, ns, platform)
	return e.in(ns), src
}

// withNamespaceLayer is e for the sessions of a new namespace, with a
// namespace layer ConfigMap name holding data, which it returns, and a
// controller of its own.
func (e *e2e) withNamespaceLayer(t *testing.T, name string, data map[string]string) (*e2e, *corev1.ConfigMap) {
	t.Helper()
	ns := e.namespace(t)
	layer := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{runconfig.LayerLabel: ""}},
		Data:       data,
	}
	if err := e.cp.Client.Create(t.Context(), layer); err != nil {
		t.Fatalf("create the namespace layer: %v", err)
	}
	e.startController(t, ns, e.cp.Namespace(t))
	return e.in(ns), layer
}
