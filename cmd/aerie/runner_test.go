package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/config"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/session"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// pod is a runner pod in miniature: a real executor serving a workspace
// on a unix socket (the workspace container), the fake model server, a
// session store and a runner configuration file.
type pod struct {
	t      *testing.T
	ws     string
	socket string
	dsn    string
	model  *testenv.ModelServer
	dir    string // holds the config and the termination log
}

func newPod(t *testing.T, dsn string, turns ...testenv.Turn) *pod {
	t.Helper()
	p := &pod{t: t, ws: t.TempDir(), dir: t.TempDir(), model: testenv.StartModelServer(t, turns...)}
	p.socket = filepath.Join(t.TempDir(), "executor.sock")
	if dsn == "" {
		dsn = "sqlite://" + filepath.Join(p.dir, "sessions.db")
	}
	p.dsn = dsn
	l, err := executor.NewLocal(p.ws, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := executor.Listen(p.socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- executor.Serve(ctx, ln, l, executor.ServeOptions{}) }()
	t.Cleanup(func() {
		if _, err := l.TeardownAll(context.Background()); err != nil {
			t.Errorf("executor teardown: %v", err)
		}
		cancel()
		if err := <-served; err != nil {
			t.Errorf("executor: %v", err)
		}
		_ = l.Close(context.Background())
	})
	return p
}

// config is a runner configuration for this pod, changed by change.
func (p *pod) config(change ...func(*runconfig.Config)) *runconfig.Config {
	c := &runconfig.Config{
		APIVersion: runconfig.APIVersion, Kind: runconfig.Kind,
		Namespace: "team-a", AgentSession: "fix-tests",
		Session:  runconfig.Session{ID: uuid.NewString(), Attempt: 1},
		Prompt:   "Fix the failing tests.",
		Model:    runconfig.Model{Provider: runconfig.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: p.model.URL()},
		Budget:   runconfig.Budget{MaxDuration: runconfig.Duration(time.Minute), MaxTurns: 10},
		Executor: runconfig.Executor{Socket: p.socket, Workspace: p.ws},
	}
	for _, ch := range change {
		ch(c)
	}
	return c
}

type runnerResult struct {
	code   int
	report runconfig.Report
	events []events.Event
	stderr string
}

// run runs aerie runner in-process with cfg, as the pod's agent container
// would, with the two secrets in its environment.
func (p *pod) run(ctx context.Context, cfg *runconfig.Config, extra ...string) runnerResult {
	p.t.Helper()
	data, err := cfg.Marshal()
	if err != nil {
		p.t.Fatal(err)
	}
	cfgPath := filepath.Join(p.dir, "config.yaml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return p.runFile(ctx, cfgPath, extra...)
}

func (p *pod) runFile(ctx context.Context, cfgPath string, extra ...string) runnerResult {
	p.t.Helper()
	termLog := filepath.Join(p.dir, "termination-log")
	_ = os.Remove(termLog)
	env := map[string]string{
		runconfig.DatabaseURLEnv: p.dsn,
		"ANTHROPIC_API_KEY":      "sk-ant-runner-secret",
		config.HomeEnv:           p.t.TempDir(),
	}
	a := &app{env: config.Env{Getenv: func(k string) string { return env[k] }, UserHomeDir: func() (string, error) { return p.dir, nil }}}
	var stdout, stderr bytes.Buffer
	cmd := newRootCmd(a)
	cmd.SetArgs(append([]string{"runner", "--config", cfgPath, "--termination-log", termLog}, extra...))
	cmd.SetIn(strings.NewReader(""))
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(ctx)
	res := runnerResult{code: exitCode(err), stderr: stderr.String()}
	b, rerr := os.ReadFile(termLog)
	if rerr != nil {
		p.t.Fatalf("no termination log: %v; stderr:\n%s", rerr, stderr.String())
	}
	if len(b) > runconfig.MaxReportBytes {
		p.t.Errorf("termination log is %d bytes, over the kubelet's %d", len(b), runconfig.MaxReportBytes)
	}
	if res.report, rerr = runconfig.DecodeReport(b); rerr != nil {
		p.t.Fatalf("termination log: %v:\n%s", rerr, b)
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev events.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			p.t.Fatalf("stdout line is not a JSON event: %v\n%s", err, sc.Text())
		}
		res.events = append(res.events, ev)
	}
	return res
}

func (p *pod) store() store.Store {
	p.t.Helper()
	st, err := dburl.Open(p.t.Context(), p.dsn)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() {
		if err := st.Close(); err != nil {
			p.t.Error(err)
		}
	})
	return st
}

// userMessages are the texts of the stored user messages of cfg's session.
func userMessages(t *testing.T, st store.Store, cfg *runconfig.Config) []string {
	t.Helper()
	es, err := st.Entries(t.Context(), cfg.Namespace, uuid.MustParse(cfg.Session.ID))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if m, ok := e.Payload.(transcript.UserMessage); ok {
			for _, b := range m.Content {
				if b.Type == transcript.BlockText {
					out = append(out, b.Text)
				}
			}
		}
	}
	return out
}

func TestRunnerCompletes(t *testing.T) {
	t.Parallel()
	testRunnerCompletes(t, "")
}

func TestRunnerCompletesPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)
	testRunnerCompletes(t, pg.NewDatabase(t))
}

func testRunnerCompletes(t *testing.T, dsn string) {
	p := newPod(t, dsn,
		toolTurn(call("c1", "bash", map[string]any{"command": "echo fixed > fix.txt; env"})),
		answer("Fixed the tests: fix.txt holds the fix."))
	cfg := p.config()
	res := p.run(t.Context(), cfg)
	if res.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	checkCost(t, &res.report.Usage)
	want := runconfig.Report{
		Outcome: runconfig.OutcomeCompleted, SessionID: cfg.Session.ID, Summary: "Fixed the tests: fix.txt holds the fix.",
		Usage: runconfig.Usage{InputTokens: 200, OutputTokens: 15, Requests: 2, ToolCalls: 1},
	}
	if diff := cmp.Diff(want, res.report); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// The tool ran in the executor's workspace, without the runner's secrets.
	if b, err := os.ReadFile(filepath.Join(p.ws, "fix.txt")); err != nil || string(b) != "fixed\n" {
		t.Errorf("fix.txt = %q, %v", b, err)
	}
	for _, req := range p.model.Requests() {
		for _, secret := range []string{"sk-ant-runner-secret", p.dsn} {
			if bytes.Contains(req.Body, []byte(secret)) {
				t.Errorf("a secret reached the model: %q", secret)
			}
		}
	}
	if got := res.events; len(got) == 0 || got[0].Type != events.SessionStart || got[len(got)-1].Type != events.SessionEnd {
		t.Errorf("events on stdout: %+v", got)
	}
	if !strings.Contains(res.stderr, `"msg":"session ended"`) {
		t.Errorf("no JSON log of the end on stderr:\n%s", res.stderr)
	}
	// Stored under the namespace, with the AgentSession's uid as its id
	// and its name as its label.
	st := p.store()
	sess, err := st.Session(t.Context(), "team-a", uuid.MustParse(cfg.Session.ID))
	if err != nil {
		t.Fatal(err)
	}
	if sess.Label != "fix-tests" || sess.State != store.StateCompleted {
		t.Errorf("stored session %+v", sess)
	}
}

func TestRunnerBudget(t *testing.T) {
	t.Parallel()
	p := newPod(t, "", toolTurn(call("c1", "bash", map[string]any{"command": "true"})), answer("never asked"))
	res := p.run(t.Context(), p.config(func(c *runconfig.Config) { c.Budget.MaxTurns = 1 }))
	if res.code != runconfig.ExitBudget || res.report.Outcome != runconfig.OutcomeBudgetExceeded || res.report.ExitCode != 4 {
		t.Fatalf("exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
	}
	if !strings.Contains(res.report.Reason, "turn budget") || res.report.Usage.ToolCalls != 1 {
		t.Errorf("report %+v", res.report)
	}
}

func TestRunnerConfigErrors(t *testing.T) {
	t.Parallel()
	p := newPod(t, "")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	good, err := p.config().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, bytes.Replace(good, []byte("provider: anthropic"), []byte("provider: gemini"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	res := p.runFile(t.Context(), bad)
	if res.code != runconfig.ExitConfig || res.report.Outcome != runconfig.OutcomeFailed || !strings.Contains(res.report.Reason, "model.provider") || !strings.Contains(res.report.Reason, bad) {
		t.Errorf("bad provider: exit %d, report %+v", res.code, res.report)
	}

	res = p.run(t.Context(), p.config(func(c *runconfig.Config) { c.Executor.WorkingDir = "services/billing" }))
	if res.code != runconfig.ExitConfig || !strings.Contains(res.report.Reason, `workspace.workingDir "services/billing"`) {
		t.Errorf("missing working dir: exit %d, report %+v", res.code, res.report)
	}

	res = p.run(t.Context(), p.config(func(c *runconfig.Config) { c.Executor.Socket = filepath.Join(dir, "none.sock") }), "--socket-wait", "300ms")
	if res.code != runconfig.ExitFailure || !strings.Contains(res.report.Reason, "did not appear within 300ms") {
		t.Errorf("no executor: exit %d, report %+v", res.code, res.report)
	}

	res = p.run(t.Context(), p.config(func(c *runconfig.Config) { c.Model.Provider, c.Model.Name = runconfig.ProviderScripted, "demo" }))
	if res.code != runconfig.ExitConfig || !strings.Contains(res.report.Reason, `no script for scripted model "demo"`) {
		t.Errorf("scripted without a script: exit %d, report %+v", res.code, res.report)
	}
}

// TestRunnerScriptedFromLayer finds the scripted provider's script in a
// layer, as a pod with the script in a layer ConfigMap would.
func TestRunnerScriptedFromLayer(t *testing.T) {
	t.Parallel()
	p := newPod(t, "")
	layer := t.TempDir()
	if err := os.MkdirAll(filepath.Join(layer, "scripted"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "turns:\n  - text: Scripted answer.\n"
	if err := os.WriteFile(filepath.Join(layer, "scripted", "demo.yaml"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	res := p.run(t.Context(), p.config(func(c *runconfig.Config) {
		c.Model = runconfig.Model{Provider: runconfig.ProviderScripted, Name: "demo"}
		c.Layers = []runconfig.Layer{{Name: "demo", Kind: runconfig.LayerSpec, Dir: layer}}
	}))
	if res.code != 0 || res.report.Summary != "Scripted answer." {
		t.Fatalf("exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
	}
}

// TestRunnerRetry is a second attempt after a lost pod: it continues the
// stored session without sending the task again, and starts it when the
// lost attempt never stored it.
func TestRunnerRetry(t *testing.T) {
	t.Parallel()
	p := newPod(t, "", answer("first attempt's answer"), answer("second attempt's answer"), answer("fresh start"))
	cfg := p.config()
	if res := p.run(t.Context(), cfg); res.code != 0 {
		t.Fatalf("attempt 1: exit %d; stderr:\n%s", res.code, res.stderr)
	}
	cfg.Session.Attempt = 2
	res := p.run(t.Context(), cfg)
	if res.code != 0 || res.report.SessionID != cfg.Session.ID || res.report.Usage.Requests != 2 {
		t.Fatalf("attempt 2: exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
	}
	st := p.store()
	if diff := cmp.Diff([]string{"Fix the failing tests."}, userMessages(t, st, cfg)); diff != "" {
		t.Errorf("user messages after the retry (-want +got):\n%s", diff)
	}

	fresh := p.config(func(c *runconfig.Config) { c.Session.Attempt = 3 })
	res = p.run(t.Context(), fresh)
	if res.code != 0 || res.report.SessionID != fresh.Session.ID {
		t.Fatalf("attempt 3 of a session never stored: exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
	}
	if diff := cmp.Diff([]string{"Fix the failing tests."}, userMessages(t, st, fresh)); diff != "" {
		t.Errorf("user messages of the fresh start (-want +got):\n%s", diff)
	}
}

// TestRunnerSIGTERM stops a runner in the middle of a tool call, as the
// kubelet does when the pod is deleted: the tool's processes end, the
// outcome is cancelled and the exit status 143.
func TestRunnerSIGTERM(t *testing.T) {
	t.Parallel()
	p := newPod(t, "", toolTurn(call("c1", "bash", map[string]any{"command": "echo $$ > pid; exec sleep 300", "timeout": 600})), answer("never asked"))
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		pidFile := filepath.Join(p.ws, "pid")
		for {
			if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
				cancel(&session.SignalError{Signal: syscall.SIGTERM})
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	res := p.run(ctx, p.config())
	if res.code != runconfig.ExitTerminated || res.report.Outcome != runconfig.OutcomeCancelled || res.report.ExitCode != 143 {
		t.Fatalf("exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
	}
	b, err := os.ReadFile(filepath.Join(p.ws, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the tool's process %d is still alive", pid)
	}
}

// TestRunnerContinuations resumes and forks sessions as spec.resumeFrom
// and spec.forkFrom ask, the fork through a sequence number.
func TestRunnerContinuations(t *testing.T) {
	t.Parallel()
	p := newPod(t, "", answer("first answer"), answer("resumed answer"), answer("forked answer"))
	first := p.config(func(c *runconfig.Config) { c.Prompt = "first task" })
	if res := p.run(t.Context(), first); res.code != 0 {
		t.Fatalf("first: exit %d; stderr:\n%s", res.code, res.stderr)
	}
	first.Prompt, first.Session.Attempt = "second task", 1
	first.Session.ResumeFrom = first.Session.ID
	if res := p.run(t.Context(), first); res.code != 0 {
		t.Fatalf("resume: exit %d; stderr:\n%s", res.code, res.stderr)
	}
	st := p.store()
	if diff := cmp.Diff([]string{"first task", "second task"}, userMessages(t, st, first)); diff != "" {
		t.Errorf("resumed session's user messages (-want +got):\n%s", diff)
	}
	// The fork copies the first exchange only: through the first answer.
	es, err := st.Entries(t.Context(), "team-a", uuid.MustParse(first.Session.ID))
	if err != nil {
		t.Fatal(err)
	}
	var at int64
	for _, e := range es {
		if _, ok := e.Payload.(transcript.AssistantMessage); ok {
			at = e.Seq
			break
		}
	}
	fork := p.config(func(c *runconfig.Config) {
		c.Prompt = "branch task"
		c.Session.ForkFrom, c.Session.ForkAtSequence = first.Session.ID, at
	})
	res := p.run(t.Context(), fork)
	if res.code != 0 || res.report.SessionID != fork.Session.ID {
		t.Fatalf("fork: exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
	}
	if diff := cmp.Diff([]string{"first task", "branch task"}, userMessages(t, st, fork)); diff != "" {
		t.Errorf("forked session's user messages (-want +got):\n%s", diff)
	}
}

// TestRunnerHookApproval runs a pod whose spec layer has a hook that asks
// a person to approve every command: by default nobody can, and the call
// is refused; with hookApproval allow it runs.
func TestRunnerHookApproval(t *testing.T) {
	t.Parallel()
	ask := toolTurn(call("c1", "bash", map[string]any{"command": "touch approved"}))
	p := newPod(t, "", ask, answer("refused"), ask, answer("ran"))
	layer := t.TempDir()
	hook := "[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\n" +
		`command = "echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"commands need a person\"}}'"` + "\n"
	if err := os.WriteFile(filepath.Join(layer, "hooks.toml"), []byte(hook), 0o644); err != nil {
		t.Fatal(err)
	}
	withLayer := func(c *runconfig.Config) {
		c.Layers = []runconfig.Layer{{Name: "guard", Kind: runconfig.LayerSpec, Dir: layer}}
		c.Trust.Sources = []string{"Extensions"}
	}
	res := p.run(t.Context(), p.config(withLayer))
	if res.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	if r := toolResults(t, p.model.Requests()[1])["c1"]; !r.isError || !strings.Contains(r.text, "commands need a person (approval required; denied in a headless run)") {
		t.Errorf("default policy: result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(p.ws, "approved")); err == nil {
		t.Error("the command ran without approval")
	}

	res = p.run(t.Context(), p.config(withLayer, func(c *runconfig.Config) { c.HookApproval = runconfig.HookApprovalAllow }))
	if res.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
	}
	if r := toolResults(t, p.model.Requests()[3])["c1"]; r.isError {
		t.Errorf("allow policy: result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(p.ws, "approved")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
}

// TestRunnerHookApprovalAsk runs the attempts of a pod whose hook asks a
// person about a command, with hookApproval ask: the first attempt pauses
// (exit 5, outcome awaiting_approval, the pending call in the termination
// report); an attempt without a decision pauses again; the attempt given
// the decision in its config resumes and runs the call once; a denial
// refuses it with its reason.
func TestRunnerHookApprovalAsk(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{true, false} {
		t.Run(fmt.Sprintf("allowed=%v", allow), func(t *testing.T) {
			t.Parallel()
			p := newPod(t, "", toolTurn(call("c1", "bash", map[string]any{"command": "echo once >> ran.txt"})), answer("done"))
			layer := t.TempDir()
			if err := os.WriteFile(filepath.Join(layer, "hooks.toml"), []byte(askHook), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := p.config(func(c *runconfig.Config) {
				c.Layers = []runconfig.Layer{{Name: "guard", Kind: runconfig.LayerSpec, Dir: layer}}
				c.Trust.Sources = []string{"Extensions"}
				c.HookApproval = runconfig.HookApprovalAsk
			})
			for attempt := int32(1); attempt <= 2; attempt++ {
				cfg.Session.Attempt = attempt
				res := p.run(t.Context(), cfg)
				a := res.report.Approval
				if res.code != runconfig.ExitAwaitingApproval || res.report.Outcome != runconfig.OutcomeAwaitingApproval ||
					a == nil || a.CallID != "c1" || a.Tool != "bash" || a.Reason != "commands need a person" ||
					!strings.Contains(a.Preview, "echo once") {
					t.Fatalf("attempt %d: exit %d, report %+v; stderr:\n%s", attempt, res.code, res.report, res.stderr)
				}
			}
			if n := len(p.model.Requests()); n != 1 {
				t.Errorf("%d model requests while paused, want 1", n)
			}
			cfg.Session.Attempt = 3
			cfg.Approvals = []runconfig.Approval{{CallID: "c1", Allowed: allow, Reason: "decided by the reviewer"}}
			res := p.run(t.Context(), cfg)
			if res.code != 0 {
				t.Fatalf("attempt 3: exit %d, report %+v; stderr:\n%s", res.code, res.report, res.stderr)
			}
			data, _ := os.ReadFile(filepath.Join(p.ws, "ran.txt"))
			r := toolResults(t, p.model.Requests()[1])["c1"]
			switch {
			case allow && (string(data) != "once\n" || r.isError):
				t.Errorf("approved: ran.txt %q, result %+v", data, r)
			case !allow && (len(data) != 0 || !r.isError || !strings.Contains(r.text, "decided by the reviewer")):
				t.Errorf("denied: ran.txt %q, result %+v", data, r)
			}
		})
	}
}

// checkCost checks a report's cost against the pods' model, claude-sonnet-4-5,
// at its bundled $3 and $15 per million input and output tokens, then
// clears it, so that the rest of the usage compares exactly.
func checkCost(t *testing.T, u *runconfig.Usage) {
	t.Helper()
	want := (float64(u.InputTokens)*3 + float64(u.OutputTokens)*15) / 1e6
	if math.Abs(u.CostUSD-want) > 1e-9 {
		t.Errorf("cost $%v for %d input and %d output tokens, want $%v", u.CostUSD, u.InputTokens, u.OutputTokens, want)
	}
	u.CostUSD = 0
}
