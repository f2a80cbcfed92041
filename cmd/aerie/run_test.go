package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/transcript"
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
	if os.Getenv(mcpServerEnv) == "stdio" {
		os.Exit(serveMCPStdio())
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
	events         []events.Event
}

// run runs aerie to its end.
func (e *e2e) run(args ...string) runOutput {
	e.t.Helper()
	cmd := e.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if len(args) > 0 && args[0] != "run" {
		return e.output(err, "", stderr.String(), stdout.String())
	}
	return e.output(err, stdout.String(), stderr.String())
}

// output collects how a run ended; stdout is parsed as JSON Lines events,
// and plain, if given, is standard output kept as it is.
func (e *e2e) output(err error, stdout, stderr string, plain ...string) runOutput {
	e.t.Helper()
	out := runOutput{stdout: stdout + strings.Join(plain, ""), stderr: stderr}
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
		var ev events.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatalf("stdout line is not a JSON event: %v\n%s", err, sc.Text())
		}
		out.events = append(out.events, ev)
	}
	return out
}

// end returns the session_end event.
func (o runOutput) end(t *testing.T) events.Event {
	t.Helper()
	for _, ev := range o.events {
		if ev.Type == events.SessionEnd {
			return ev
		}
	}
	t.Fatalf("no session_end event; stderr:\n%s", o.stderr)
	return events.Event{}
}

// store opens the session database the runs used.
func (e *e2e) store() *store.DB {
	e.t.Helper()
	st, err := sqlite.Open(e.t.Context(), filepath.Join(e.home, "sessions.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if err := st.Close(); err != nil {
			e.t.Error(err)
		}
	})
	return st
}

// entries returns the stored stream of the session with the given id.
func (e *e2e) entries(id string) []transcript.Entry {
	e.t.Helper()
	es, err := e.store().Entries(e.t.Context(), e.ws, uuidOf(e.t, id))
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

func kinds(es []transcript.Entry) map[transcript.EntryKind]int {
	n := map[transcript.EntryKind]int{}
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

// The fake model's script, in this package's short names.
var (
	call     = testenv.Call
	toolTurn = testenv.ToolTurn
	answer   = testenv.Answer
	bashTurn = testenv.BashTurn
	spawn    = testenv.Spawn
)

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
	if end.Outcome != transcript.OutcomeCompleted || end.Text != "All tools worked." || end.Turn != 8 {
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
	if k[transcript.KindToolCall] != 14 || k[transcript.KindToolCompletion] != 14 || k[transcript.KindToolResult] != 14 {
		t.Errorf("journaled tool entries = %v, want 14 calls, results and completions", k)
	}
	if k[transcript.KindAssistantMessage] != 8 || k[transcript.KindUsage] != 8 || k[transcript.KindUserMessage] != 1 || k[transcript.KindCheckpoint] != 1 {
		t.Errorf("journaled entries = %v, want 8 assistant messages and usage snapshots, 1 user message, 1 checkpoint", k)
	}
	for i, en := range es {
		if en.Seq != int64(i+1) {
			t.Fatalf("entry %d has sequence number %d: the stream has a gap or is out of order", i, en.Seq)
		}
	}
	last := es[len(es)-1].Payload.(transcript.Checkpoint)
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

// start starts aerie without waiting for it.
func (e *e2e) start(args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	e.t.Helper()
	cmd := e.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &stdout, &stderr
}

// waitLines waits until file has n lines and returns them.
func waitLines(t *testing.T, file string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		lines := strings.Fields(string(b))
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d lines after 30s, want %d", file, len(lines), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireGone fails unless every pid has left /proc: not running, and not
// even a zombie waiting to be reaped.
func requireGone(t *testing.T, pids []string) {
	t.Helper()
	for _, p := range pids {
		// The subreaper reaps asynchronously; give it a moment.
		deadline := time.Now().Add(30 * time.Second)
		for {
			stat, err := os.ReadFile("/proc/" + p + "/stat")
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("process %s outlived the session: %s", p, stat)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestRunSIGTERMDuringToolCall stops a session while a tool runs a command
// that left a grandchild holding its output pipe and a setsid child that
// ignores SIGTERM: aerie must end them all, record the cancel and exit 143.
func TestRunSIGTERMDuringToolCall(t *testing.T) {
	t.Parallel()
	script := `sh -c 'echo $$ >> pids; exec sleep 300' &
setsid sh -c 'trap "" TERM; echo $$ >> pids; sleep 300; sleep 300' &
echo $$ >> pids
sleep 300`
	e := newE2E(t, toolTurn(call("long", "bash", map[string]any{"command": script, "timeout": 600})), answer("never asked"))
	cmd, stdout, stderr := e.start("run", "run the long command")
	pids := waitLines(t, filepath.Join(e.ws, "pids"), 3)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	out := e.output(err, stdout.String(), stderr.String())
	if out.code != 143 {
		t.Fatalf("exit %d, want 143; stderr:\n%s", out.code, out.stderr)
	}
	requireGone(t, pids)

	end := out.end(t)
	if end.Outcome != transcript.OutcomeCancelled {
		t.Errorf("outcome %q, want cancelled", end.Outcome)
	}
	var completion *transcript.ToolCompletion
	es := e.entries(end.Session)
	for _, en := range es {
		if c, ok := en.Payload.(transcript.ToolCompletion); ok {
			completion = &c
		}
	}
	if completion == nil || completion.Status != transcript.ToolCancelled {
		t.Errorf("tool completion = %+v, want status cancelled", completion)
	}
	if cp, ok := es[len(es)-1].Payload.(transcript.Checkpoint); !ok || cp.Outcome != "cancelled" {
		t.Errorf("last entry = %#v, want a cancelled checkpoint", es[len(es)-1].Payload)
	}
	sess, err := e.store().Session(t.Context(), e.ws, uuidOf(t, end.Session))
	if err != nil || sess.State != store.StateCancelled {
		t.Errorf("session state = %q, %v; want cancelled", sess.State, err)
	}
	if len(e.model.Requests()) != 1 {
		t.Errorf("the model got %d requests after the cancel, want none", len(e.model.Requests())-1)
	}
}

// TestRunResumeAndFork continues a stored session and branches it, each with
// the whole earlier conversation sent to the model.
func TestRunResumeAndFork(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("first answer"), answer("second answer"), answer("forked answer"))
	first := e.run("run", "first task")
	if first.code != 0 {
		t.Fatalf("first run: exit %d\n%s", first.code, first.stderr)
	}
	id := first.end(t).Session

	second := e.run("run", "--resume", id[:8], "second task")
	if second.code != 0 {
		t.Fatalf("resume: exit %d\n%s", second.code, second.stderr)
	}
	if got := second.end(t).Session; got != id {
		t.Errorf("resume ran session %s, want %s", got, id)
	}
	var req anthropicRequest
	if err := e.model.Requests()[1].Decode(&req); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range req.Messages {
		for _, c := range m.Content {
			texts = append(texts, m.Role+":"+c.Text)
		}
	}
	want := "user:first task|assistant:first answer|user:second task"
	if strings.Join(texts, "|") != want {
		t.Errorf("the resumed request sent %q, want %q", strings.Join(texts, "|"), want)
	}
	es := e.entries(id)
	if len(es) != 10 || es[len(es)-1].Seq != 10 || es[0].Kind() != transcript.KindLayers || es[5].Kind() != transcript.KindLayers {
		t.Errorf("the resumed session has %d entries, want 10 (two runs of layers, user, assistant, usage, checkpoint)", len(es))
	}

	fork := e.run("run", "--fork-from", id, "--model", "claude-opus-4-1", "third task")
	if fork.code != 0 {
		t.Fatalf("fork: exit %d\n%s", fork.code, fork.stderr)
	}
	child := fork.end(t).Session
	if child == id {
		t.Fatal("the fork ran in the source session")
	}
	st := e.store()
	sess, err := st.Session(t.Context(), e.ws, uuidOf(t, child))
	if err != nil {
		t.Fatal(err)
	}
	if sess.ParentID.String() != id {
		t.Errorf("fork parent = %s, want %s", sess.ParentID, id)
	}
	if err := e.model.Requests()[2].Decode(&req); err != nil {
		t.Fatal(err)
	}
	if len(req.Messages) != 5 || req.Model != "claude-opus-4-1" {
		t.Errorf("the forked request sent %d messages to %s, want 5 to claude-opus-4-1", len(req.Messages), req.Model)
	}
	_, snap, err := st.Load(t.Context(), e.ws, uuidOf(t, child))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Settings.Model != "claude-opus-4-1" || snap.Settings.Provider != "anthropic" {
		t.Errorf("the fork's settings = %+v, want the model change recorded", snap.Settings)
	}
	if len(e.entries(id)) != 10 {
		t.Error("the fork changed its source")
	}
}

// TestRunExitCodes checks the outcomes a CI job tells apart.
func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	forever := func() testenv.Turn {
		return toolTurn(call("", "bash", map[string]any{"command": "true"}))
	}
	tests := []struct {
		name    string
		turns   []testenv.Turn
		args    []string
		code    int
		outcome transcript.Outcome
		stderr  string
	}{
		{
			name:    "turn budget",
			turns:   []testenv.Turn{forever(), forever(), forever()},
			args:    []string{"run", "--max-turns", "2", "loop"},
			code:    4,
			outcome: transcript.OutcomeBudgetExceeded,
			stderr:  "turn budget of 2",
		},
		{
			name:    "token budget",
			turns:   []testenv.Turn{forever(), forever(), forever()},
			args:    []string{"run", "--max-tokens", "200", "loop"},
			code:    4,
			outcome: transcript.OutcomeBudgetExceeded,
			stderr:  "token budget of 200",
		},
		{
			name:    "time budget during a tool",
			turns:   []testenv.Turn{toolTurn(call("", "bash", map[string]any{"command": "sleep 60"}))},
			args:    []string{"run", "--max-duration", "1s", "wait"},
			code:    4,
			outcome: transcript.OutcomeDeadlineExceeded,
		},
		{
			name:    "rate limited, then an answer",
			turns:   []testenv.Turn{{Text: "fine", Faults: []testenv.Fault{{Status: 429, Header: map[string][]string{"Retry-After": {"0"}}}}}},
			args:    []string{"run", "hello"},
			code:    0,
			outcome: transcript.OutcomeCompleted,
		},
		{
			name:    "API error",
			turns:   []testenv.Turn{{Text: "unreachable", Faults: []testenv.Fault{{Status: 400, Message: "bad request from the test"}}}},
			args:    []string{"run", "hello"},
			code:    3,
			outcome: transcript.OutcomeModelError,
			stderr:  "bad request from the test",
		},
		{
			name:    "refusal",
			turns:   []testenv.Turn{{Text: "no", StopReason: "refusal"}},
			args:    []string{"run", "hello"},
			code:    3,
			outcome: transcript.OutcomeModelError,
			stderr:  "refused",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, tt.turns...)
			out := e.run(tt.args...)
			if out.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", out.code, tt.code, out.stderr)
			}
			if end := out.end(t); end.Outcome != tt.outcome || end.ExitCode == nil || *end.ExitCode != tt.code {
				t.Errorf("session_end = %+v, want outcome %s and exit code %d", end, tt.outcome, tt.code)
			}
			if !strings.Contains(out.stderr, tt.stderr) {
				t.Errorf("stderr %q does not say %q", out.stderr, tt.stderr)
			}
		})
	}
}

// TestRunMalformedToolCalls returns bad arguments and unknown tools to the
// model as tool errors, and the session goes on.
func TestRunMalformedToolCalls(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(
			testenv.ToolCall{ID: "bad", Name: "read_file", Arguments: `{"path": "x.txt"`},
			testenv.ToolCall{ID: "unknown", Name: "teleport", Arguments: `{}`},
			testenv.ToolCall{ID: "extra", Name: "read_file", Arguments: `{"path": "x.txt", "color": "red"}`},
		),
		answer("recovered"),
	)
	out := e.run("run", "try")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	res := toolResults(t, e.model.Requests()[1])
	for id, want := range map[string]string{"bad": "not valid JSON", "unknown": `unknown tool "teleport"`, "extra": "color"} {
		if r := res[id]; !r.isError || !strings.Contains(r.text, want) {
			t.Errorf("call %s: result %+v, want an error saying %q", id, r, want)
		}
	}
	// The malformed call is stored as the model wrote it.
	for _, en := range e.entries(out.end(t).Session) {
		if c, ok := en.Payload.(transcript.ToolCall); ok && c.CallID == "bad" && string(c.Input) != `"{\"path\": \"x.txt\""` {
			t.Errorf("stored malformed arguments = %s", c.Input)
		}
	}
}

// TestRunConfigErrors exits 2, before any model request, for mistakes of
// the caller.
func TestRunConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		env    []string
		stdin  string
		stderr string
	}{
		{name: "unknown session", args: []string{"run", "--resume", "nosuch", "go on"}, stderr: "session not found"},
		{name: "resume and fork", args: []string{"run", "--resume", "a", "--fork-from", "b", "x"}, stderr: "exclusive"},
		{name: "negative budget", args: []string{"run", "--max-turns", "-1", "x"}, stderr: "--max-turns -1"},
		{name: "zero context window", args: []string{"run", "--context-window", "0", "x"}, stderr: "--context-window 0: want a positive number of tokens"},
		{name: "negative context window", args: []string{"run", "--context-window", "-5", "x"}, stderr: "--context-window -5"},
		{name: "context window not a number", args: []string{"run", "--context-window", "200k", "x"}, stderr: `"--context-window"`},
		{name: "unknown flag", args: []string{"run", "--colour", "x"}, stderr: "unknown flag"},
		{name: "no prompt", args: []string{"run"}, stdin: "  \n", stderr: "no prompt"},
		{name: "no credentials", args: []string{"run", "x"}, env: []string{"ANTHROPIC_API_KEY="}, stderr: "ANTHROPIC_API_KEY"},
		{name: "unknown provider", args: []string{"run", "--provider", "acme", "x"}, stderr: "acme"},
		{name: "no script", args: []string{"run", "--provider", "scripted", "--model", "demo", "x"}, stderr: "scripted/demo.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			e.env = append(e.env, tt.env...)
			cmd := e.command(tt.args...)
			if len(tt.args) > 1 && tt.args[1] == "--provider" {
				cmd = exec.Command(os.Args[0], tt.args...)
				cmd.Dir, cmd.Env = e.ws, e.env
			}
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			out := e.output(cmd.Run(), stdout.String(), stderr.String())
			if out.code != 2 || !strings.Contains(out.stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want 2 and a message about %q", out.code, out.stderr, tt.stderr)
			}
			if n := len(e.model.Requests()); n != 0 {
				t.Errorf("the model got %d requests", n)
			}
		})
	}
}

// TestRunStoreUnavailable: a session database that cannot be opened fails
// the run with exit status 1 and says which database, whether or not the
// first model request has gone out (the database opens meanwhile); the
// model's tool call is not run.
func TestRunStoreUnavailable(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"run", "write it"}, {"run", "--resume", "last", "go on"}} {
		t.Run(args[1], func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, toolTurn(call("w", "write_file", map[string]any{"path": "a.txt", "content": "x"})), answer("wrote it"))
			notDir := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(notDir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			writeConfig(t, e.home, fmt.Sprintf("database_url = %q\n", "sqlite:"+filepath.Join(notDir, "sessions.db")))
			out := e.run(args...)
			if out.code != 1 || !strings.Contains(out.stderr, "open session database") {
				t.Fatalf("exit %d, stderr %q; want 1 and the database that did not open", out.code, out.stderr)
			}
			if _, err := os.Stat(filepath.Join(e.ws, "a.txt")); err == nil {
				t.Error("the model's tool call ran without a session database")
			}
			// A new session had started: its end says how.
			if args[1] != "--resume" {
				if end := out.end(t); end.Outcome != transcript.OutcomeFailed || end.ExitCode == nil || *end.ExitCode != 1 || !strings.Contains(end.Reason, "open session database") {
					t.Errorf("session_end = %+v, want failed, exit code 1 and the database's error", end)
				}
			}
		})
	}
}

// TestRunPromptFromStdin reads the task from standard input.
func TestRunPromptFromStdin(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("ok"))
	cmd := e.command("run")
	cmd.Stdin = strings.NewReader("the task from a pipe\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	out := e.output(cmd.Run(), stdout.String(), stderr.String())
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	var req anthropicRequest
	if err := e.model.Requests()[0].Decode(&req); err != nil {
		t.Fatal(err)
	}
	if got := req.Messages[0].Content[0].Text; got != "the task from a pipe" {
		t.Errorf("prompt = %q", got)
	}
}

// TestRunPreservesBackgroundProcesses leaves a background group running
// after a completed session, recorded for aerie process, and ends it after a
// spent budget.
func TestRunPreservesBackgroundProcesses(t *testing.T) {
	t.Parallel()
	start := toolTurn(call("bg", "bash", map[string]any{"command": "echo $$ > bg.pid; exec sleep 300", "background": true}))
	e := newE2E(t, start, answer("left a server running"))
	out := e.run("run", "start a server")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	pid := waitLines(t, filepath.Join(e.ws, "bg.pid"), 1)
	if _, err := os.Stat("/proc/" + pid[0]); err != nil {
		t.Fatalf("the background process did not outlive the session: %v", err)
	}
	if !strings.Contains(out.stderr, "aerie process terminate") {
		t.Errorf("stderr does not tell how to end the process:\n%s", out.stderr)
	}

	list := e.run("process", "list", "--json")
	var listed struct {
		Processes []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Record struct {
				PID   int    `json:"pid"`
				Owner string `json:"owner"`
			} `json:"record"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(list.stdout), &listed); err != nil {
		t.Fatalf("process list --json: %v\n%s", err, list.stdout)
	}
	if len(listed.Processes) != 1 || listed.Processes[0].Status != "running" || strconv.Itoa(listed.Processes[0].Record.PID) != pid[0] || listed.Processes[0].Record.Owner != out.end(t).Session {
		t.Fatalf("process list = %+v, want the running background group of the session", listed)
	}
	if term := e.run("process", "terminate", listed.Processes[0].ID); term.code != 0 {
		t.Fatalf("terminate: exit %d\n%s", term.code, term.stderr)
	}
	requireGone(t, pid)

	// After a spent budget the group is ended with the session.
	waitPID := toolTurn(call("w", "bash", map[string]any{"command": "while [ ! -s bg.pid ]; do sleep 0.05; done"}))
	e2 := newE2E(t, start, waitPID, answer("never asked"))
	out = e2.run("run", "--max-turns", "2", "start a server")
	if out.code != 4 {
		t.Fatalf("exit %d, want 4\n%s", out.code, out.stderr)
	}
	requireGone(t, waitLines(t, filepath.Join(e2.ws, "bg.pid"), 1))
	if entries, _ := os.ReadDir(filepath.Join(e2.home, "processes")); len(entries) != 0 {
		t.Errorf("records left after a spent budget: %v", entries)
	}
}

// TestRunATIF writes the trajectory at the end, with the system prompt's
// digest unless asked for the text, and only warns when it cannot.
func TestRunATIF(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(call("c", "bash", map[string]any{"command": "seq 1 20000"})), answer("counted"))
	path := filepath.Join(e.ws, "out", "trajectory.json")
	out := e.run("run", "--atif-output", path, "count")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var traj struct {
		SchemaVersion string `json:"schema_version"`
		SessionID     string `json:"session_id"`
		Steps         []struct {
			Source  string `json:"source"`
			Message string `json:"message"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &traj); err != nil {
		t.Fatal(err)
	}
	if traj.SchemaVersion != "ATIF-v1.7" || traj.SessionID != out.end(t).Session || len(traj.Steps) < 4 {
		t.Errorf("trajectory: version %q, session %q, %d steps", traj.SchemaVersion, traj.SessionID, len(traj.Steps))
	}
	if strings.Contains(string(b), "You are aerie") {
		t.Error("the trajectory holds the system prompt without --atif-system-prompt-plaintext")
	}
	// The capped output was spilled beside the trajectory.
	raw, err := os.ReadDir(filepath.Join(e.ws, "out", "raw"))
	if err != nil || len(raw) != 1 {
		t.Errorf("raw sidecars = %v, %v; want the full output of the capped call", raw, err)
	}

	e2 := newE2E(t, answer("done"))
	out = e2.run("run", "--atif-output", path, "--atif-system-prompt-plaintext", "x")
	if b, _ := os.ReadFile(path); out.code != 0 || !strings.Contains(string(b), "You are aerie") {
		t.Errorf("exit %d; the trajectory does not hold the system prompt with --atif-system-prompt-plaintext", out.code)
	}

	e3 := newE2E(t, answer("done"))
	blocker := filepath.Join(e3.ws, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out = e3.run("run", "--atif-output", filepath.Join(blocker, "t.json"), "x")
	if out.code != 0 || !strings.Contains(out.stderr, "ATIF") {
		t.Errorf("an unwritable trajectory: exit %d, stderr %q; want 0 and a warning", out.code, out.stderr)
	}
}

// TestRunOpenAIWireFormats runs a tool-using session over each OpenAI wire
// API, as the openai and openai-compatible providers speak them.
func TestRunOpenAIWireFormats(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, provider, api, path string
	}{
		{"responses", "openai", "", "/v1/responses"},
		{"chat completions", "openai", "chat-completions", "/v1/chat/completions"},
		{"openai-compatible", "openai-compatible", "", "/v1/chat/completions"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, toolTurn(call("c", "bash", map[string]any{"command": "echo from-the-tool"})), answer("done"))
			e.env = append(e.env, "OPENAI_API_KEY=sk-openai-test")
			args := []string{"run", "--provider", tt.provider, "--model", "gpt-5", "--base-url", e.model.OpenAIURL()}
			if tt.api != "" {
				args = append(args, "--api", tt.api)
			}
			cmd := exec.Command(os.Args[0], append(args, "say it")...)
			cmd.Dir, cmd.Env = e.ws, e.env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			out := e.output(cmd.Run(), stdout.String(), stderr.String())
			if out.code != 0 {
				t.Fatalf("exit %d\n%s", out.code, out.stderr)
			}
			reqs := e.model.Requests()
			if len(reqs) != 2 || reqs[1].Path != tt.path {
				t.Fatalf("requests: %d, last to %s; want 2 to %s", len(reqs), reqs[len(reqs)-1].Path, tt.path)
			}
			if !strings.Contains(string(reqs[1].Body), "from-the-tool") {
				t.Errorf("the second request does not carry the tool's output:\n%s", reqs[1].Body)
			}
		})
	}
}
