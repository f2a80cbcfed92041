package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/aerie-run/aerie/runner/layer"
)

// TestRunExtensionManage has the model write its own extensions with
// extension_manage: an append prompt and a skill are in the very next
// request, while the custom tool it writes stays inactive — not offered,
// untrusted in aerie extensions — until a person pins it.
func TestRunExtensionManage(t *testing.T) {
	t.Parallel()
	const (
		appendText = "Always cite the file you changed."
		skill      = "---\nname: changelog\ndescription: Use when writing the changelog.\n---\nOne line per change.\n"
		tool       = "name = \"notes\"\ndescription = \"Appends to the notes.\"\ncommand = [\"/bin/cat\"]\n"
	)
	e := newE2E(t,
		toolTurn(
			call("prompt", "extension_manage", map[string]any{"operation": "create", "kind": "append_system", "content": appendText + "\n"}),
			call("skill", "extension_manage", map[string]any{"operation": "create", "kind": "skill", "name": "changelog", "content": skill}),
			call("tool", "extension_manage", map[string]any{"operation": "create", "kind": "tool", "name": "notes", "content": tool}),
			call("secret", "extension_manage", map[string]any{"operation": "create", "kind": "append_system", "content": "key: sk-ant-" + "api03-Zq8xLm2Nv5Rt7Wp1Ky4H\n"}),
		),
		toolTurn(call("list", "extension_manage", map[string]any{"operation": "list"})),
		answer("done"),
	)
	out := e.run("run", "remember how we work")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}

	// Turn 1 had none of it, and offered the tool.
	if sys := systemPrompt(t, reqs[0]); strings.Contains(sys, appendText) || strings.Contains(sys, "changelog") {
		t.Errorf("the first request already has the changes:\n%s", sys)
	}
	if names := offeredTools(t, reqs[0]); !slices.Contains(names, "extension_manage") {
		t.Errorf("extension_manage is not offered: %v", names)
	}
	res := toolResults(t, reqs[1])
	for _, id := range []string{"prompt", "skill", "tool"} {
		var r struct {
			OK    bool   `json:"ok"`
			State string `json:"state"`
			Note  string `json:"note"`
		}
		if err := json.Unmarshal([]byte(res[id].text), &r); err != nil || res[id].isError || !r.OK || r.State != "pending_reload" {
			t.Errorf("%s: %+v %v\n%s", id, r, err, res[id].text)
		}
		if id == "tool" && !strings.Contains(r.Note, "never grants trust") {
			t.Errorf("the tool's result does not say it stays inactive: %s", r.Note)
		}
	}
	if r := res["secret"]; !r.isError || !strings.Contains(r.text, `"category":"invalid_content"`) || strings.Contains(r.text, "Zq8xLm2Nv5Rt7Wp1Ky4H") {
		t.Errorf("secret: %+v", r)
	}

	// Turn 2 has the append prompt and the skill; the tool is not offered.
	sys := systemPrompt(t, reqs[1])
	for _, want := range []string{appendText, "changelog", "Use when writing the changelog."} {
		if !strings.Contains(sys, want) {
			t.Errorf("the second request's system prompt lacks %q:\n%s", want, sys)
		}
	}
	if names := offeredTools(t, reqs[1]); slices.Contains(names, "notes") || !slices.Contains(names, "skill") {
		t.Errorf("second request offers %v: want the skill tool, and not the untrusted notes", names)
	}
	// list, in turn 2, shows what the reload made of them.
	var list struct {
		Artifacts []struct {
			Kind, Name, State, Trust string
			Provenance               struct{ State string }
		}
	}
	if err := json.Unmarshal([]byte(toolResults(t, reqs[2])["list"].text), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range list.Artifacts {
		got[a.Kind+" "+a.Name] = a.State + " " + a.Trust + " " + a.Provenance.State
	}
	want := map[string]string{
		"skill changelog":                "active  agent",
		"append_system APPEND_SYSTEM.md": "active  agent",
		"tool notes":                     "inactive untrusted agent",
	}
	if !equalMaps(want, got) {
		t.Errorf("list = %v, want %v", got, want)
	}

	// The reload is an event, which says why the tool is inactive.
	var reload *events.Event
	for i, ev := range out.events {
		if ev.Type == events.Reload {
			reload = &out.events[i]
		}
	}
	toolPath := filepath.Join(e.home, "tools", "notes.toml")
	if reload == nil || reload.Status != "reloaded" || !strings.Contains(reload.Text, toolPath+": inactive (untrusted)") {
		t.Errorf("reload event %+v", reload)
	}

	// The files are durable with their provenance, and the report shows
	// the tool untrusted, with the pin a person would add.
	if _, err := os.Stat(toolPath + layer.ProvenanceSuffix); err != nil {
		t.Errorf("no sidecar: %v", err)
	}
	rep := e.run("extensions", "--json")
	var report layer.Report
	if err := json.Unmarshal([]byte(rep.stdout), &report); err != nil {
		t.Fatalf("%v\n%s", err, rep.stdout)
	}
	var found bool
	for _, a := range report.Artifacts {
		if a.Path != toolPath {
			continue
		}
		found = true
		if a.Status != layer.StatusInactive || a.Trust != layer.Untrusted || a.Pin == nil ||
			a.Provenance == nil || a.Provenance.State != layer.ProvenanceAgent || a.ActivationBoundary != "next_turn" {
			t.Errorf("report of the tool: %+v", a)
		}
	}
	if !found {
		t.Errorf("the report lacks %s:\n%s", toolPath, rep.stdout)
	}

	// Once a person pins it, the next session offers it.
	e.pinAll()
	e.model.Add(answer("ok"))
	if out := e.run("run", "again"); out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if names := offeredTools(t, e.model.Requests()[3]); !slices.Contains(names, "notes") {
		t.Errorf("the pinned tool is not offered: %v", names)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
