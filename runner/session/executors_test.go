package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// mcpServerEnv, set to "stdio" in a child's environment, makes this test
// binary an MCP server on its standard input and output whose tool pwd
// says where it runs.
const mcpServerEnv = "AERIE_SESSION_TEST_MCP"

func serveMCPStdio() int {
	s := sdk.NewServer(&sdk.Implementation{Name: "where", Version: "1.0.0"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "pwd", Description: "Where the server runs."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			wd, err := os.Getwd()
			if err != nil {
				return nil, nil, err
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: wd}}}, nil, nil
		})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// recorded is a real Local executor that remembers the commands it
// started, to tell where a custom tool ran.
type recorded struct {
	*executor.Local
	mu   sync.Mutex
	argv [][]string
}

func (r *recorded) Start(ctx context.Context, c executor.Command) (executor.Process, error) {
	r.mu.Lock()
	r.argv = append(r.argv, c.Argv)
	r.mu.Unlock()
	return r.Local.Start(ctx, c)
}

func (r *recorded) ran(program string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.argv, func(a []string) bool { return len(a) > 0 && filepath.Base(a[0]) == program })
}

// twoExecutors is a session's setup with a default executor and one
// named tools, each a Local on a workspace of its own.
type twoExecutors struct {
	opts          Options
	st            Store
	main, tools   *recorded
	mainWS, tooWS string
	model         *testenv.ModelServer
}

func newTwoExecutors(t *testing.T, home map[string]string, turns ...testenv.Turn) *twoExecutors {
	t.Helper()
	st, err := dburl.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	x := &twoExecutors{st: st, mainWS: t.TempDir(), tooWS: t.TempDir()}
	testenv.WriteTree(t, x.mainWS, map[string]string{
		"who.txt": "main workspace\n", "sub/x.txt": "x\n", "sub/AGENTS.md": "Sub rules of the main workspace.\n",
	})
	testenv.WriteTree(t, x.tooWS, map[string]string{"who.txt": "tools workspace\n", "AGENTS.md": "Run the tests with make check here.\n"})
	for _, r := range []struct {
		to **recorded
		ws string
	}{{&x.main, x.mainWS}, {&x.tools, x.tooWS}} {
		l, err := executor.NewLocal(r.ws, executor.Options{Reaper: reaper, Grace: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		*r.to = &recorded{Local: l}
	}
	homeDir := t.TempDir()
	testenv.WriteTree(t, homeDir, home)
	x.model = testenv.StartModelServer(t, turns...)
	x.opts = Options{
		Session: Spec{Tenant: "t"}, Prompt: "work on both",
		Model: Model{
			Settings: transcript.Settings{Provider: provider.NameAnthropic, Model: "claude-sonnet-4-5"},
			New: func(s transcript.Settings) (agent.Model, error) {
				return anthropic.New(provider.Config{Provider: s.Provider, Model: s.Model, APIKey: "k", BaseURL: x.model.URL()})
			},
		},
		Extensions: LoadOptions{Dir: x.mainWS, Layers: []layer.Layer{{Name: "home", Dir: homeDir, Kind: layer.KindHome}}},
		Executor:   x.main,
		Executors:  []NamedExecutor{{Name: "tools", Executor: x.tools}},
	}
	return x
}

func bashOn(id, executorName, command string) testenv.ToolCall {
	args := map[string]any{"command": command}
	if executorName != "" {
		args["executor"] = executorName
	}
	b, _ := json.Marshal(args)
	return testenv.ToolCall{ID: id, Name: "bash", Arguments: string(b)}
}

// agentsReminders counts the reminders of the tools executor's AGENTS.md
// in a request.
func agentsReminders(t *testing.T, req testenv.ModelRequest) int {
	t.Helper()
	return strings.Count(string(req.Body), "Project instructions of executor tools, from AGENTS.md:")
}

// TestRunOnTwoExecutors runs a session with a second executor: bash, a
// custom tool and a stdio MCP server run where they are routed, their
// PreToolUse hooks with them; the second executor's AGENTS.md is added
// once, after the first call there, and not again after a resume.
func TestRunOnTwoExecutors(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := map[string]string{
		"hooks/pre.yaml":   "hooks:\n  PreToolUse:\n    - matcher: bash|where\n      hooks: [{type: command, command: 'cat >> pre-hook.jsonl; echo >> pre-hook.jsonl'}]\n",
		"tools/where.toml": "name = \"where\"\ndescription = \"Says where it runs.\"\ncommand = [\"./where.sh\"]\nexecutor = \"tools\"\n",
		"tools/where.sh":   "#!/bin/sh\necho custom tool ran\n",
		"mcp_servers/where.yaml": fmt.Sprintf("id: where\ntype: stdio\ncommand: %s\nenv: {%s: stdio}\nexecutors: [local, tools]\nrequired: true\n",
			exe, mcpServerEnv),
	}
	x := newTwoExecutors(t, home,
		testenv.Turn{ToolCalls: []testenv.ToolCall{
			bashOn("b1", "", "cat who.txt; pwd"), bashOn("b2", "tools", "cat who.txt; pwd"),
		}},
		testenv.Turn{ToolCalls: []testenv.ToolCall{
			{ID: "m1", Name: "mcp__where__pwd", Arguments: `{}`},
			{ID: "m2", Name: "mcp__where__pwd__tools", Arguments: `{}`},
			{ID: "c1", Name: "where", Arguments: `{}`},
			bashOn("b3", "tools", "true"),
			bashOn("b4", "gpu", "true"),
			{ID: "r1", Name: "read_file", Arguments: `{"path":"sub/x.txt"}`},
		}},
		testenv.Turn{Text: "done on both"},
		testenv.Turn{ToolCalls: []testenv.ToolCall{bashOn("b5", "tools", "cat who.txt")}},
		testenv.Turn{Text: "still both"},
	)
	if err := os.Chmod(filepath.Join(x.opts.Extensions.Layers[0].Dir, "tools/where.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), x.st, x.opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != 0 {
		t.Fatalf("exit %d: %s", rep.ExitCode, rep.Result.Reason)
	}
	reqs := x.model.Requests()
	results := map[string]string{
		"b1": lastToolResult(t, reqs[1], "b1"), "b2": lastToolResult(t, reqs[1], "b2"),
		"m1": lastToolResult(t, reqs[2], "m1"), "m2": lastToolResult(t, reqs[2], "m2"),
		"c1": lastToolResult(t, reqs[2], "c1"), "b3": lastToolResult(t, reqs[2], "b3"), "b4": lastToolResult(t, reqs[2], "b4"),
	}
	for id, want := range map[string]string{
		"b1": "main workspace\n" + x.mainWS, "b2": "tools workspace\n" + x.tooWS,
		"m1": x.mainWS, "m2": x.tooWS, "c1": "custom tool ran",
		"b4": `bash: unknown executor "gpu": use one of workspace, tools (the default is workspace)`,
	} {
		if !strings.Contains(results[id], want) {
			t.Errorf("result of %s:\n%s\nwant it to hold %q", id, results[id], want)
		}
	}
	if r1 := lastToolResult(t, reqs[2], "r1"); !strings.Contains(r1, "Sub rules of the main workspace.") {
		t.Errorf("the default's instructions below the working directory do not follow read_file:\n%s", r1)
	}
	if !strings.Contains(results["b2"], "Run the tests with make check here.") || agentsReminders(t, reqs[2]) != 1 {
		t.Errorf("the tools executor's AGENTS.md is not added once after its first call:\n%s", results["b2"])
	}
	if strings.Contains(results["b1"], "make check") {
		t.Error("the tools executor's AGENTS.md follows a call on the default")
	}
	if !x.tools.ran("where.sh") || x.main.ran("where.sh") {
		t.Error("the custom tool did not run on tools alone")
	}
	// The hooks of the calls on tools ran there, those of the default's
	// (b1, and b4, which names no executor the session has) on it.
	for ws, want := range map[string]int{x.mainWS: 2, x.tooWS: 3} {
		b, err := os.ReadFile(filepath.Join(ws, "pre-hook.jsonl"))
		if err != nil {
			t.Fatalf("no hook ran in %s: %v", ws, err)
		}
		if n := strings.Count(string(b), `"hook_event_name":"PreToolUse"`); n != want {
			t.Errorf("%d PreToolUse hooks ran in %s, want %d:\n%s", n, ws, want, b)
		}
	}
	var schema string
	for _, d := range rep.Tools {
		if d.Name == "read_file" {
			schema = string(d.InputSchema)
		}
	}
	if !strings.Contains(schema, `"enum":["workspace","tools"]`) {
		t.Errorf("read_file schema %s lacks the executors enum", schema)
	}
	var reported bool
	for _, a := range rep.Extensions.Artifacts {
		reported = reported || a.Name == "where" && a.Executor == "tools" && a.Status == layer.StatusActive
	}
	if !reported {
		t.Error("the report does not show the custom tool's executor")
	}

	// A resume does not add the instructions again.
	x.opts.Session.Resume, x.opts.Prompt = rep.Session.ID.String(), "again"
	if rep, err = Run(t.Context(), x.st, x.opts); err != nil || rep.ExitCode != 0 {
		t.Fatalf("resume: %v, exit %d", err, rep.ExitCode)
	}
	reqs = x.model.Requests()
	last := reqs[len(reqs)-1]
	if got := lastToolResult(t, last, "b5"); strings.Contains(got, "make check") || agentsReminders(t, last) != 1 {
		t.Errorf("after the resume the instructions are in the request %d times; b5: %s", agentsReminders(t, last), got)
	}
}

// TestExecutorsRefused: bad executor names and a custom tool naming an
// executor the session does not have stop the launch, naming the fix.
func TestExecutorsRefused(t *testing.T) {
	t.Parallel()
	x := newTwoExecutors(t, map[string]string{
		"tools/gpu.toml": "name = \"gpu\"\ndescription = \"d\"\ncommand = [\"./gpu.sh\"]\nexecutor = \"gpu\"\n",
	})
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"unknown executor in a manifest", func(*Options) {}, `executor: "gpu" is not an executor of the session (workspace, tools)`},
		{"reserved name", func(o *Options) { o.Executors[0].Name = DefaultExecutor },
			`executors[0]: "workspace" is the default executor's name`},
		{"not a DNS label", func(o *Options) { o.Executors[0].Name = "GPU_1" }, `executors[0]: "GPU_1" is not a DNS label`},
		{"twice", func(o *Options) { o.Executors = append(o.Executors, o.Executors[0]) }, `executors[1]: "tools" is named twice`},
		{"calls default unknown", func(o *Options) { o.CallsDefault = "gpu" }, `the default of calls, "gpu", is none of the executors`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := x.opts
			opts.Executors = slices.Clone(opts.Executors)
			tt.mod(&opts)
			_, err := Run(t.Context(), x.st, opts)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want a ConfigError holding %q", err, tt.want)
			}
		})
	}
}

// TestCancelTearsDownEveryExecutor cancels a session while background
// processes run on both executors: nothing is left alive on either.
func TestCancelTearsDownEveryExecutor(t *testing.T) {
	t.Parallel()
	bg := func(id, on string) testenv.ToolCall {
		args := map[string]any{"command": "exec sleep 1000", "background": true}
		if on != "" {
			args["executor"] = on
		}
		b, _ := json.Marshal(args)
		return testenv.ToolCall{ID: id, Name: "bash", Arguments: string(b)}
	}
	x := newTwoExecutors(t, nil,
		testenv.Turn{ToolCalls: []testenv.ToolCall{bg("s1", ""), bg("s2", "tools")}},
		testenv.Turn{Text: "never", Delay: time.Minute},
	)
	ctx, cancel := context.WithCancelCause(t.Context())
	var pids []int
	go func() {
		testenv.Eventually(t, 20*time.Second, "a background process on each executor", func() bool {
			a, errA := x.main.List(ctx)
			b, errB := x.tools.List(ctx)
			if errA != nil || errB != nil || len(a) != 1 || len(b) != 1 {
				return false
			}
			pids = []int{a[0].PID, b[0].PID}
			return true
		})
		cancel(errors.New("stopped by the test"))
	}()
	rep, err := Run(ctx, x.st, x.opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result.Outcome != transcript.OutcomeCancelled || len(rep.Teardown) != 2 {
		t.Errorf("outcome %s, %d groups torn down, want cancelled and 2", rep.Result.Outcome, len(rep.Teardown))
	}
	for name, l := range map[string]*recorded{"workspace": x.main, "tools": x.tools} {
		if infos, err := l.List(t.Context()); err != nil || len(infos) != 0 {
			t.Errorf("%s still runs %+v (%v)", name, infos, err)
		}
	}
	for _, pid := range pids {
		if testenv.Alive(pid) {
			t.Errorf("process %d outlived the session", pid)
		}
	}
}

// TestExecutorDiesMidCall runs the second executor behind the executor
// protocol and stops its server while a command runs there: the model gets
// an error result naming the executor, and the session goes on to finish.
func TestExecutorDiesMidCall(t *testing.T) {
	t.Parallel()
	x := newTwoExecutors(t, nil,
		testenv.Turn{ToolCalls: []testenv.ToolCall{bashOn("b1", "tools", "touch started; exec sleep 1000")}},
		testenv.Turn{ToolCalls: []testenv.ToolCall{bashOn("b2", "", "cat who.txt")}},
		testenv.Turn{Text: "carried on without tools"},
	)
	sock := filepath.Join(t.TempDir(), "x.sock")
	ln, err := executor.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- executor.Serve(serveCtx, ln, x.tools.Local, executor.ServeOptions{}) }()
	remote, err := executor.Dial(t.Context(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Close(context.Background()) })
	x.opts.Executors = []NamedExecutor{{Name: "tools", Executor: remote}}
	go func() {
		testenv.Eventually(t, 20*time.Second, "the command on tools started", func() bool {
			_, err := os.Stat(filepath.Join(x.tooWS, "started"))
			return err == nil
		})
		stop()
	}()
	rep, err := Run(t.Context(), x.st, x.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Error(err)
	}
	if rep.ExitCode != 0 || rep.Result.Answer != "carried on without tools" {
		t.Fatalf("exit %d, answer %q: %s", rep.ExitCode, rep.Result.Answer, rep.Result.Reason)
	}
	reqs := x.model.Requests()
	if got := lastToolResult(t, reqs[1], "b1"); !strings.HasPrefix(got, "[executor tools]") || !strings.Contains(got, "bash: wait: executor connection lost") {
		t.Errorf("result of the call on the executor that died:\n%s", got)
	}
	if got := lastToolResult(t, reqs[2], "b2"); !strings.Contains(got, "main workspace") {
		t.Errorf("the default executor after the other died: %s", got)
	}
	if infos, err := x.tools.List(t.Context()); err != nil || len(infos) != 0 {
		t.Errorf("the dead executor's server left %+v (%v)", infos, err)
	}
}

// TestSubagentOnTwoExecutors: a subagent gets the session's executors,
// its calls routed as the root's, and what it started on the second
// executor ends with it.
func TestSubagentOnTwoExecutors(t *testing.T) {
	t.Parallel()
	x := newTwoExecutors(t, nil,
		testenv.ToolTurn(testenv.Spawn("s1", "child: work on tools")),
		testenv.Answer("root done"),
	)
	x.model.Conversation("child:",
		testenv.ToolTurn(
			bashOn("c1", "tools", "cat who.txt > seen-by-child.txt"),
			testenv.Call("c2", "bash", map[string]any{"command": "exec sleep 1000", "background": true, "executor": "tools"}),
		),
		testenv.Answer("child done"),
	)
	rep, err := Run(t.Context(), x.st, x.opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != 0 || rep.Subagents != 1 {
		t.Fatalf("exit %d, %d subagents: %s", rep.ExitCode, rep.Subagents, rep.Result.Reason)
	}
	if b, err := os.ReadFile(filepath.Join(x.tooWS, "seen-by-child.txt")); err != nil || string(b) != "tools workspace\n" {
		t.Errorf("the child's call on tools: %q, %v", b, err)
	}
	child := x.model.RequestsOf("child:")
	if len(child) != 2 || agentsReminders(t, child[1]) != 1 {
		t.Errorf("the tools executor's AGENTS.md is not in the child's conversation once")
	}
	if len(child) == 0 || !strings.Contains(string(child[0].Body), `"enum":["workspace","tools"]`) {
		t.Error("the child's tools do not offer the executors")
	}
	if infos, err := x.tools.List(t.Context()); err != nil || len(infos) != 0 {
		t.Errorf("the child's background process on tools outlived it: %+v (%v)", infos, err)
	}
}

// TestCallsDefault: a call that names no executor runs on CallsDefault;
// the default executor keeps its own table of background processes.
func TestCallsDefault(t *testing.T) {
	t.Parallel()
	newLocal := func() *executor.Local {
		l, err := executor.NewLocal(t.TempDir(), executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	def, tools1 := newLocal(), newLocal()
	bg := tools.NewBackground(def)
	for calls, want := range map[string][]string{
		"":      {DefaultExecutor, "tools"},
		"tools": {"tools", DefaultExecutor},
	} {
		x := Options{Executor: def, Executors: []NamedExecutor{{Name: "tools", Executor: tools1}}, CallsDefault: calls}.executors()
		ps := x.places(x.commands(), bg)
		var got []string
		for _, p := range ps {
			got = append(got, p.Name)
			if (p.Name == DefaultExecutor) != (p.Background == bg) {
				t.Errorf("calls %q: place %s has the default's background table: %t", calls, p.Name, p.Background == bg)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("calls %q: places %v, want %v", calls, got, want)
		}
	}
}
