package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// requestsOf counts the requests of the conversation whose first message
// starts with key.
func (e *e2e) requestsOf(key string) int { return len(e.model.RequestsOf(key)) }

// outcomesOf returns the SubagentOutcome entries of session id.
func (e *e2e) outcomesOf(id string) []transcript.SubagentOutcome {
	var out []transcript.SubagentOutcome
	for _, en := range e.entries(id) {
		if o, ok := en.Payload.(transcript.SubagentOutcome); ok {
			out = append(out, o)
		}
	}
	return out
}

// killWhileDeepestRuns runs a tree of agents — the root and, under it,
// each key of chain spawned by the one before — killed with SIGKILL while
// the deepest agent runs its second tool call, then resumed. The deepest
// agent's first call must not run again, its second is answered as
// interrupted and not run again, none of the tree's earlier model turns is
// asked again, and every parent gets its child's outcome once.
func killWhileDeepestRuns(t *testing.T, chain ...string) {
	e := newE2E(t, toolTurn(spawn("s0", chain[0]+" work")), answer("root done"))
	for i, key := range chain {
		if i < len(chain)-1 {
			e.model.Conversation(key, toolTurn(spawn("s"+strconv.Itoa(i+1), chain[i+1]+" work")), answer(key+" done"))
			continue
		}
		e.model.Conversation(key,
			bashTurn("c1", "echo one >> first.log"),
			bashTurn("c2", "echo $$ >> pids; echo two >> second.log; exec sleep 300"),
			answer(key+" done"))
	}
	cmd, _, _ := e.start("run", "--label", "tree", "delegate")
	pids := waitLines(t, filepath.Join(e.ws, "pids"), 1)
	t.Cleanup(func() {
		if pid, err := strconv.Atoi(pids[0]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	before := map[string]int{}
	for _, key := range chain {
		before[key] = e.requestsOf(key)
	}
	asked := len(e.model.Requests())

	out := e.run("run", "--resume", "tree")
	if out.code != 0 {
		t.Fatalf("resume exited %d\n%s", out.code, out.stderr)
	}
	for file, want := range map[string]string{"first.log": "one\n", "second.log": "two\n"} {
		if b, err := os.ReadFile(filepath.Join(e.ws, file)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q: a call ran again", file, b, err, want)
		}
	}
	// Each agent of the chain asks once more: its last turn, after its
	// child's outcome (the deepest one's after its interrupted call).
	for _, key := range chain {
		if got := e.requestsOf(key); got != before[key]+1 {
			t.Errorf("conversation %q: %d requests after the resume, %d before; want one more", key, got, before[key])
		}
	}
	if got := len(e.model.Requests()) - asked; got != len(chain)+1 {
		t.Errorf("the resume made %d requests, want %d: one per agent", got, len(chain)+1)
	}
	deepest := chain[len(chain)-1]
	for _, req := range e.model.Requests()[asked:] {
		if strings.HasPrefix(req.FirstUser(), deepest) {
			if r := lastToolResult(t, req, "c2"); !r.isError || !strings.Contains(r.text, "may have partly run") {
				t.Errorf("the resumed child's call c2 was answered %+v, want interrupted", r)
			}
		}
	}
	last := e.model.Requests()[len(e.model.Requests())-1]
	if r := lastToolResult(t, last, "s0"); r.isError || !strings.Contains(r.text, chain[0]+" done") {
		t.Errorf("the root's result of s0 = %+v, want its child's answer", r)
	}

	// Every parent journals its child's outcome once, for the child whose
	// id is the call's, and the tree has one session per agent.
	root := uuidOf(t, out.end(t).Session)
	sessions := e.sessionsOf()
	if len(sessions) != len(chain)+1 {
		t.Errorf("%d sessions stored, want %d", len(sessions), len(chain)+1)
	}
	parent := root
	for i := range chain {
		id := subagent.ChildID(parent, "s"+strconv.Itoa(i))
		got := e.outcomesOf(parent.String())
		if len(got) != 1 || got[0].Session != id || got[0].Outcome != transcript.OutcomeCompleted {
			t.Errorf("outcomes of %s: %+v, want one, completed, of %s", parent, got, id)
		}
		if s := sessions[id]; s.State != store.StateCompleted || s.ParentID != parent {
			t.Errorf("child %s: state %q parent %s, want completed under %s", id, s.State, s.ParentID, parent)
		}
		requireContiguous(t, "child", e.entries(id.String()))
		parent = id
	}
}

// TestRunResumeKilledSubagent: a run killed while its child runs resumes
// the child from its journal.
func TestRunResumeKilledSubagent(t *testing.T) {
	t.Parallel()
	killWhileDeepestRuns(t, "child-k:")
}

// TestRunResumeKilledGrandchild: a run killed while a grandchild at depth
// 2 runs resumes the child, which resumes the grandchild.
func TestRunResumeKilledGrandchild(t *testing.T) {
	t.Parallel()
	killWhileDeepestRuns(t, "mid-k:", "leaf-k:")
}

// seedPending stores a root session labelled label whose last run stopped
// with a spawn_agent call callID journaled and not answered, as a crash
// leaves it; it returns the root's id.
func (e *e2e) seedPending(label, callID, task string) uuid.UUID {
	e.t.Helper()
	input, _ := json.Marshal(map[string]string{"task": task})
	at := time.Now()
	entries := []transcript.Entry{
		{Seq: 1, Payload: agent.UserEntry("delegate"), CreatedAt: at},
		{Seq: 2, Payload: transcript.AssistantMessage{StopReason: "tool_use", Content: []transcript.Block{
			{Type: transcript.BlockToolUse, ID: callID, Name: subagent.Name, Input: input},
		}}, CreatedAt: at},
		{Seq: 3, Payload: transcript.Usage{InputTokens: 100, OutputTokens: 10, Requests: 1}, CreatedAt: at},
		{Seq: 4, Payload: transcript.ToolCall{CallID: callID, Name: subagent.Name, Input: input}, CreatedAt: at},
	}
	s, err := e.store().Create(e.t.Context(), e.ws, store.NewSession{
		Dir: e.ws, Kind: store.SessionHeadless, Label: label, State: store.StateFailed, Entries: entries,
		Settings: transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5"},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return s.ID
}

// TestRunResumeFinishedSubagent: a child that finished, its outcome stored
// but not delivered to its parent, is not run again: its stored answer is
// the pending call's result, once.
func TestRunResumeFinishedSubagent(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("root done"))
	root := e.seedPending("done", "sf", "child-f: work")
	child := subagent.ChildID(root, "sf")
	at := time.Now()
	if _, err := e.store().Create(t.Context(), e.ws, store.NewSession{
		ID: child, Dir: e.ws, Kind: store.SessionSubagent, Parent: root, State: store.StateCompleted,
		Settings: transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5"},
		Entries: []transcript.Entry{
			{Seq: 1, Payload: agent.UserEntry("child-f: work"), CreatedAt: at},
			{Seq: 2, Payload: transcript.AssistantMessage{Content: []transcript.Block{
				{Type: transcript.BlockText, Text: "the stored answer"},
			}}, CreatedAt: at},
			{Seq: 3, Payload: transcript.Usage{InputTokens: 50, OutputTokens: 5, Requests: 1}, CreatedAt: at},
			{Seq: 4, Payload: transcript.Checkpoint{Turn: 1, Outcome: transcript.OutcomeCompleted, Result: "the stored answer"}, CreatedAt: at},
		},
	}); err != nil {
		t.Fatal(err)
	}
	out := e.run("run", "--resume", "done")
	if out.code != 0 {
		t.Fatalf("resume exited %d\n%s", out.code, out.stderr)
	}
	if n := e.requestsOf("child-f:"); n != 0 {
		t.Errorf("the finished child was asked %d times, want none", n)
	}
	reqs := e.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want the root's one", len(reqs))
	}
	if r := lastToolResult(t, reqs[0], "sf"); r.isError || !strings.Contains(r.text, "the stored answer") {
		t.Errorf("result of sf = %+v, want the stored answer", r)
	}
	if got := e.outcomesOf(root.String()); len(got) != 1 || got[0].Session != child {
		t.Errorf("outcomes %+v, want one of %s", got, child)
	}
	// The tree's usage counts the stored child's.
	if u := out.end(t).Usage; u.InputTokens+u.OutputTokens < 165 {
		t.Errorf("session_end usage %+v, want the stored root's and child's counted", u)
	}
}

// TestRunResumeNeverCreatedSubagent: a call journaled before its child was
// created runs the child fresh, with the call's id.
func TestRunResumeNeverCreatedSubagent(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("root done"))
	e.model.Conversation("child-n:", answer("fresh answer"))
	root := e.seedPending("never", "sn", "child-n: work")
	out := e.run("run", "--resume", "never")
	if out.code != 0 {
		t.Fatalf("resume exited %d\n%s", out.code, out.stderr)
	}
	if n := e.requestsOf("child-n:"); n != 1 {
		t.Errorf("the child was asked %d times, want once", n)
	}
	reqs := e.model.Requests()
	if r := lastToolResult(t, reqs[len(reqs)-1], "sn"); r.isError || !strings.Contains(r.text, "fresh answer") {
		t.Errorf("result of sn = %+v, want the child's answer", r)
	}
	child := subagent.ChildID(root, "sn")
	if got := e.outcomesOf(root.String()); len(got) != 1 || got[0].Session != child {
		t.Errorf("outcomes %+v, want one of %s", got, child)
	}
	if s, ok := e.sessionsOf()[child]; !ok || s.ParentID != root || s.State != store.StateCompleted {
		t.Errorf("child %s: %+v, want completed under the root", child, s)
	}
}

// TestRunResumePendingSubagentPostToolUse: the outcome a resume delivers
// to a pending spawn_agent call goes through the PostToolUse hooks, as the
// call's would have had the run not stopped, their context reaching the
// model; the PreToolUse hooks ran before the call was journaled and do not
// run again.
func TestRunResumePendingSubagentPostToolUse(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("root done"))
	e.model.Conversation("child-p:", answer("resumed answer"))
	e.seedPending("post", "sp", "child-p: work")
	log := filepath.Join(e.home, "hooks.log")
	testenv.WriteFile(t, filepath.Join(e.home, "record.sh"), "#!/bin/sh\ncat >> "+log+"\necho >> "+log+"\n"+
		`echo '{"hookSpecificOutput": {"additionalContext": "reviewed by the hook"}}'`+"\n", 0o755)
	rec := filepath.Join(e.home, "record.sh")
	testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"), "[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ncommand = \""+rec+
		"\"\n\n[[hooks.PostToolUse]]\n[[hooks.PostToolUse.hooks]]\ncommand = \""+rec+"\"\n", 0o644)
	out := e.run("run", "--resume", "post")
	if out.code != 0 {
		t.Fatalf("resume exited %d\n%s", out.code, out.stderr)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if text := string(b); strings.Count(text, `"hook_event_name":"PostToolUse"`) != 1 ||
		!strings.Contains(text, `"tool_use_id":"sp"`) || !strings.Contains(text, "resumed answer") ||
		strings.Contains(text, `"hook_event_name":"PreToolUse"`) {
		t.Errorf("hooks saw, want one PostToolUse of sp with the child's answer and no PreToolUse:\n%s", text)
	}
	reqs := e.model.Requests()
	if r := lastToolResult(t, reqs[len(reqs)-1], "sp"); !strings.Contains(r.text, "resumed answer") || !strings.Contains(r.text, "reviewed by the hook") {
		t.Errorf("result of sp = %+v, want the child's answer and the hook's context", r)
	}
}

// TestRunResumeSubagentAfterSessionStart: the children a resume continues
// are part of the session, so its SessionStart hooks fire first; they fire
// once, for the root.
func TestRunResumeSubagentAfterSessionStart(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("root done"))
	e.model.Conversation("child-o:", bashTurn("c1", "echo child >> order.log"), answer("child done"))
	testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"),
		"[[hooks.SessionStart]]\n[[hooks.SessionStart.hooks]]\ncommand = \"echo start >> order.log\"\n", 0o644)
	e.seedPending("order", "so", "child-o: work")
	out := e.run("run", "--resume", "order")
	if out.code != 0 {
		t.Fatalf("resume exited %d\n%s", out.code, out.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "order.log")); err != nil || string(b) != "start\nchild\n" {
		t.Errorf("order.log = %q, %v; want the SessionStart hook's line, then the resumed child's", b, err)
	}
}

// TestRunResumeTurnBudgetCountsStoredTree: a resumed tree's turn budget
// counts the requests its stored sessions made, as its token budget counts
// their tokens: with the root's one and the child's two stored, a budget
// of 3 turns is spent before the resumed child asks again.
func TestRunResumeTurnBudgetCountsStoredTree(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("root done"))
	e.model.Conversation("child-t:", answer("child done"))
	root := e.seedPending("turns", "st", "child-t: work")
	input, _ := json.Marshal(map[string]string{"command": "true"})
	at := time.Now()
	if _, err := e.store().Create(t.Context(), e.ws, store.NewSession{
		ID: subagent.ChildID(root, "st"), Dir: e.ws, Kind: store.SessionSubagent, Parent: root, State: store.StateActive,
		Settings: transcript.Settings{Provider: "anthropic", Model: "claude-sonnet-4-5"},
		Entries: []transcript.Entry{
			{Seq: 1, Payload: agent.UserEntry("child-t: work"), CreatedAt: at},
			{Seq: 2, Payload: transcript.AssistantMessage{StopReason: "tool_use", Content: []transcript.Block{
				{Type: transcript.BlockToolUse, ID: "c1", Name: "bash", Input: input},
			}}, CreatedAt: at},
			{Seq: 3, Payload: transcript.Usage{InputTokens: 50, OutputTokens: 5, Requests: 2}, CreatedAt: at},
			{Seq: 4, Payload: transcript.ToolCall{CallID: "c1", Name: "bash", Input: input}, CreatedAt: at},
			{Seq: 5, Payload: transcript.ToolResult{CallID: "c1", Content: []transcript.Block{{Type: transcript.BlockText, Text: "ok"}}}, CreatedAt: at},
			{Seq: 6, Payload: transcript.ToolCompletion{CallID: "c1", Status: transcript.ToolOK}, CreatedAt: at},
		},
	}); err != nil {
		t.Fatal(err)
	}
	out := e.run("run", "--resume", "turns", "--max-turns", "3")
	if out.code != 4 {
		t.Fatalf("resume exited %d, want 4 (budget)\n%s", out.code, out.stderr)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("%d model requests, want none: the stored tree spent the 3 turns", n)
	}
	if end := out.end(t); !strings.Contains(end.Reason, "turn budget of 3") {
		t.Errorf("session_end reason %q, want the turn budget", end.Reason)
	}

	// The child's outcome was delivered; with one turn more the root asks
	// once, and the child, which ended, never.
	out = e.run("run", "--resume", "turns", "--max-turns", "4")
	if out.code != 0 || e.requestsOf("child-t:") != 0 || len(e.model.Requests()) != 1 {
		t.Errorf("resume with 4 turns: exit %d, %d requests; want exit 0 after the root's one\n%s",
			out.code, len(e.model.Requests()), out.stderr)
	}
}
