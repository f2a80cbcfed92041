package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/subagent"
)

// askHook is a hooks.toml whose PreToolUse hook asks a person about every
// bash call.
const askHook = "[[hooks.PreToolUse]]\nmatcher = \"bash\"\n[[hooks.PreToolUse.hooks]]\n" +
	`command = "echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"commands need a person\"}}'"` + "\n"

// newAskE2E is a session whose model calls bash once (appending a line to
// ran.txt) and then answers; a hook asks about the call.
func newAskE2E(t *testing.T) *e2e {
	t.Helper()
	e := newE2E(t, toolTurn(call("c1", "bash", map[string]any{"command": "echo once >> ran.txt"})), answer("done"))
	testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"), askHook, 0o644)
	return e
}

// paused checks that a run paused on call c1 and returns the session id.
func paused(t *testing.T, out runOutput) string {
	t.Helper()
	if out.code != runconfig.ExitAwaitingApproval {
		t.Fatalf("exit %d, want %d (awaiting approval)\n%s", out.code, runconfig.ExitAwaitingApproval, out.stderr)
	}
	var id string
	var asked *events.Event
	for i, ev := range out.events {
		switch ev.Type {
		case events.SessionStart:
			id = ev.Session
		case events.ApprovalRequested:
			asked = &out.events[i]
		case events.SessionEnd:
			if ev.Outcome != "awaiting_approval" || ev.ExitCode == nil || *ev.ExitCode != 5 {
				t.Errorf("session_end %+v", ev)
			}
		}
	}
	if asked == nil || asked.CallID != "c1" || asked.Tool != "bash" || asked.Reason != "commands need a person" ||
		!strings.Contains(asked.Arguments, "echo once") {
		t.Errorf("approval_requested event %+v", asked)
	}
	for _, want := range []string{"awaiting_approval", "aerie approve " + id + " c1", "aerie run --resume " + id, "echo once"} {
		if !strings.Contains(out.stderr, want) {
			t.Errorf("standard error does not say %q:\n%s", want, out.stderr)
		}
	}
	return id
}

func ranLines(t *testing.T, e *e2e) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.ws, "ran.txt"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestRunApprovalAsk: with --hook-approval ask a call a hook asks about
// pauses the session (exit 5) without running; a resume before any
// decision pauses again without asking the model; aerie approve records
// the decision and the resume runs the call exactly once and goes on.
func TestRunApprovalAsk(t *testing.T) {
	t.Parallel()
	e := newAskE2E(t)
	id := paused(t, e.run("run", "--hook-approval", "ask", "go"))
	if n := ranLines(t, e); n != 0 {
		t.Fatalf("the call ran %d times before anyone approved it", n)
	}

	again := e.run("run", "--hook-approval", "ask", "--resume", id)
	if paused(t, again) != id {
		t.Errorf("the resume without a decision paused another session")
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests after a resume without a decision, want 1 (the model is not asked again)", n)
	}

	out := e.run("approve", id, "c2")
	if out.code != 1 || !strings.Contains(out.stderr, "call c2 does not await approval; the pending call is c1 (bash)") {
		t.Errorf("approve another call: exit %d\n%s", out.code, out.stderr)
	}
	out = e.run("approve", id)
	if out.code != 0 || !strings.Contains(out.stdout, "approved call c1 (bash") {
		t.Fatalf("approve: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}

	out = e.run("run", "--hook-approval", "ask", "--resume", id)
	if out.code != 0 {
		t.Fatalf("resume after approval: exit %d\n%s", out.code, out.stderr)
	}
	if n := ranLines(t, e); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if r := toolResults(t, reqs[1])["c1"]; r.isError {
		t.Errorf("the approved call's result is an error: %+v", r)
	}

	out = e.run("approve", id)
	if out.code != 1 || !strings.Contains(out.stderr, "no tool call awaits approval") {
		t.Errorf("approve with nothing pending: exit %d\n%s", out.code, out.stderr)
	}
}

// TestRunApprovalDeny: a denied call does not run; the model gets an
// error result with the reason and the loop goes on.
func TestRunApprovalDeny(t *testing.T) {
	t.Parallel()
	e := newAskE2E(t)
	id := paused(t, e.run("run", "--hook-approval", "ask", "go"))
	if out := e.run("approve", id, "c1", "--deny", "--reason", "not on a Friday"); out.code != 0 ||
		!strings.Contains(out.stdout, "denied call c1") {
		t.Fatalf("approve --deny: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	out := e.run("run", "--hook-approval", "ask", "--resume", id)
	if out.code != 0 {
		t.Fatalf("resume after denial: exit %d\n%s", out.code, out.stderr)
	}
	if n := ranLines(t, e); n != 0 {
		t.Errorf("the denied call ran %d times", n)
	}
	r := toolResults(t, e.model.Requests()[1])["c1"]
	if !r.isError || !strings.Contains(r.text, "a person denied this call: not on a Friday") {
		t.Errorf("the denied call's result: %+v", r)
	}
}

// TestRunApprovalSaved: a saved approval in $AERIE_HOME/approvals.toml
// decides the call in advance, so the session does not pause; one in the
// workspace is not honoured; a malformed file is an empty store, with a
// warning.
func TestRunApprovalSaved(t *testing.T) {
	t.Parallel()
	t.Run("home", func(t *testing.T) {
		t.Parallel()
		e := newAskE2E(t)
		testenv.WriteFile(t, filepath.Join(e.home, "approvals.toml"),
			"[[approval]]\ntool = \"bash\"\ninput = { command = \"echo .*\" }\nreason = \"echo is harmless\"\n", 0o644)
		out := e.run("run", "--hook-approval", "ask", "go")
		if out.code != 0 {
			t.Fatalf("exit %d\n%s", out.code, out.stderr)
		}
		if n := ranLines(t, e); n != 1 {
			t.Errorf("the pre-approved call ran %d times, want once", n)
		}
	})
	t.Run("workspace", func(t *testing.T) {
		t.Parallel()
		e := newAskE2E(t)
		testenv.WriteFile(t, filepath.Join(e.ws, ".aerie", "approvals.toml"), "[[approval]]\ntool = \"bash\"\n", 0o644)
		paused(t, e.run("run", "--hook-approval", "ask", "go"))
	})
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		e := newAskE2E(t)
		testenv.WriteFile(t, filepath.Join(e.home, "approvals.toml"), "[[approval]]\ntool = \"(\"\n", 0o644)
		out := e.run("run", "--hook-approval", "ask", "go")
		paused(t, out)
		if !strings.Contains(out.stderr, "approvals.toml") || !strings.Contains(out.stderr, "approval[0].tool: invalid regular expression") {
			t.Errorf("no warning names the malformed file:\n%s", out.stderr)
		}
	})
}

// TestRunApprovalAskInSubagent: a call a hook asks about inside a
// subagent pauses the whole tree (exit 5): aerie approve of the root
// records the decision in the child's session, and the resume continues
// the child, which runs the call once, and delivers its outcome to the
// root once.
func TestRunApprovalAskInSubagent(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(spawn("s1", "child-a: work")), answer("root done"))
	e.model.Conversation("child-a:",
		toolTurn(call("c1", "bash", map[string]any{"command": "echo once >> ran.txt"})), answer("child done"))
	testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"), askHook, 0o644)

	first := e.run("run", "--hook-approval", "ask", "go")
	id := paused(t, first)
	child := subagent.ChildID(uuidOf(t, id), "s1").String()
	for _, ev := range first.events {
		if ev.Type == events.ApprovalRequested && ev.AgentID != child {
			t.Errorf("approval_requested %+v, want it from the subagent %s", ev, child)
		}
	}
	if n := ranLines(t, e); n != 0 {
		t.Fatalf("the call ran %d times before anyone approved it", n)
	}
	if got := e.outcomesOf(id); len(got) != 0 {
		t.Errorf("the root journaled outcomes %+v of a paused subagent, want none", got)
	}
	if s := e.sessionsOf()[uuidOf(t, child)]; s.State != store.StateIdle {
		t.Errorf("the paused subagent's state is %q, want idle", s.State)
	}

	// A resume before any decision pauses the tree again, asking nobody.
	if paused(t, e.run("run", "--hook-approval", "ask", "--resume", id)) != id {
		t.Errorf("the resume without a decision paused another session")
	}
	if n := len(e.model.Requests()); n != 2 {
		t.Errorf("%d model requests after a resume without a decision, want 2 (the root's and the child's first)", n)
	}

	out := e.run("approve", id)
	if out.code != 0 || !strings.Contains(out.stdout, "approved call c1 (bash") || !strings.Contains(out.stdout, "of session "+child) ||
		!strings.Contains(out.stdout, "aerie run --resume "+id) {
		t.Fatalf("approve: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	out = e.run("run", "--hook-approval", "ask", "--resume", id)
	if out.code != 0 {
		t.Fatalf("resume after approval: exit %d\n%s", out.code, out.stderr)
	}
	if n := ranLines(t, e); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
	if n, m := e.requestsOf("child-a:"), len(e.model.Requests()); n != 2 || m != 4 {
		t.Errorf("%d requests of the subagent and %d in all, want 2 and 4", n, m)
	}
	last := e.model.Requests()[len(e.model.Requests())-1]
	if r := lastToolResult(t, last, "s1"); r.isError || !strings.Contains(r.text, "child done") {
		t.Errorf("the root's result of s1 = %+v, want the subagent's answer", r)
	}
	if got := e.outcomesOf(id); len(got) != 1 || got[0].Session.String() != child || got[0].Outcome != "completed" {
		t.Errorf("the root's outcomes %+v, want one, completed, of %s", got, child)
	}
}
