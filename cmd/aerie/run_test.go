package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/store"
)

// asMainEnv makes the test binary run aerie's main instead of the tests,
// so that end-to-end tests run `aerie` as a real process, with real
// signals, without building it separately.
const asMainEnv = "AERIE_TEST_RUN_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// e2e is a workspace and a home for end-to-end runs of the aerie process.
type e2e struct {
	t     *testing.T
	ws    string // the workspace and current directory
	home  string // $AERIE_HOME
	model *testenv.ModelServer
	env   []string
}

func newE2E(t *testing.T, turns ...testenv.Turn) *e2e {
	t.Helper()
	e := &e2e{t: t, ws: t.TempDir(), home: t.TempDir(), model: testenv.StartModelServer(t, turns...)}
	e.env = []string{
		asMainEnv + "=1",
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + e.home,
		"AERIE_HOME=" + e.home,
		"ANTHROPIC_API_KEY=sk-ant-test-secret-value",
	}
	return e
}

// command returns the aerie process for args, with the fake model server
// as its Anthropic endpoint.
func (e *e2e) command(args ...string) *exec.Cmd {
	if len(args) > 0 && args[0] == "run" {
		args = append([]string{"run", "--provider", "anthropic", "--model", "claude-sonnet-4-5", "--base-url", e.model.URL()}, args[1:]...)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = e.ws
	cmd.Env = e.env
	return cmd
}

type runOutput struct {
	stdout, stderr string
	code           int
	events         []agent.Event
}

// run runs aerie to its end.
func (e *e2e) run(args ...string) runOutput {
	e.t.Helper()
	cmd := e.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return e.output(cmd, err, stdout.String(), stderr.String())
}

func (e *e2e) output(cmd *exec.Cmd, err error, stdout, stderr string) runOutput {
	e.t.Helper()
	out := runOutput{stdout: stdout, stderr: stderr}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		out.code = exit.ExitCode()
	case err != nil:
		e.t.Fatalf("run aerie: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev agent.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatalf("stdout line is not a JSON event: %v\n%s", err, sc.Text())
		}
		out.events = append(out.events, ev)
	}
	return out
}

// end returns the session_end event.
func (o runOutput) end(t *testing.T) agent.Event {
	t.Helper()
	for _, ev := range o.events {
		if ev.Type == agent.EventSessionEnd {
			return ev
		}
	}
	t.Fatalf("no session_end event; stderr:\n%s", o.stderr)
	return agent.Event{}
}

// store opens the session database the runs used.
func (e *e2e) store() *store.SQLite {
	e.t.Helper()
	st, err := store.OpenSQLite(e.t.Context(), filepath.Join(e.home, "sessions.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// entries returns the stored stream of the session with the given id.
func (e *e2e) entries(id string) []store.Entry {
	e.t.Helper()
	es, err := e.store().Entries(e.t.Context(), e.ws, uuidOf(e.t, id))
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

func kinds(es []store.Entry) map[store.EntryKind]int {
	n := map[store.EntryKind]int{}
	for _, e := range es {
		n[e.Kind()]++
	}
	return n
}

// anthropicRequest is what the tests read of a Messages API request.
type anthropicRequest struct {
	Model    string `json:"model"`
	System   any    `json:"system"`
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
			Content   json.RawMessage `json:"content"`
			Name      string          `json:"name"`
		} `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type toolResult struct {
	text    string
	isError bool
}

// toolResults returns the tool results of a request's last message, by call id.
func toolResults(t *testing.T, req testenv.ModelRequest) map[string]toolResult {
	t.Helper()
	var r anthropicRequest
	if err := req.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) == 0 {
		t.Fatal("request without messages")
	}
	res := map[string]toolResult{}
	for _, c := range r.Messages[len(r.Messages)-1].Content {
		if c.Type != "tool_result" {
			continue
		}
		var text string
		var blocks []struct{ Text string }
		if json.Unmarshal(c.Content, &blocks) == nil {
			for _, b := range blocks {
				text += b.Text
			}
		} else {
			_ = json.Unmarshal(c.Content, &text)
		}
		res[c.ToolUseID] = toolResult{text: text, isError: c.IsError}
	}
	return res
}

func call(id, name string, args any) testenv.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return testenv.ToolCall{ID: id, Name: name, Arguments: string(b)}
}

func toolTurn(calls ...testenv.ToolCall) testenv.Turn {
	return testenv.Turn{ToolCalls: calls, Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 10}}
}

func answer(text string) testenv.Turn {
	return testenv.Turn{Text: text, Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}}
}

// TestRunEveryBuiltinTool drives a session through every built-in tool and
// checks what each returned to the model, what happened in the workspace
// and what was journaled.
func TestRunEveryBuiltinTool(t *testing.T) {
	t.Parallel()
	var bgID string
	e := newE2E(t,
		toolTurn(
			call("w", "write_file", map[string]any{"path": "src/notes.txt", "content": "alpha\nbeta\n"}),
			call("r", "read_file", map[string]any{"path": "src/notes.txt"}),
		),
		toolTurn(
			call("e", "edit_file", map[string]any{"path": "src/notes.txt", "old_string": "beta", "new_string": "gamma"}),
			call("p", "apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: src/added.go\n+package src\n*** End Patch"}),
		),
		toolTurn(
			call("l", "list_directory", map[string]any{"path": "src"}),
			call("t", "tree", map[string]any{}),
			call("f", "find_files", map[string]any{"pattern": "*.go"}),
			call("g", "grep", map[string]any{"pattern": "gamma"}),
			call("b", "bash", map[string]any{"command": "env; echo exit-check; false", "validation": true}),
		),
		toolTurn(call("bg", "bash", map[string]any{"command": "read line; echo got:$line; sleep 300", "background": true})),
		testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn {
			res := toolResults(t, req)["bg"]
			bgID = backgroundID(res.text)
			if bgID == "" {
				t.Errorf("bash background result has no process id: %q", res.text)
			}
			return toolTurn(
				call("pl", "process", map[string]any{"action": "list"}),
				call("pw", "process", map[string]any{"action": "write", "id": bgID, "input": "ping"}),
			)
		}},
		testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			time.Sleep(300 * time.Millisecond) // let the process answer
			return toolTurn(call("pp", "process", map[string]any{"action": "poll", "id": bgID}))
		}},
		testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			return toolTurn(call("pk", "process", map[string]any{"action": "kill", "id": bgID}))
		}},
		answer("All tools worked."),
	)
	out := e.run("run", "exercise every tool")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	end := out.end(t)
	if end.Outcome != agent.Completed || end.Text != "All tools worked." || end.Turn != 8 {
		t.Errorf("session_end = %+v, want completed after 8 turns with the final answer", end)
	}

	got, err := os.ReadFile(filepath.Join(e.ws, "src/notes.txt"))
	if err != nil || string(got) != "alpha\ngamma\n" {
		t.Errorf("notes.txt = %q, %v; want the edited text", got, err)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "src/added.go")); err != nil {
		t.Errorf("apply_patch did not add the file: %v", err)
	}

	reqs := e.model.Requests()
	if len(reqs) != 8 {
		t.Fatalf("the model got %d requests, want 8", len(reqs))
	}
	checks := []struct {
		req     int
		id      string
		want    string
		isError bool
	}{
		{1, "r", "alpha", false},
		{2, "e", "", false},
		{2, "p", "src/added.go", false},
		{3, "l", "notes.txt", false},
		{3, "t", "added.go", false},
		{3, "f", "src/added.go", false},
		{3, "g", "src/notes.txt:2", false},
		{3, "b", "exit-check", true},
		{5, "pl", "read line", false},
		{6, "pp", "got:ping", false},
		{7, "pk", "", false},
	}
	for _, c := range checks {
		res, ok := toolResults(t, reqs[c.req])[c.id]
		if !ok {
			t.Errorf("request %d has no result for call %s", c.req+1, c.id)
			continue
		}
		if !strings.Contains(res.text, c.want) || res.isError != c.isError {
			t.Errorf("call %s: result %q (error %v), want it to contain %q (error %v)", c.id, res.text, res.isError, c.want, c.isError)
		}
	}
	if env := toolResults(t, reqs[3])["b"].text; strings.Contains(env, "sk-ant-test-secret-value") || strings.Contains(env, "ANTHROPIC_API_KEY") {
		t.Errorf("the model API key reached a tool's environment:\n%s", env)
	}

	es := e.entries(end.Session)
	k := kinds(es)
	if k[store.KindToolCall] != 14 || k[store.KindToolCompletion] != 14 || k[store.KindToolResult] != 14 {
		t.Errorf("journaled tool entries = %v, want 14 calls, results and completions", k)
	}
	if k[store.KindAssistantMessage] != 8 || k[store.KindUsage] != 8 || k[store.KindUserMessage] != 1 || k[store.KindCheckpoint] != 1 {
		t.Errorf("journaled entries = %v, want 8 assistant messages and usage snapshots, 1 user message, 1 checkpoint", k)
	}
	for i, en := range es {
		if en.Seq != int64(i+1) {
			t.Fatalf("entry %d has sequence number %d: the stream has a gap or is out of order", i, en.Seq)
		}
	}
	last := es[len(es)-1].Payload.(store.Checkpoint)
	if last.Outcome != "completed" || last.Turn != 8 {
		t.Errorf("final checkpoint = %+v", last)
	}
}

// backgroundID finds the process id in bash's background result.
func backgroundID(s string) string {
	const prefix = "started background process "
	s, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(s, "\n")
	return id
}

func uuidOf(t *testing.T, s string) uuid.UUID {
	t.Helper()
	u, err := uuid.Parse(s)
	if err != nil {
		t.Fatalf("session id %q: %v", s, err)
	}
	return u
}
