package hooks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// spec declares one hook for a test file.
type spec struct {
	Event   Event
	Matcher string
	Command string
	// Timeout in seconds; 0 is the format's default.
	Timeout   float64
	OnFailure string
}

// tomlFile writes hooks.toml content, one group per hook.
func tomlFile(t testing.TB, hs ...spec) string {
	t.Helper()
	events := map[string][]any{}
	for _, h := range hs {
		hook := map[string]any{"command": h.Command}
		if h.Timeout > 0 {
			hook["timeout_secs"] = int64(h.Timeout)
		}
		group := map[string]any{"hooks": []any{hook}}
		if h.Matcher != "" {
			group["matcher"] = h.Matcher
		}
		events[string(h.Event)] = append(events[string(h.Event)], group)
	}
	b, err := toml.Marshal(map[string]any{"hooks": events})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlFile writes hooks/*.yaml content (as JSON, which is YAML).
func yamlFile(t testing.TB, hs ...spec) string {
	t.Helper()
	events := map[string][]any{}
	for _, h := range hs {
		hook := map[string]any{"type": "command", "command": h.Command}
		if h.Timeout > 0 {
			hook["timeout"] = h.Timeout
		}
		if h.OnFailure != "" {
			hook["on_failure"] = h.OnFailure
		}
		group := map[string]any{"hooks": []any{hook}}
		if h.Matcher != "" {
			group["matcher"] = h.Matcher
		}
		events[string(h.Event)] = append(events[string(h.Event)], group)
	}
	b, err := json.Marshal(map[string]any{"hooks": events})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recorder collects observed verdicts.
type recorder struct {
	mu       sync.Mutex
	verdicts []Verdict
}

func (r *recorder) observe(_ context.Context, v Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verdicts = append(r.verdicts, v)
}

func (r *recorder) all() []Verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.verdicts)
}

const (
	denyJSON = `echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no rm -rf"}}'`
	askJSON  = `echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"rm needs a person"}}'`
	allowOut = `echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'`
)

// TestWrap runs a tool wrapped with real hook processes for each kind of
// answer, in both formats.
func TestWrap(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	type want struct {
		ran     []string // the arguments the tool ran with
		isError bool
		content []string // substrings of the result
		endTurn string   // the result's EndTurn
		failed  string   // substring of the first run's failure
	}
	tests := []struct {
		name  string
		files map[string]string
		want  want
	}{
		{"toml allow", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: "cat >/dev/null"})},
			want{ran: []string{`{"command":"rm -rf /"}`}, content: []string{"ran with"}}},
		{"yaml explicit allow", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: allowOut})},
			want{ran: []string{`{"command":"rm -rf /"}`}}},
		{"toml deny", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: denyJSON})},
			want{isError: true, content: []string{"bash: blocked by a PreToolUse hook: no rm -rf"}}},
		{"yaml deny", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: denyJSON})},
			want{isError: true, content: []string{"no rm -rf"}}},
		{"toml exit 2", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: "echo dangerous command >&2; exit 2"})},
			want{isError: true, content: []string{"blocked by a PreToolUse hook: dangerous command"}}},
		{"yaml exit 2", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: "echo nope >&2; exit 2"})},
			want{isError: true, content: []string{"blocked by a PreToolUse hook: nope"}}},
		{"toml exit 2 without reason allows", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: "exit 2"})},
			want{ran: []string{`{"command":"rm -rf /"}`}, failed: "exit status 2 without a reason"}},
		{"updated input", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: `echo '{"hookSpecificOutput":{"updatedInput":{"command":"ls"}}}'`})},
			want{ran: []string{`{"command":"ls"}`}, content: []string{`ran with {"command":"ls"}`}}},
		{"toml malformed verdict allows", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: `echo '{"decision":'`})},
			want{ran: []string{`{"command":"rm -rf /"}`}, failed: "invalid JSON output"}},
		{"toml plain text allows", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: `echo looks fine`})},
			want{ran: []string{`{"command":"rm -rf /"}`}, failed: "output is not a JSON verdict"}},
		{"yaml malformed verdict allows by default", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: `echo '{bad'`})},
			want{ran: []string{`{"command":"rm -rf /"}`}, failed: "invalid JSON output"}},
		{"yaml malformed verdict blocks on failure", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: `echo '{bad'`, OnFailure: "block"})},
			want{isError: true, content: []string{"failed (invalid JSON output", "blocks on failure"}, failed: "invalid JSON output"}},
		{"toml exit 1 allows", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: denyJSON + "; exit 1"})},
			want{ran: []string{`{"command":"rm -rf /"}`}, failed: "exit status 1"}},
		{"yaml exit 3 blocks on failure", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: "exit 3", OnFailure: "block"})},
			want{isError: true, content: []string{"exit status 3"}, failed: "exit status 3"}},
		{"yaml missing program fails", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: "aerie-no-such-program"})},
			want{ran: []string{`{"command":"rm -rf /"}`}, failed: "exit status 127"}},
		{"toml ask is denied headless", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: askJSON})},
			want{isError: true, content: []string{"rm needs a person (approval required; denied in a headless run)"}}},
		{"yaml ask is a failure", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: askJSON, OnFailure: "block"})},
			want{isError: true, content: []string{`permissionDecision "ask" is a hook failure`}, failed: `"ask" is a hook failure`}},
		{"pre context", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: `echo '{"hookSpecificOutput":{"additionalContext":"be careful"}}'`})},
			want{ran: []string{`{"command":"rm -rf /"}`}, content: []string{"ran with {\"command\":\"rm -rf /\"}\n\nbe careful"}}},
		{"post context", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PostToolUse, Command: `echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"gofmt reformatted main.go"}}'`})},
			want{ran: []string{`{"command":"rm -rf /"}`}, content: []string{"\n\ngofmt reformatted main.go"}}},
		{"post block replaces the result", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PostToolUse, Command: `echo '{"decision":"block","reason":"output leaks a token"}'`})},
			want{ran: []string{`{"command":"rm -rf /"}`}, isError: true, content: []string{"bash: result withheld by a PostToolUse hook: output leaks a token"}}},
		{"continue false before the tool", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: `echo '{"continue":false,"stopReason":"budget spent"}'`})},
			want{isError: true, content: []string{"a PreToolUse hook ended the turn: budget spent"}, endTurn: "a PreToolUse hook ended the turn: budget spent"}},
		{"deny and continue false", map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: `echo '{"continue":false,"stopReason":"enough","hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no"}}'`})},
			want{isError: true, content: []string{"blocked by a PreToolUse hook: no"}, endTurn: "a PreToolUse hook ended the turn: enough"}},
		{"continue false after the tool", map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PostToolUse, Command: `echo '{"continue":false,"stopReason":"tests pass"}'`})},
			want{ran: []string{`{"command":"rm -rf /"}`}, content: []string{"ran with"}, endTurn: "a PostToolUse hook ended the turn: tests pass"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			e := ws.engine(t, tt.files, Options{Observe: rec.observe})
			tool := &echoTool{name: "bash"}
			res := Wrap(tool, e).Run(t.Context(), json.RawMessage(`{"command":"rm -rf /"}`))
			if diff := cmp.Diff(tt.want.ran, tool.ran()); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			if res.IsError != tt.want.isError {
				t.Errorf("IsError = %v, want %v: %s", res.IsError, tt.want.isError, res.Content)
			}
			if res.EndTurn != tt.want.endTurn {
				t.Errorf("EndTurn = %q, want %q", res.EndTurn, tt.want.endTurn)
			}
			for _, s := range tt.want.content {
				if !strings.Contains(res.Content, s) {
					t.Errorf("result %q does not contain %q", res.Content, s)
				}
			}
			vs := rec.all()
			if len(vs) == 0 || len(vs[0].Runs) == 0 {
				t.Fatalf("no verdict observed: %+v", vs)
			}
			if got := vs[0].Runs[0].Failed; !strings.Contains(got, tt.want.failed) || (tt.want.failed == "") != (got == "") {
				t.Errorf("run failure %q, want %q", got, tt.want.failed)
			}
		})
	}
}

// TestAskPolicy checks that a hooks.toml "ask" goes to the approval
// policy, whose decision the verdict records.
func TestAskPolicy(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	files := map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: askJSON})}

	rec := &recorder{}
	e := ws.engine(t, files, Options{Observe: rec.observe})
	v, err := e.PreToolUse(t.Context(), "bash", json.RawMessage(`{"command":"rm x"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Approval{Allowed: false, Reason: "rm needs a person (approval required; denied in a headless run)", Policy: "deny"}
	if diff := cmp.Diff(want, v.Approval); diff != "" || !v.Blocked() || v.Reason != want.Reason {
		t.Errorf("default policy: verdict %+v; approval (-want +got):\n%s", v, diff)
	}
	if len(rec.all()) != 1 || rec.all()[0].Approval == nil {
		t.Errorf("the observed verdict does not carry the approval: %+v", rec.all())
	}

	var got ApprovalRequest
	allow := func(_ context.Context, req ApprovalRequest) Approval {
		got = req
		return Approval{Allowed: true, Reason: "allowed by the session's policy", Policy: "allow-all"}
	}
	e = ws.engine(t, files, Options{Approve: allow})
	v, err = e.PreToolUse(t.Context(), "bash", json.RawMessage(`{"command":"rm x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Decision != Allow || v.Approval == nil || !v.Approval.Allowed {
		t.Errorf("allowing policy: verdict %+v", v)
	}
	if got.Tool != "bash" || string(got.Input) != `{"command":"rm x"}` || got.Reason != "rm needs a person" || len(got.Hooks) != 1 {
		t.Errorf("approval request %+v", got)
	}
}

// TestAskPolicyPauses: under the ask policy a call a hook asked about is
// left to a person: the verdict keeps Ask with the hooks' reason, and the
// wrapped tool does not run but returns a result that awaits the
// approval; with a person's decision in the context, the call runs (or is
// refused) whatever the policy.
func TestAskPolicyPauses(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	files := map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: askJSON})}
	e := ws.engine(t, files, Options{Approve: AskApprovals})
	tool := &echoTool{name: "bash"}
	wrapped := Wrap(tool, e)

	res := wrapped.Run(t.Context(), json.RawMessage(`{"command":"rm x"}`))
	if res.Await == nil || res.Await.Reason != "rm needs a person" || len(res.Await.Hooks) != 1 || !res.IsError {
		t.Errorf("result %+v, want one awaiting approval", res)
	}
	if len(tool.calls) != 0 {
		t.Fatalf("the tool ran before anyone approved: %v", tool.calls)
	}

	approved := WithDecision(t.Context(), Approval{Allowed: true, Reason: "ok", Policy: "aerie approve"})
	if res := wrapped.Run(approved, json.RawMessage(`{"command":"rm x"}`)); res.IsError || res.Await != nil || len(tool.calls) != 1 {
		t.Errorf("approved: result %+v, calls %v", res, tool.calls)
	}
	denied := WithDecision(t.Context(), Approval{Reason: "no", Policy: "aerie approve"})
	if res := wrapped.Run(denied, json.RawMessage(`{"command":"rm x"}`)); !res.IsError || res.Await != nil ||
		!strings.Contains(res.Content, "no") || len(tool.calls) != 1 {
		t.Errorf("denied: result %+v, calls %v", res, tool.calls)
	}
}

// TestParseApprovalPolicy names the policies a session can choose.
func TestParseApprovalPolicy(t *testing.T) {
	t.Parallel()
	req := ApprovalRequest{Tool: "bash", Reason: "rm needs a person"}
	for name, want := range map[string]Approval{
		"":      {Allowed: false, Reason: "rm needs a person (approval required; denied in a headless run)", Policy: "deny"},
		"deny":  {Allowed: false, Reason: "rm needs a person (approval required; denied in a headless run)", Policy: "deny"},
		"allow": {Allowed: true, Reason: "rm needs a person (approved in advance by the session's approval policy)", Policy: "allow"},
		"ask":   {Pending: true, Reason: "rm needs a person", Policy: "ask"},
	} {
		p, err := ParseApprovalPolicy(name)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if diff := cmp.Diff(want, p(t.Context(), req)); diff != "" {
			t.Errorf("policy %q (-want +got):\n%s", name, diff)
		}
	}
	if _, err := ParseApprovalPolicy("maybe"); err == nil || !strings.Contains(err.Error(), `unknown approval policy "maybe": use deny`) {
		t.Errorf("an unknown policy: %v", err)
	}
}

// TestCombine checks how several hooks of one event combine.
func TestCombine(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	ctx := t.Context()

	t.Run("deny beats ask beats allow", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks.toml": tomlFile(t,
			spec{Event: PreToolUse, Command: allowOut},
			spec{Event: PreToolUse, Command: askJSON},
			spec{Event: PreToolUse, Command: denyJSON},
		)}, Options{Approve: func(context.Context, ApprovalRequest) Approval {
			t.Error("the approval policy was asked although a hook denied")
			return Approval{Allowed: true}
		}})
		v, err := e.PreToolUse(ctx, "bash", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Blocked() || v.Reason != "no rm -rf" || v.Approval != nil || len(v.Runs) != 3 {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("ask beats allow", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks.toml": tomlFile(t,
			spec{Event: PreToolUse, Command: askJSON},
			spec{Event: PreToolUse, Command: allowOut},
		)}, Options{})
		v, err := e.PreToolUse(ctx, "bash", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Blocked() || v.Approval == nil || len(v.Runs) != 2 {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("a deny ends the chain", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "ran")
		e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t,
			spec{Event: PreToolUse, Command: denyJSON},
			spec{Event: PreToolUse, Command: "touch " + marker},
		)}, Options{})
		v, err := e.PreToolUse(ctx, "bash", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Blocked() || len(v.Runs) != 1 {
			t.Errorf("verdict %+v", v)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("a hook after the deny ran")
		}
	})
	t.Run("updated input chains and context concatenates", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{
			"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: `echo '{"hookSpecificOutput":{"updatedInput":{"n":1},"additionalContext":"one"},"systemMessage":"m1"}'`}),
			"hooks/a.yaml": yamlFile(t,
				spec{Event: PreToolUse, Command: `grep -q '"tool_input":{"n":1}' && echo '{"hookSpecificOutput":{"updatedInput":{"n":2},"additionalContext":"two"}}'`},
				spec{Event: PreToolUse, Command: `grep -q '"tool_input":{"n":2}' && echo '{"hookSpecificOutput":{"additionalContext":"three"},"systemMessage":"m3"}'`},
			),
		}, Options{})
		tool := &echoTool{name: "bash"}
		res := Wrap(tool, e).Run(ctx, json.RawMessage(`{"n":0}`))
		if diff := cmp.Diff([]string{`{"n":2}`}, tool.ran()); diff != "" {
			t.Errorf("tool calls (-want +got):\n%s", diff)
		}
		if want := "ran with {\"n\":2}\n\none\ntwo\nthree"; res.Content != want {
			t.Errorf("result %q, want %q", res.Content, want)
		}
		v, err := e.PreToolUse(ctx, "bash", json.RawMessage(`{"n":0}`))
		if err != nil {
			t.Fatal(err)
		}
		if string(v.UpdatedInput) != `{"n":2}` || v.Context != "one\ntwo\nthree" || !slices.Equal(v.SystemMessages, []string{"m1", "m3"}) {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("stop reasons join", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t,
			spec{Event: Stop, Command: `echo '{"decision":"block","reason":"tests fail"}'`},
			spec{Event: Stop, Command: "true"},
			spec{Event: Stop, Command: "echo lint fails >&2; exit 2"},
		)}, Options{})
		v, err := e.Stop(ctx, StopInput{})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Blocked() || v.Reason != "tests fail\nlint fails" || len(v.Runs) != 3 {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("continue false ends the chain", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t,
			spec{Event: UserPromptSubmit, Command: `echo '{"continue":false,"stopReason":"out of budget"}'`},
			spec{Event: UserPromptSubmit, Command: "echo more context"},
		)}, Options{})
		v, err := e.UserPromptSubmit(ctx, "hi")
		if err != nil {
			t.Fatal(err)
		}
		if !v.Stop || v.StopReason != "out of budget" || len(v.Runs) != 1 || v.Context != "" {
			t.Errorf("verdict %+v", v)
		}
	})
}

// TestMatchers checks which tools hooks run for, end to end.
func TestMatchers(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	e := ws.engine(t, map[string]string{
		"hooks.toml": tomlFile(t,
			spec{Event: PreToolUse, Matcher: "bash", Command: "echo toml-bash >&2; exit 2"},
			spec{Event: PreToolUse, Matcher: "read", Command: "echo toml-read >&2; exit 2"},
		),
		"hooks/a.yaml": yamlFile(t,
			spec{Event: PreToolUse, Matcher: "Write", Command: "echo yaml-Write >&2; exit 2"},
			spec{Event: PreToolUse, Matcher: "e.d", Command: "echo yaml-ead >&2; exit 2"},
			spec{Event: PreToolUse, Matcher: "Agent|grep", Command: "echo yaml-list >&2; exit 2"},
		),
	}, Options{})
	tests := []struct {
		tool string
		want string // the hook that blocks; "" = none runs
	}{
		{"bash", "toml-bash"},
		{"bash_extra", ""},        // anchored: toml's bash does not match
		{"read_file", "yaml-ead"}, // anchored: toml's read does not match; the unanchored yaml e.d does
		{"apply_patch", "yaml-Write"},
		{"write_file", "yaml-Write"},
		{"spawn_agent", "yaml-list"},
		{"grep", "yaml-list"},
		{"grep2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			tool := &echoTool{name: tt.tool}
			wrapped := Wrap(tool, e)
			if tt.want == "" {
				if wrapped != tools.Tool(tool) {
					t.Errorf("%s was wrapped although no hook matches it", tt.tool)
				}
				return
			}
			res := wrapped.Run(t.Context(), nil)
			if !res.IsError || !strings.HasSuffix(res.Content, ": "+tt.want) {
				t.Errorf("result %+v, want a block by %s", res, tt.want)
			}
		})
	}
}

// TestEventInput checks the event object each event's hooks read.
func TestEventInput(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	out := t.TempDir()
	var specs []spec
	for _, ev := range Events {
		specs = append(specs, spec{Event: ev, Command: "cat > " + filepath.Join(out, string(ev)+".json")})
	}
	e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t, specs...)}, Options{SessionID: "s-1"})
	ctx := WithTurn(WithToolUse(t.Context(), "call-7"), "turn-3")
	must := func(_ Verdict, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.SessionStart(ctx, "startup"))
	must(e.UserPromptSubmit(ctx, ""))
	must(e.PreToolUse(ctx, "bash", json.RawMessage(` {"command": "ls"} `)))
	must(e.PostToolUse(ctx, "bash", nil, tools.Result{Content: "a.go", IsError: true}))
	must(e.Stop(ctx, StopInput{Count: 1, Active: true, LastAssistantMessage: "done"}))
	must(e.SubagentStart(ctx, "a-1", "reviewer"))
	must(e.ForAgent("a-1", "reviewer").SubagentStop(ctx, "a-1", "reviewer", StopInput{}))
	must(e.ForAgent("a-2", "explorer").SessionEnd(ctx, "done"))

	base := func(ev Event) map[string]any {
		return map[string]any{"hook_event_name": string(ev), "session_id": "s-1", "turn_id": "turn-3", "cwd": ws.dir}
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	want := map[Event]map[string]any{
		SessionStart:     with(base(SessionStart), "source", "startup"),
		UserPromptSubmit: with(base(UserPromptSubmit), "prompt", ""),
		PreToolUse:       with(base(PreToolUse), "tool_name", "bash", "tool_input", map[string]any{"command": "ls"}, "tool_use_id", "call-7"),
		PostToolUse: with(base(PostToolUse), "tool_name", "bash", "tool_input", map[string]any{}, "tool_use_id", "call-7",
			"tool_response", map[string]any{"content": "a.go", "is_error": true}),
		Stop:          with(base(Stop), "stop_count", 1.0, "stop_hook_active", true, "last_assistant_message", "done"),
		SubagentStart: with(base(SubagentStart), "agent_id", "a-1", "agent_type", "reviewer"),
		SubagentStop: with(base(SubagentStop), "agent_id", "a-1", "agent_type", "reviewer",
			"stop_count", 0.0, "stop_hook_active", false, "last_assistant_message", ""),
		SessionEnd: with(base(SessionEnd), "reason", "done", "agent_id", "a-2", "agent_type", "explorer"),
	}
	for ev, w := range want {
		b, err := os.ReadFile(filepath.Join(out, string(ev)+".json"))
		if err != nil {
			t.Errorf("%s: %v", ev, err)
			continue
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%s: %v in %q", ev, err, b)
			continue
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s event (-want +got):\n%s", ev, diff)
		}
	}
}

// TestLoopEvents checks the verdicts of the events the loop fires.
func TestLoopEvents(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	ctx := t.Context()
	t.Run("blocking stop continues with its reason", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks.toml": tomlFile(t, spec{Event: Stop, Command: `echo '{"decision":"block","reason":"run the tests first"}'`})}, Options{})
		v, err := e.Stop(ctx, StopInput{})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Blocked() || v.Reason != "run the tests first" {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("yaml session start context", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t,
			spec{Event: SessionStart, Matcher: "startup", Command: "echo branch main"},
			spec{Event: SessionStart, Matcher: "resume", Command: "echo resumed"},
			spec{Event: SessionStart, Command: `echo '{"hookSpecificOutput":{"additionalContext":"go 1.26"}}'`},
		)}, Options{})
		v, err := e.SessionStart(ctx, "startup")
		if err != nil {
			t.Fatal(err)
		}
		if v.Context != "branch main\ngo 1.26" || v.Blocked() {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("toml session start only observes", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks.toml": tomlFile(t, spec{Event: SessionStart, Command: `echo '{"hookSpecificOutput":{"additionalContext":"x"},"continue":false}'`})}, Options{})
		v, err := e.SessionStart(ctx, "startup")
		if err != nil {
			t.Fatal(err)
		}
		if v.Context != "" || v.Stop || len(v.Runs) != 1 || v.Runs[0].Ignored == "" {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("prompt blocked", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: UserPromptSubmit, Command: `grep -q password && echo '{"decision":"block","reason":"the prompt holds a password"}'; true`})}, Options{})
		v, err := e.UserPromptSubmit(ctx, "my password is hunter2")
		if err != nil {
			t.Fatal(err)
		}
		if !v.Blocked() || v.Reason != "the prompt holds a password" {
			t.Errorf("verdict %+v", v)
		}
		v, err = e.UserPromptSubmit(ctx, "hello")
		if err != nil || v.Blocked() {
			t.Errorf("verdict %+v, %v", v, err)
		}
	})
	t.Run("yaml exit 2 on session start fails open", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: SubagentStart, Command: "echo no >&2; exit 2"})}, Options{})
		v, err := e.SubagentStart(ctx, "a", "t")
		if err != nil {
			t.Fatal(err)
		}
		if v.Blocked() || v.Runs[0].Failed != "exit status 2, but SubagentStart cannot be blocked" {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("matchers only select on their events", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks.toml": tomlFile(t, spec{Event: Stop, Matcher: "bash", Command: "echo stop >&2; exit 2"})}, Options{})
		v, err := e.Stop(ctx, StopInput{})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Blocked() || v.Reason != "stop" {
			t.Errorf("a Stop hook with a tool matcher did not run: %+v", v)
		}
	})
	t.Run("a hook that cannot start fails", func(t *testing.T) {
		t.Parallel()
		e := ws.engine(t, map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: denyJSON})}, Options{Dir: filepath.Join(ws.dir, "missing")})
		v, err := e.PreToolUse(ctx, "bash", nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Blocked() || !strings.HasPrefix(v.Runs[0].Failed, "cannot start: ") || v.Runs[0].Exit != -1 {
			t.Errorf("verdict %+v", v)
		}
	})
	t.Run("nil engine", func(t *testing.T) {
		t.Parallel()
		var e *Engine
		v, err := e.Stop(ctx, StopInput{})
		if err != nil || v.Blocked() || len(v.Runs) != 0 {
			t.Errorf("verdict %+v, %v", v, err)
		}
		tool := &echoTool{name: "bash"}
		if Wrap(tool, e) != tools.Tool(tool) {
			t.Error("a nil engine wrapped a tool")
		}
	})
}

// TestTruncation checks the 64 KB limit on each output stream.
func TestTruncation(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t,
		spec{Event: UserPromptSubmit, Command: "head -c 100000 /dev/zero | tr '\\0' a"},
		spec{Event: Stop, Command: "head -c 200000 /dev/zero | tr '\\0' b >&2; exit 2"},
		spec{Event: PreToolUse, Command: `printf '{"hookSpecificOutput":{"additionalContext":"'; head -c 70000 /dev/zero | tr '\0' c; printf '"}}'`},
	)}, Options{})
	v, err := e.UserPromptSubmit(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Context) != OutputLimit || strings.Trim(v.Context, "a") != "" || !v.Runs[0].Truncated {
		t.Errorf("stdout: context of %d bytes, truncated %v", len(v.Context), v.Runs[0].Truncated)
	}
	v, err = e.Stop(t.Context(), StopInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Reason) != OutputLimit || !v.Runs[0].Truncated {
		t.Errorf("stderr: reason of %d bytes, truncated %v", len(v.Reason), v.Runs[0].Truncated)
	}
	v, err = e.PreToolUse(t.Context(), "bash", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Blocked() || !strings.HasPrefix(v.Runs[0].Failed, "invalid JSON output") {
		t.Errorf("a verdict cut by the limit: %+v", v.Runs)
	}
}

// TestTimeout checks that a hook past its timeout is torn down with its
// whole process group and counts as a failure.
func TestTimeout(t *testing.T) {
	t.Parallel()
	for _, format := range []Format{FormatTOML, FormatYAML} {
		t.Run(string(format), func(t *testing.T) {
			t.Parallel()
			ws := newWorkspace(t)
			pids := t.TempDir()
			cmd := "sleep 60 & echo $! > " + pids + "/bg; echo $$ > " + pids + "/fg; trap '' TERM; sleep 60"
			files := map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: cmd, Timeout: 1})}
			if format == FormatYAML {
				files = map[string]string{"hooks/a.yaml": yamlFile(t, spec{Event: PreToolUse, Command: cmd, Timeout: 0.5, OnFailure: "block"})}
			}
			e := ws.engine(t, files, Options{})
			v, err := e.PreToolUse(t.Context(), "bash", nil)
			if err != nil {
				t.Fatal(err)
			}
			run := v.Runs[0]
			if !strings.HasPrefix(run.Failed, "timed out after") {
				t.Errorf("run %+v", run)
			}
			if v.Blocked() != (format == FormatYAML) {
				t.Errorf("blocked %v with %s: %+v", v.Blocked(), format, v)
			}
			for _, name := range []string{"fg", "bg"} {
				b, err := os.ReadFile(filepath.Join(pids, name))
				if err != nil {
					t.Fatal(err)
				}
				pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatal(err)
				}
				if !testenv.Poll(5*time.Second, func() bool { return !testenv.Alive(pid) }) {
					t.Errorf("%s process %d outlived the hook's timeout", name, pid)
				}
			}
			if ps, err := ws.exec.List(t.Context()); err != nil || len(ps) > 0 {
				t.Errorf("process groups left: %+v, %v", ps, err)
			}
		})
	}
}

// TestCancel checks that ending the caller's context stops the hooks and
// is an error, not a verdict.
func TestCancel(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	pid := filepath.Join(t.TempDir(), "pid")
	e := ws.engine(t, map[string]string{"hooks.toml": tomlFile(t, spec{Event: Stop, Command: "echo $$ > " + pid + "; sleep 60"})}, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		testenv.Poll(10*time.Second, func() bool { _, err := os.Stat(pid); return err == nil })
		cancel()
	}()
	_, err := e.Stop(ctx, StopInput{})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("error %v, want the context's", err)
	}
	if !testenv.Poll(5*time.Second, func() bool { ps, _ := ws.exec.List(t.Context()); return len(ps) == 0 }) {
		t.Error("the hook's group outlived the cancel")
	}
	tool := &echoTool{name: "bash"}
	e = ws.engine(t, map[string]string{"hooks.toml": tomlFile(t, spec{Event: PreToolUse, Command: "true"})}, Options{})
	done, stop := context.WithCancel(t.Context())
	stop()
	if res := Wrap(tool, e).Run(done, nil); !res.IsError || len(tool.ran()) != 0 {
		t.Errorf("a cancelled call ran the tool: %+v", res)
	}
}

// TestEnvironment checks what a hook's environment holds: the
// allow-listed variables, no secrets, and its source's extra variables.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	out := filepath.Join(t.TempDir(), "env")
	pluginDir := t.TempDir()
	var node yamlNode
	parseNode(t, &node, yamlFile(t, spec{Event: SessionStart, Command: "env > " + out}))
	src := Source{
		Layer: layer.Layer{Name: "plugins", Dir: pluginDir, Kind: layer.KindHome},
		File:  filepath.Join(pluginDir, ".aerie-plugin/plugin.yaml"), Dir: pluginDir, Root: pluginDir, Confined: true,
		Env: []string{"AERIE_PLUGIN_ROOT=" + pluginDir},
	}
	hooks, probs := DecodeYAMLEvents(node.Content[0].Content[1], "hooks", src, ws.dir)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	e := New(ws.exec, hooks, Options{
		Dir:     ws.dir,
		Environ: []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/u", "ANTHROPIC_API_KEY=sk-secret", "AERIE_DATABASE_URL=postgres://x", "GOFLAGS=-mod=mod", "DEBUG=1"},
		Pass:    []string{"GOFLAGS"},
	})
	if _, err := e.SessionStart(t.Context(), "startup"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, want := range []string{"HOME=/home/u\n", "GOFLAGS=-mod=mod\n", "AERIE_PLUGIN_ROOT=" + pluginDir + "\n", "PWD=" + ws.dir + "\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("environment lacks %q:\n%s", want, env)
		}
	}
	for _, secret := range []string{"sk-secret", "postgres://", "DEBUG="} {
		if strings.Contains(env, secret) {
			t.Errorf("environment holds %q:\n%s", secret, env)
		}
	}
}

// TestConcurrentCalls runs wrapped calls in parallel, for the race
// detector.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	rec := &recorder{}
	e := ws.engine(t, map[string]string{"hooks/a.yaml": yamlFile(t,
		spec{Event: PreToolUse, Command: `echo '{"hookSpecificOutput":{"updatedInput":{"n":1}}}'`},
		spec{Event: PostToolUse, Command: "echo post"},
	)}, Options{Observe: rec.observe})
	tool := &echoTool{name: "bash"}
	w := Wrap(tool, e)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if res := w.Run(t.Context(), json.RawMessage(`{}`)); res.IsError {
				t.Errorf("result %+v", res)
			}
		})
	}
	wg.Wait()
	if n := len(tool.ran()); n != 8 {
		t.Errorf("%d calls ran, want 8", n)
	}
	if n := len(rec.all()); n != 16 {
		t.Errorf("%d verdicts observed, want 16", n)
	}
}
