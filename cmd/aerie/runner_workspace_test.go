package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/session"
	"github.com/aerie-run/aerie/runner/transcript"
)

// pinsOf returns the pins that would trust the workspace's project tools
// and hook files as they are now, by path from the workspace root.
func pinsOf(t *testing.T, ws string) map[string]layer.Pin {
	t.Helper()
	layers, err := layer.ProjectLayers(ws, ws)
	if err != nil {
		t.Fatal(err)
	}
	set, err := extensions.Load(layer.Source{Layers: layers, Workspace: ws}, extensions.Options{Builtins: session.BuiltinToolNames()})
	if err != nil {
		t.Fatal(err)
	}
	loaded, _ := hooks.Load(layers, nil, hooks.LoadOptions{Dir: ws, Workspace: ws})
	out := map[string]layer.Pin{}
	for _, a := range append(set.Report.Artifacts, loaded.Artifacts(ws)...) {
		if a.Pin != nil {
			out[a.Pin.Path] = *a.Pin
		}
	}
	return out
}

// TestRunnerWorkspaceTrust runs a pod's runner over a workspace it reads
// itself, as the agent container does with the workspace mounted
// read-only: project layers and AGENTS.md are used; a project tool or hook
// runs only when pinned by spec.trust.pinsFrom or by the trust.toml of a
// layer kind spec.trust.sources names, never by the workspace's own
// trust.toml or a left-out kind's; and links planted in the workspace to
// a file outside it, or to the runner's own environment, are not read.
func TestRunnerWorkspaceTrust(t *testing.T) {
	t.Parallel()
	p := newPod(t, "",
		toolTurn(call("c1", "pinned_tool", map[string]any{}), call("c2", "unpinned_tool", map[string]any{})),
		answer("Ran the pinned tool."))
	outside := t.TempDir()
	testenv.WriteTree(t, outside, map[string]string{"notes.md": "outside-secret-7f3a"})
	tool := func(name string) string {
		return "name = \"" + name + "\"\ndescription = \"The " + name + ".\"\ncommand = [\"./" + name + ".sh\"]\n"
	}
	hook := func(script string) string {
		return "hooks:\n  SessionStart:\n    - hooks: [{type: command, script: " + script + "}]\n"
	}
	testenv.WriteTree(t, p.ws, map[string]string{
		"AGENTS.md":                        "Run make test before you finish.\n",
		"sub/AGENTS.md":                    "->" + filepath.Join(outside, "notes.md"),
		"sub/CLAUDE.md":                    "->/proc/self/environ",
		".aerie/tools/pinned_tool.toml":    tool("pinned_tool"),
		".aerie/tools/pinned_tool.sh":      "#!/bin/sh\ncat >/dev/null\ntouch ../../pinned-tool-ran\necho pinned ok\n",
		".aerie/tools/unpinned_tool.toml":  tool("unpinned_tool"),
		".aerie/tools/unpinned_tool.sh":    "#!/bin/sh\ncat >/dev/null\ntouch ../../unpinned-tool-ran\n",
		".aerie/hooks/pinned.yaml":         hook("pinned.sh"),
		".aerie/hooks/pinned.sh":           "#!/bin/sh\ntouch pinned-hook-ran\n",
		".aerie/hooks/unpinned.yaml":       hook("unpinned.sh"),
		".aerie/hooks/unpinned.sh":         "#!/bin/sh\ntouch unpinned-hook-ran\n",
		".aerie/SYSTEM.md":                 "->/proc/self/environ",
		"sub/.aerie/APPEND_SYSTEM.md":      "Sub-project rules.\n",
		"sub/.aerie/personas/ignored.toml": "prompt = 'unused'\n",
	})
	pins := pinsOf(t, p.ws)
	toolPin, hookPin := pins[".aerie/tools/pinned_tool.toml"], pins[".aerie/hooks/pinned.yaml"]
	unpinnedTool, unpinnedHook := pins[".aerie/tools/unpinned_tool.toml"], pins[".aerie/hooks/unpinned.yaml"]
	if toolPin.SHA256 == "" || hookPin.SHA256 == "" || unpinnedTool.SHA256 == "" || unpinnedHook.SHA256 == "" {
		t.Fatalf("pins %+v", pins)
	}
	// The workspace pins everything itself: never honoured.
	testenv.WriteTree(t, p.ws, map[string]string{".aerie/trust.toml": toolPin.TOML() + hookPin.TOML() + unpinnedTool.TOML() + unpinnedHook.TOML()})
	spec, ns := t.TempDir(), t.TempDir()
	testenv.WriteTree(t, spec, map[string]string{"trust.toml": hookPin.TOML()})
	// The namespace layer would trust the unpinned ones, but the trust
	// sources leave namespace layers out.
	testenv.WriteTree(t, ns, map[string]string{"trust.toml": unpinnedTool.TOML() + unpinnedHook.TOML()})

	cfg := p.config(func(c *runconfig.Config) {
		c.Executor.WorkingDir = "sub"
		c.Layers = []runconfig.Layer{
			{Name: "go", Kind: runconfig.LayerSpec, Dir: spec, Source: "configmap/go"},
			{Name: "team", Kind: runconfig.LayerNamespace, Dir: ns, Source: "configmap/team"},
		}
		c.Trust = runconfig.Trust{
			Sources: []string{"Extensions", "Platform"},
			Pins:    []runconfig.TrustPins{{Source: "configmap/pins/trust.toml", TOML: toolPin.TOML()}},
		}
	})
	res := p.run(t.Context(), cfg)
	if res.code != 0 {
		t.Fatalf("exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
	}
	// Tools run in their own directory, hooks in the working directory.
	for name, want := range map[string]bool{
		"pinned-tool-ran": true, "sub/pinned-hook-ran": true, "unpinned-tool-ran": false, "sub/unpinned-hook-ran": false,
	} {
		if _, err := os.Stat(filepath.Join(p.ws, name)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", name, err == nil, want)
		}
	}

	reqs := p.model.Requests()
	first := string(reqs[0].Body)
	for _, want := range []string{`"pinned_tool"`, "Run make test before you finish.", "Sub-project rules."} {
		if !strings.Contains(first, want) {
			t.Errorf("the first request lacks %s", want)
		}
	}
	if strings.Contains(first, `"unpinned_tool"`) {
		t.Error("the unpinned tool was offered")
	}
	environ, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	var leaks [][]byte
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if len(kv) > 12 {
			leaks = append(leaks, kv)
		}
	}
	leaks = append(leaks, []byte("outside-secret-7f3a"))
	es, err := p.store().Entries(t.Context(), cfg.Namespace, uuid.MustParse(cfg.Session.ID))
	if err != nil {
		t.Fatal(err)
	}
	var stored bytes.Buffer
	for _, e := range es {
		b, _ := transcript.EncodePayload(e.Payload)
		stored.Write(b)
	}
	for _, leak := range leaks {
		for _, req := range reqs {
			if bytes.Contains(req.Body, leak) {
				t.Errorf("a request to the model holds %q, read through a link out of the workspace", leak)
			}
		}
		if bytes.Contains(stored.Bytes(), leak) {
			t.Errorf("the journal holds %q, read through a link out of the workspace", leak)
		}
	}
	var unknown bool
	for _, e := range es {
		if r, ok := e.Payload.(transcript.ToolResult); ok && r.CallID == "c2" && r.IsError {
			unknown = true
		}
	}
	if !unknown {
		t.Error("the call of the unpinned tool did not fail")
	}

	// The layers record: the project layers the runner found, then the
	// mounted ones, each with where it came from and a digest.
	rec, ok := es[0].Payload.(transcript.Layers)
	if !ok {
		t.Fatalf("first entry %T, want the layers record", es[0].Payload)
	}
	var got []string
	for _, l := range rec.Layers {
		// .aerie holds a link out of the workspace: it has no digest,
		// since nothing outside is read.
		if hasDigest := strings.HasPrefix(l.Digest, "sha256:"); hasDigest != (l.Name != ".aerie") {
			t.Errorf("layer %s: digest %q", l.Name, l.Digest)
		}
		got = append(got, l.Kind+" "+l.Name+" "+strings.TrimPrefix(l.Source, p.ws+"/"))
	}
	want := []string{"project sub/.aerie sub/.aerie", "project .aerie .aerie", "spec go configmap/go", "namespace team configmap/team"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layers record (-want +got):\n%s", diff)
	}
}

// TestRunnerBadSessionPins: a pinsFrom document that does not parse stops
// the attempt with a configuration error naming it.
func TestRunnerBadSessionPins(t *testing.T) {
	t.Parallel()
	p := newPod(t, "")
	res := p.run(t.Context(), p.config(func(c *runconfig.Config) {
		c.Trust.Pins = []runconfig.TrustPins{{Source: "configmap/pins/trust.toml", TOML: "[[pin]]\npath = \"/etc/passwd\"\nsha256 = \"00\"\n"}}
	}))
	if res.code != 2 || !strings.Contains(res.report.Reason, "trust.pins[0] (spec.trust.pinsFrom): configmap/pins/trust.toml") || !strings.Contains(res.report.Reason, "pin[0].path") {
		t.Errorf("exit %d, report %+v", res.code, res.report)
	}
}

// TestRunnerPersonaAndWindow: spec.persona's prompt and toolset from a
// layer, and spec.model.contextWindow, reach the session.
func TestRunnerPersonaAndWindow(t *testing.T) {
	t.Parallel()
	p := newPod(t, "", answer("Reviewed."))
	layerDir := t.TempDir()
	testenv.WriteTree(t, layerDir, map[string]string{
		"personas/reviewer.toml": "prompt = 'You are the reviewer persona.'\ntoolset = 'readonly'\n",
		"toolsets.toml":          "[toolsets.readonly]\ntools = ['read_file']\n",
	})
	cfg := p.config(func(c *runconfig.Config) {
		c.Persona = "reviewer"
		c.Model.ContextWindow = 4096
		c.Layers = []runconfig.Layer{{Name: "review", Kind: runconfig.LayerSpec, Dir: layerDir}}
	})
	res := p.run(t.Context(), cfg)
	if res.code != 0 {
		t.Fatalf("exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
	}
	body := string(p.model.Requests()[0].Body)
	if !strings.Contains(body, "You are the reviewer persona.") || !strings.Contains(body, `"read_file"`) || strings.Contains(body, `"bash"`) {
		t.Errorf("request without the persona's prompt and toolset: %s", body)
	}
	if !strings.Contains(res.stderr, `"persona":"reviewer"`) || !strings.Contains(res.stderr, `"contextWindow":4096`) {
		t.Errorf("the log does not show the persona and the window:\n%s", res.stderr)
	}
	sess, err := p.store().Session(t.Context(), cfg.Namespace, uuid.MustParse(cfg.Session.ID))
	if err != nil || sess.Settings.Persona != "reviewer" {
		t.Errorf("stored settings %+v, %v", sess.Settings, err)
	}

	res = p.run(t.Context(), p.config(func(c *runconfig.Config) { c.Persona = "nobody" }))
	if res.code != 2 || !strings.Contains(res.report.Reason, `persona "nobody": unknown persona`) {
		t.Errorf("unknown persona: exit %d, report %+v", res.code, res.report)
	}
}

// TestRunnerCumulativeUsage: each attempt reports the session's usage so
// far, tool calls included, so that the status the controller derives
// from the last pod is the session's; a fork counts what it copied.
func TestRunnerCumulativeUsage(t *testing.T) {
	t.Parallel()
	p := newPod(t, "",
		toolTurn(call("a1", "bash", map[string]any{"command": "true"})), answer("first"),
		toolTurn(call("b1", "bash", map[string]any{"command": "true"}), call("b2", "bash", map[string]any{"command": "true"})), answer("second"),
		answer("forked"))
	cfg := p.config()
	res := p.run(t.Context(), cfg)
	checkCost(t, &res.report.Usage)
	if want := (runconfig.Usage{InputTokens: 200, OutputTokens: 15, Requests: 2, ToolCalls: 1}); res.code != 0 || res.report.Usage != want {
		t.Fatalf("attempt 1: exit %d, usage %+v, want %+v", res.code, res.report.Usage, want)
	}
	// Attempt 2 after a lost pod, the task asked again.
	cfg.Session.Attempt, cfg.Prompt = 2, "Go on."
	res = p.run(t.Context(), cfg)
	checkCost(t, &res.report.Usage)
	if want := (runconfig.Usage{InputTokens: 400, OutputTokens: 30, Requests: 4, ToolCalls: 3}); res.code != 0 || res.report.Usage != want {
		t.Fatalf("attempt 2: exit %d, usage %+v, want %+v", res.code, res.report.Usage, want)
	}
	fork := p.config(func(c *runconfig.Config) { c.Session.ForkFrom, c.Prompt = cfg.Session.ID, "Branch." })
	res = p.run(t.Context(), fork)
	if res.code != 0 || res.report.Usage.ToolCalls != 3 || res.report.Usage.Requests != 5 {
		t.Errorf("fork: exit %d, usage %+v, want 3 tool calls and 5 requests", res.code, res.report.Usage)
	}
}

// TestRunnerTurnBudgetAcrossAttempts checks that budget.maxTurns bounds
// the session, not each attempt: attempt 2 of a session whose first
// attempt made two model requests has one turn left of three.
func TestRunnerTurnBudgetAcrossAttempts(t *testing.T) {
	t.Parallel()
	p := newPod(t, "",
		toolTurn(call("a1", "bash", map[string]any{"command": "true"})), answer("first"),
		toolTurn(call("b1", "bash", map[string]any{"command": "true"})), answer("never asked"))
	cfg := p.config(func(c *runconfig.Config) { c.Budget.MaxTurns = 3 })
	if res := p.run(t.Context(), cfg); res.code != 0 || res.report.Usage.Requests != 2 {
		t.Fatalf("attempt 1: exit %d, usage %+v, want 0 after 2 requests", res.code, res.report.Usage)
	}
	cfg.Session.Attempt, cfg.Prompt = 2, "Go on."
	res := p.run(t.Context(), cfg)
	if res.code != runconfig.ExitBudget || res.report.Usage.Requests != 3 {
		t.Errorf("attempt 2: exit %d, usage %+v, want exit %d after 3 requests in all", res.code, res.report.Usage, runconfig.ExitBudget)
	}
	if res.report.Outcome != runconfig.OutcomeBudgetExceeded {
		t.Errorf("attempt 2: outcome %q, want %q", res.report.Outcome, runconfig.OutcomeBudgetExceeded)
	}
}
