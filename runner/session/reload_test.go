package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/skills"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// reloadRun runs a session in a fresh workspace and user layer with the
// model's turns, and returns the run's report, its events and the
// requests the model received.
func reloadRun(t *testing.T, extra []tools.Tool, home string, turns ...testenv.Turn) (Report, []events.Event, []testenv.ModelRequest) {
	t.Helper()
	rep, evs, reqs, _ := runIn(t, extra, home, turns...)
	return rep, evs, reqs
}

// runIn is reloadRun, also returning the run's options.
func runIn(t *testing.T, extra []tools.Tool, home string, turns ...testenv.Turn) (Report, []events.Event, []testenv.ModelRequest, Options) {
	t.Helper()
	ws := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	exe, err := executor.NewLocal(ws, executor.Options{Reaper: reaper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := exe.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	layers, err := layer.Discover(layer.DiscoverOptions{WorkDir: ws, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	model := testenv.StartModelServer(t, turns...)
	var evs []events.Event
	opts := Options{
		Session:    Spec{Tenant: ws},
		Extensions: LoadOptions{Dir: ws, System: "PERSONA", Layers: layers},
		Prompt:     "go",
		Model: Model{
			Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
			New: func(s transcript.Settings) (agent.Model, error) {
				return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: model.URL()})
			},
		},
		Executor: exe,
		Tools:    extra,
		Observe:  func(e events.Event) { evs = append(evs, e) },
	}
	rep, err := Run(t.Context(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("outcome %s: %s", rep.Result.Outcome, rep.Result.Reason)
	}
	return rep, evs, model.Requests(), opts
}

func manageCall(id string, args map[string]any) testenv.ToolCall {
	b, _ := json.Marshal(args)
	return testenv.ToolCall{ID: id, Name: "extension_manage", Arguments: string(b)}
}

type anthropicReq struct {
	System []struct{ Text string } `json:"system"`
	Tools  []struct{ Name string } `json:"tools"`
	// Messages' last tool results.
	Messages []struct {
		Content []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			IsError   bool   `json:"is_error"`
			Content   any    `json:"content"`
		} `json:"content"`
	} `json:"messages"`
}

func decodeReq(t *testing.T, r testenv.ModelRequest) (system string, toolNames []string, results map[string]string) {
	t.Helper()
	var a anthropicReq
	if err := r.Decode(&a); err != nil {
		t.Fatal(err)
	}
	for _, s := range a.System {
		system += s.Text
	}
	for _, tl := range a.Tools {
		toolNames = append(toolNames, tl.Name)
	}
	results = map[string]string{}
	if n := len(a.Messages); n > 0 {
		for _, c := range a.Messages[n-1].Content {
			if c.Type == "tool_result" {
				b, _ := json.Marshal(c.Content)
				results[c.ToolUseID] = string(b)
			}
		}
	}
	return system, toolNames, results
}

// TestReloadAtTurnBoundary checks that a change takes effect for the next
// request, never within the turn that made it: a skill written and used
// in one message is not there yet.
func TestReloadAtTurnBoundary(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	skill := "---\nname: deploy\ndescription: Use when deploying.\n---\nRun make deploy.\n"
	rep, evs, reqs := reloadRun(t, nil, home,
		testenv.Turn{ToolCalls: []testenv.ToolCall{
			manageCall("create", map[string]any{"operation": "create", "kind": "skill", "name": "deploy", "content": skill}),
			{ID: "early", Name: "skill", Arguments: `{"name":"deploy"}`},
		}},
		testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "late", Name: "skill", Arguments: `{"name":"deploy"}`}}},
		testenv.Turn{Text: "done"},
	)
	sys0, tools0, _ := decodeReq(t, reqs[0])
	sys1, tools1, res1 := decodeReq(t, reqs[1])
	_, _, res2 := decodeReq(t, reqs[2])
	if strings.Contains(sys0, "deploy") || strings.Contains(strings.Join(tools0, ","), ",skill") {
		t.Errorf("the first request has the skill: %v\n%s", tools0, sys0)
	}
	if !strings.Contains(sys1, "Use when deploying.") || !strings.Contains(strings.Join(tools1, ","), "skill") {
		t.Errorf("the second request lacks the skill: %v\n%s", tools1, sys1)
	}
	if !strings.Contains(res1["early"], "unknown tool") {
		t.Errorf("the skill was usable in the turn that wrote it: %s", res1["early"])
	}
	if !strings.Contains(res2["late"], "Run make deploy.") {
		t.Errorf("the skill after the reload: %s", res2["late"])
	}
	var reloads []events.Event
	for _, e := range evs {
		if e.Type == events.Reload {
			reloads = append(reloads, e)
		}
	}
	if len(reloads) != 1 || reloads[0].Status != "reloaded" || reloads[0].Text != filepath.Join(home, "skills/deploy/SKILL.md")+": active" {
		t.Errorf("reload events %+v", reloads)
	}
	if !strings.Contains(rep.System, "Use when deploying.") {
		t.Errorf("the report's system prompt is the first one:\n%s", rep.System)
	}
}

// breaker is a tool that writes a malformed file into the user layer, as
// a person editing it by hand during the session might.
type breaker struct{ home string }

func (breaker) Name() string            { return "breaker" }
func (breaker) Description() string     { return "breaks the user layer" }
func (breaker) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (b breaker) Run(context.Context, json.RawMessage) tools.Result {
	if err := os.MkdirAll(filepath.Join(b.home, "tools"), 0o755); err != nil {
		return tools.Result{Content: err.Error(), IsError: true}
	}
	if err := os.WriteFile(filepath.Join(b.home, "tools", "bad.toml"), []byte("name = 1\n"), 0o644); err != nil {
		return tools.Result{Content: err.Error(), IsError: true}
	}
	return tools.Result{Content: "broken"}
}

// TestReloadFailureKeepsLoaded checks that a reload that cannot load the
// layers keeps what the session had, and says why.
func TestReloadFailureKeepsLoaded(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	_, evs, reqs := reloadRun(t, []tools.Tool{breaker{home: home}}, home,
		testenv.Turn{ToolCalls: []testenv.ToolCall{
			manageCall("create", map[string]any{"operation": "create", "kind": "append_system", "content": "Cite files.\n"}),
			{ID: "break", Name: "breaker", Arguments: `{}`},
		}},
		testenv.Turn{ToolCalls: []testenv.ToolCall{manageCall("list", map[string]any{"operation": "list", "kind": "append_system"})}},
		testenv.Turn{Text: "done"},
	)
	sys1, tools1, _ := decodeReq(t, reqs[1])
	if strings.Contains(sys1, "Cite files.") || !strings.Contains(strings.Join(tools1, ","), "extension_manage") {
		t.Errorf("after a failed reload the second request changed: %v\n%s", tools1, sys1)
	}
	var failed []events.Event
	for _, e := range evs {
		if e.Type == events.Reload {
			failed = append(failed, e)
		}
	}
	if len(failed) != 1 || failed[0].Status != "failed" || !strings.Contains(failed[0].Reason, filepath.Join(home, "tools", "bad.toml")) {
		t.Errorf("reload events %+v", failed)
	}
	// The change is no longer pending (it is on disk, and the next load
	// picks it up); list says it was not loaded.
	_, _, res2 := decodeReq(t, reqs[2])
	if !strings.Contains(res2["list"], `\"state\":\"inactive\"`) || !strings.Contains(res2["list"], "not loaded in this session") {
		t.Errorf("list after the failed reload: %s", res2["list"])
	}
}

// TestNoUserLayer checks that a session without a user layer (a pod) is
// not offered extension_manage.
func TestNoUserLayer(t *testing.T) {
	t.Parallel()
	_, _, reqs := reloadRun(t, nil, "", testenv.Turn{Text: "done"})
	if _, tools0, _ := decodeReq(t, reqs[0]); strings.Contains(strings.Join(tools0, ","), "extension_manage") {
		t.Errorf("offered %v", tools0)
	}
}

// TestRunReportIsTheLoaders checks that a run reports exactly what
// LoadExtensions — the loader aerie extensions calls — reports for the
// same sources.
func TestRunReportIsTheLoaders(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for name, content := range map[string]string{
		"APPEND_SYSTEM.md": "Be brief.\n",
		"tools/wc.toml":    "name = \"wc\"\ndescription = \"Counts.\"\ncommand = [\"/usr/bin/wc\"]\n",
		"tools/mine.toml":  "name = \"mine\"\ndescription = \"Mine.\"\ncommand = [\"/bin/true\"]\n",
		"tools/mine.toml" + layer.ProvenanceSuffix: string(layer.AgentSidecar("op", []byte("x"), "next_turn")),
		"hooks.toml":            "[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"true\"\n",
		"skills/notes/SKILL.md": "---\ndescription: Notes.\n---\nx\n",
		"skills/notes/SKILL.md" + layer.ProvenanceSuffix: string(layer.AgentSidecar("op", []byte("---\ndescription: Notes.\n---\nx\n"), "next_turn")),
	} {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep, _, _, opts := runIn(t, nil, home, testenv.Turn{Text: "done"})
	x, err := LoadExtensions(opts.Extensions)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(x.Report(), rep.Extensions, cmpopts.IgnoreUnexported(layer.Artifact{}), cmpopts.IgnoreFields(layer.Artifact{}, "Err")); diff != "" {
		t.Errorf("the run's report differs from the loader's (-loader +run):\n%s", diff)
	}
	var skill *layer.Artifact
	for i, a := range rep.Extensions.Artifacts {
		if a.Type == skills.TypeSkill {
			skill = &rep.Extensions.Artifacts[i]
		}
	}
	if skill == nil || skill.Provenance == nil || skill.Provenance.State != layer.ProvenanceAgent || skill.Provenance.DigestMismatch {
		t.Errorf("the home skill's provenance: %+v", skill)
	}
}
