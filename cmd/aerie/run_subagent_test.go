package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/atif/atiftest"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// lastToolResult is the text of the last tool result a request carries.
func lastToolResult(t *testing.T, req testenv.ModelRequest, id string) toolResult {
	t.Helper()
	return toolResults(t, req)[id]
}

// sessionsOf returns the sessions of the e2e's workspace by id.
func (e *e2e) sessionsOf() map[uuid.UUID]store.Session {
	e.t.Helper()
	list, err := e.store().List(e.t.Context(), e.ws, store.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[uuid.UUID]store.Session{}
	for _, s := range list {
		out[s.ID] = s
	}
	return out
}

// requireContiguous fails unless es are numbered 1, 2, 3, ...
func requireContiguous(t *testing.T, who string, es []transcript.Entry) {
	t.Helper()
	for i, en := range es {
		if en.Seq != int64(i+1) {
			t.Errorf("%s: entry %d has seq %d, want %d", who, i, en.Seq, i+1)
			return
		}
	}
}

// TestRunSubagentsInParallel: two spawn_agent calls of one response run
// two children at once, each running shell steps in its own conversation
// and session; the parent gets each one's answer and outcome, journals
// their outcomes in call order, and its usage at the end is the tree's.
func TestRunSubagentsInParallel(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(spawn("sa", "child-a: write a"), spawn("sb", "child-b: write b")), answer("both done"))
	// Each child's first answer waits until the other's first request has
	// arrived: they finish only if they run at the same time.
	arrived := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	together := func(me, other, command string) testenv.Turn {
		return testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			close(arrived[me])
			select {
			case <-arrived[other]:
			case <-time.After(30 * time.Second):
				t.Errorf("child %s: child %s did not start while it ran", me, other)
			}
			return bashTurn("c"+me, command)
		}}
	}
	e.model.Conversation("child-a:", together("a", "b", "echo a > a.txt"), bashTurn("ca2", "cat a.txt"), answer("A wrote a"))
	e.model.Conversation("child-b:", together("b", "a", "echo b > b.txt"), answer("B wrote b"))

	out := e.run("run", "split the work")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(e.ws, f)); err != nil {
			t.Errorf("the child's shell step did not run: %v", err)
		}
	}
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1]
	for id, want := range map[string]string{"sa": "A wrote a", "sb": "B wrote b"} {
		r := lastToolResult(t, last, id)
		if r.isError || !strings.Contains(r.text, want) || !strings.Contains(r.text, "outcome: completed") {
			t.Errorf("result of %s = %+v, want the answer %q and its outcome", id, r, want)
		}
	}
	if r := lastToolResult(t, last, "sa"); !strings.Contains(r.text, "3 turns · 325 tokens") {
		t.Errorf("result of sa = %q, want its 3 turns and 325 tokens", r.text)
	}

	end := out.end(t)
	root := uuidOf(t, end.Session)
	if end.Subagents != 2 {
		t.Errorf("session_end subagents = %d, want 2", end.Subagents)
	}
	// 2 root requests (110 + 105), child a 3 (110, 110, 105), child b 2.
	if got, want := end.Usage.InputTokens+end.Usage.OutputTokens, int64(215+325+215); got != want {
		t.Errorf("session_end tokens = %d, want the tree's %d", got, want)
	}
	starts := map[string]bool{}
	for _, ev := range out.events {
		switch ev.Type {
		case events.SubagentStart:
			if ev.AgentID == "" || ev.ParentID != end.Session {
				t.Errorf("subagent_start %+v: want its agent id and the root as parent", ev)
			}
			starts[ev.AgentID] = true
		case events.ToolCall:
			if ev.Tool == "bash" && ev.AgentID == "" {
				t.Errorf("a child's bash call carries no agent_id: %+v", ev)
			}
		}
	}
	if len(starts) != 2 {
		t.Errorf("subagent_start for %d children, want 2", len(starts))
	}

	sessions := e.sessionsOf()
	var outcomes []transcript.SubagentOutcome
	rootEntries := e.entries(end.Session)
	requireContiguous(t, "root", rootEntries)
	for i, en := range rootEntries {
		o, ok := en.Payload.(transcript.SubagentOutcome)
		if !ok {
			continue
		}
		outcomes = append(outcomes, o)
		if r, ok := rootEntries[i+1].Payload.(transcript.ToolResult); !ok || r.CallID != o.CallID {
			t.Errorf("the outcome of %s is not followed by its call's result: %#v", o.CallID, rootEntries[i+1].Payload)
		}
		child, ok := sessions[o.Session]
		switch {
		case !ok:
			t.Errorf("outcome names session %s, which is not stored", o.Session)
			continue
		case child.Kind != store.SessionSubagent || child.ParentID != root || child.RootID != root:
			t.Errorf("child %s: kind %q parent %s root %s; want subagent under %s", o.Session, child.Kind, child.ParentID, child.RootID, root)
		case child.State != store.StateCompleted:
			t.Errorf("child %s: state %q, want completed", o.Session, child.State)
		}
		if !starts[o.Session.String()] {
			t.Errorf("no subagent_start for %s", o.Session)
		}
		es := e.entries(o.Session.String())
		requireContiguous(t, "child", es)
		if u, ok := es[0].Payload.(transcript.UserMessage); !ok || !strings.HasPrefix(u.Content[0].Text, "child-") {
			t.Errorf("child's first entry %#v, want its task", es[0].Payload)
		}
		if cp, ok := es[len(es)-1].Payload.(transcript.Checkpoint); !ok || cp.Outcome != transcript.OutcomeCompleted {
			t.Errorf("child's last entry %#v, want a completed checkpoint", es[len(es)-1].Payload)
		}
	}
	if len(outcomes) != 2 || outcomes[0].CallID != "sa" || outcomes[1].CallID != "sb" {
		t.Fatalf("outcomes %+v, want sa's then sb's", outcomes)
	}
	if o := outcomes[0]; o.Outcome != transcript.OutcomeCompleted || !strings.HasPrefix(o.AnswerDigest, "sha256:") ||
		o.Usage == nil || o.Usage.Requests != 3 {
		t.Errorf("outcome %+v: want completed, a digest and 3 requests", o)
	}
}

// TestRunSubagentLimits: a grandchild runs at depth 2, and spawns past
// max_depth, max_concurrent and max_total are error results naming the
// limit and its value; the run goes on.
func TestRunSubagentLimits(t *testing.T) {
	t.Parallel()
	expect := func(id, want string, then testenv.Turn) testenv.Turn {
		return testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn {
			r := toolResults(t, req)[id]
			if !r.isError || !strings.Contains(r.text, want) {
				t.Errorf("result of %s = %+v, want an error with %q", id, r, want)
			}
			return then
		}}
	}
	t.Run("depth and concurrency", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, toolTurn(spawn("s1", "child: delegate")), answer("root done"))
		testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/config.toml"), "[subagents]\nmax_depth = 2\nmax_concurrent = 2\n", 0o644)
		e.model.Conversation("child:", toolTurn(spawn("s2", "grandchild: deeper")), answer("child done"))
		e.model.Conversation("grandchild:",
			toolTurn(spawn("s3", "great-grandchild: too deep")),
			expect("s3", "max_depth 2 reached", answer("grandchild done")))
		out := e.run("run", "go deep")
		if out.code != 0 {
			t.Fatalf("exit %d\n%s", out.code, out.stderr)
		}
		end := out.end(t)
		if end.Subagents != 2 {
			t.Errorf("subagents = %d, want 2", end.Subagents)
		}
		root := uuidOf(t, end.Session)
		var child, grand store.Session
		for _, s := range e.sessionsOf() {
			switch {
			case s.ID == root:
			case s.ParentID == root:
				child = s
			default:
				grand = s
			}
		}
		if grand.Kind != store.SessionSubagent || grand.ParentID != child.ID || grand.RootID != root || child.ID == uuid.Nil {
			t.Errorf("grandchild %+v: want a subagent of %s in root %s", grand, child.ID, root)
		}

		// max_concurrent 1: a child cannot spawn while it runs itself.
		e2 := newE2E(t, toolTurn(spawn("s1", "child: delegate")), answer("root done"))
		testenv.WriteFile(t, filepath.Join(e2.ws, ".aerie/config.toml"), "[subagents]\nmax_concurrent = 1\n", 0o644)
		e2.model.Conversation("child:", toolTurn(spawn("s2", "grandchild: refused")),
			expect("s2", "max_concurrent 1 reached", answer("child done")))
		if out := e2.run("run", "go"); out.code != 0 {
			t.Fatalf("exit %d\n%s", out.code, out.stderr)
		}
	})
	t.Run("total", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, toolTurn(spawn("s1", "first: go")), toolTurn(spawn("s2", "second: refused")))
		e.model.Add(expect("s2", "max_total 1 reached", answer("root done")))
		testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/config.toml"), "[subagents]\nmax_total = 1\n", 0o644)
		e.model.Conversation("first:", answer("first done"))
		out := e.run("run", "go")
		if out.code != 0 {
			t.Fatalf("exit %d\n%s", out.code, out.stderr)
		}
		if n := e.model.Remaining(); n != 0 {
			t.Errorf("%d turns left unanswered", n)
		}
	})
	t.Run("unknown agent type", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, toolTurn(call("s1", "spawn_agent", map[string]any{"task": "x", "agent_type": "nobody"})))
		testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/personas/reviewer.toml"), "prompt = \"You review.\"\n", 0o644)
		e.model.Add(expect("s1", `unknown agent_type "nobody"`, answer("ok")))
		out := e.run("run", "go")
		if out.code != 0 {
			t.Fatalf("exit %d\n%s", out.code, out.stderr)
		}
		if r := toolResults(t, e.model.Requests()[1])["s1"]; !strings.Contains(r.text, "known: reviewer") {
			t.Errorf("result %q, want the known personas", r.text)
		}
	})
}

// TestRunSubagentsBudget: a token budget that the children would exceed
// stops every agent of the tree at its next request; the run ends
// budget_exceeded (exit 4) and the tree's tokens pass the budget by at most
// the responses in flight when it was reached: one per running agent.
func TestRunSubagentsBudget(t *testing.T) {
	t.Parallel()
	const budget = 1000
	big := func(id string) testenv.Turn {
		tt := bashTurn(id, "true")
		tt.Usage = testenv.TokenUsage{InputTokens: 250, OutputTokens: 50}
		return tt
	}
	e := newE2E(t, toolTurn(spawn("sa", "spender-a: spend"), spawn("sb", "spender-b: spend")), answer("never"))
	for _, key := range []string{"spender-a:", "spender-b:"} {
		e.model.Conversation(key, big("1"), big("2"), big("3"), big("4"), big("5"), answer("never"))
	}
	out := e.run("run", "--max-tokens", "1000", "spend")
	if out.code != 4 {
		t.Fatalf("exit %d, want 4\n%s", out.code, out.stderr)
	}
	end := out.end(t)
	if end.Outcome != transcript.OutcomeBudgetExceeded {
		t.Errorf("outcome %q, want budget_exceeded", end.Outcome)
	}
	// The bound: the budget, plus one response of each of the two
	// children in flight (300 each) — the root waits in its tool call.
	used := end.Usage.InputTokens + end.Usage.OutputTokens
	if used < budget || used > budget+2*300 {
		t.Errorf("the tree used %d tokens; want between %d and %d", used, budget, budget+2*300)
	}
	stops := 0
	for _, ev := range out.events {
		if ev.Type == events.SubagentStop {
			stops++
			if ev.Outcome != transcript.OutcomeBudgetExceeded {
				t.Errorf("child %s ended %q, want budget_exceeded", ev.AgentID, ev.Outcome)
			}
		}
	}
	if stops != 2 {
		t.Errorf("%d subagent_stop events, want 2", stops)
	}
	if n := len(e.model.Requests()); n > 1+2*5 {
		t.Errorf("%d requests", n)
	}
	// The stored usage gives session list its cost, and tree the
	// subagents'.
	list := e.run("session", "list", "--json")
	var listed sessionListJSON
	if err := json.Unmarshal([]byte(list.stdout), &listed); err != nil || len(listed.Sessions) != 1 {
		t.Fatalf("session list --json: %v\n%s%s", err, list.stdout, list.stderr)
	}
	if c := listed.Sessions[0].CostUSD; c == nil || *c <= 0 || *c > end.Usage.CostUSD+1e-9 {
		t.Errorf("session list cost_usd = %v, want up to the tree's $%v", c, end.Usage.CostUSD)
	}
	if tree := e.run("session", "tree"); !strings.Contains(tree.stdout, "COST") || strings.Count(tree.stdout, "$0.00") < 2 {
		t.Errorf("session tree lacks the subagents' costs:\n%s", tree.stdout)
	}
}

// TestRunSubagentHooks: SubagentStart and SubagentStop hooks see the
// child's agent_id and agent_type, a tool hook inside the child sees them
// too (and matches spawn_agent as Agent in the parent), and a blocking
// SubagentStop keeps the child going with its reason.
func TestRunSubagentHooks(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(call("s1", "spawn_agent", map[string]any{"task": "hooked: go", "agent_type": "helper"})), answer("root done"))
	testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/personas/helper.toml"), "prompt = \"You help.\"\n", 0o644)
	e.model.Conversation("hooked:", bashTurn("c1", "true"), answer("first stop"), answer("second stop"))
	log := filepath.Join(e.home, "hooks.log")
	testenv.WriteFile(t, filepath.Join(e.home, "record.sh"), "#!/bin/sh\ncat >> "+log+"\necho >> "+log+"\n", 0o755)
	testenv.WriteFile(t, filepath.Join(e.home, "stop.sh"), `#!/bin/sh
input=$(cat)
echo "$input" >> `+log+`
echo >> `+log+`
case "$input" in
*'"stop_hook_active":true'*) exit 0 ;;
esac
echo "check once more" >&2
exit 2
`, 0o755)
	rec := filepath.Join(e.home, "record.sh")
	testenv.WriteFile(t, filepath.Join(e.home, "hooks.toml"), `[[hooks.SubagentStart]]
[[hooks.SubagentStart.hooks]]
command = "`+rec+`"

[[hooks.SubagentStop]]
[[hooks.SubagentStop.hooks]]
command = "`+filepath.Join(e.home, "stop.sh")+`"
`, 0o644)
	// A hook written for another agent: Bash and Agent are aliases.
	testenv.WriteFile(t, filepath.Join(e.home, "hooks", "tools.yaml"),
		"hooks:\n  PreToolUse:\n    - matcher: Bash|Agent\n      hooks:\n        - type: command\n          command: "+rec+"\n", 0o644)
	out := e.run("run", "go")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	var child string
	for _, ev := range out.events {
		if ev.Type == events.SubagentStart {
			child = ev.AgentID
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{
		`"hook_event_name":"SubagentStart"`, `"hook_event_name":"SubagentStop"`,
		`"agent_id":"` + child + `"`, `"agent_type":"helper"`, `"tool_name":"spawn_agent"`, `"tool_name":"bash"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the hooks' input lacks %s:\n%s", want, text)
		}
	}
	for line := range strings.Lines(text) {
		if strings.Contains(line, `"tool_name":"bash"`) && !strings.Contains(line, `"agent_id":"`+child+`"`) {
			t.Errorf("the child's PreToolUse input lacks its agent_id: %s", line)
		}
	}
	// The blocked stop continued the child, which then ended.
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1]
	if r := toolResults(t, last)["s1"]; !strings.Contains(r.text, "second stop") {
		t.Errorf("the parent got %q, want the child's answer after the blocked stop", r.text)
	}
}

// TestRunSIGTERMDuringSubagents stops a session while two children run
// long commands: every process they started ends, and each child and the
// root are recorded cancelled; the root journals no outcome, its calls left
// pending for a resume to continue the children.
func TestRunSIGTERMDuringSubagents(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(spawn("sa", "sleeper-a: sleep"), spawn("sb", "sleeper-b: sleep")), answer("never"))
	long := func(id string) testenv.Turn {
		return toolTurn(call(id, "bash", map[string]any{
			"command": "sh -c 'echo $$ >> pids; exec sleep 300' & echo $$ >> pids; sleep 300", "timeout": 600,
		}))
	}
	e.model.Conversation("sleeper-a:", long("a"), answer("never"))
	e.model.Conversation("sleeper-b:", long("b"), answer("never"))
	cmd, stdout, stderr := e.start("run", "sleep twice")
	pids := waitLines(t, filepath.Join(e.ws, "pids"), 4)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	out := e.output(err, stdout.String(), stderr.String())
	if out.code != 143 {
		t.Fatalf("exit %d, want 143; stderr:\n%s", out.code, out.stderr)
	}
	requireGone(t, pids)
	for _, s := range e.sessionsOf() {
		if s.State != store.StateCancelled {
			t.Errorf("session %s (%s): state %q, want cancelled", s.ID, s.Kind, s.State)
		}
		if s.Kind != store.SessionSubagent {
			if got := e.outcomesOf(s.ID.String()); len(got) != 0 {
				t.Errorf("the root journaled outcomes %+v of children stopped with it, want none", got)
			}
		}
	}
}

// TestRunSubagentsCostBudget: a cost budget, from the model's bundled
// price, charged across the tree like the token budget: the run ends
// budget_exceeded (exit 4), the tree's cost past the budget by at most the
// responses in flight when it was reached.
func TestRunSubagentsCostBudget(t *testing.T) {
	t.Parallel()
	const budget = 0.006
	// claude-sonnet-4-5 at $3 and $15 per million tokens: $0.0015 each.
	const each = (250*3 + 50*15) / 1e6
	big := func(id string) testenv.Turn {
		tt := bashTurn(id, "true")
		tt.Usage = testenv.TokenUsage{InputTokens: 250, OutputTokens: 50}
		return tt
	}
	e := newE2E(t, toolTurn(spawn("sa", "spender-a: spend"), spawn("sb", "spender-b: spend")), answer("never"))
	for _, key := range []string{"spender-a:", "spender-b:"} {
		e.model.Conversation(key, big("1"), big("2"), big("3"), big("4"), big("5"), answer("never"))
	}
	out := e.run("run", "--max-cost-usd", "0.006", "spend")
	if out.code != 4 {
		t.Fatalf("exit %d, want 4\n%s", out.code, out.stderr)
	}
	end := out.end(t)
	if end.Outcome != transcript.OutcomeBudgetExceeded || !strings.Contains(end.Reason, "cost budget of $0.006") {
		t.Errorf("outcome %q (%s), want budget_exceeded for the cost budget", end.Outcome, end.Reason)
	}
	if c := end.Usage.CostUSD; c < budget || c > budget+2*each+1e-9 {
		t.Errorf("the tree cost $%v; want between $%v and $%v", c, budget, budget+2*each)
	}
	if n := len(e.model.Requests()); n > 1+2*5 {
		t.Errorf("%d requests", n)
	}
}

// TestRunCostBudgetUnknownPrice: a cost budget for a model without a price
// is a configuration error (exit 2) before any request, naming the model
// and how to price it; priced in config.toml, the same run goes ahead and
// reports its cost.
func TestRunCostBudgetUnknownPrice(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("done"))
	out := e.run("run", "--model", "mystery-1", "--max-cost-usd", "1", "go")
	if out.code != 2 {
		t.Fatalf("exit %d, want 2\n%s", out.code, out.stderr)
	}
	for _, want := range []string{`model "mystery-1" is unknown`, `[prices."mystery-1"]`} {
		if !strings.Contains(out.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out.stderr)
		}
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("%d requests made", n)
	}
	testenv.WriteFile(t, filepath.Join(e.ws, ".aerie/config.toml"),
		"[prices.\"mystery-1\"]\ninput = 10\noutput = 20\n", 0o644)
	out = e.run("run", "--events-jsonl", "--model", "mystery-1", "--max-cost-usd", "1", "go")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if end := out.end(t); end.Usage.CostUSD <= 0 {
		t.Errorf("end usage %+v: no cost", end.Usage)
	}
}

// TestRunATIFWithSubagents: --atif-output embeds the children's
// trajectories, which the spawning calls' results refer to, as aerie
// session export writes them, and the document is valid ATIF v1.7.
func TestRunATIFWithSubagents(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(spawn("sa", "child-a: go"), spawn("sb", "child-b: go")), answer("both done"))
	e.model.Conversation("child-a:", bashTurn("ca", "echo a"), answer("A done"))
	e.model.Conversation("child-b:", answer("B done"))
	path := filepath.Join(e.ws, "trajectory.json")
	out := e.run("run", "--atif-output", path, "split")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := atiftest.Check(b); err != nil {
		t.Fatalf("the trajectory is not valid ATIF: %v\n%s", err, b)
	}
	var traj struct {
		Subagents []json.RawMessage `json:"subagent_trajectories"`
		Steps     []struct {
			Observation *struct {
				Results []struct {
					Refs []struct {
						ID string `json:"trajectory_id"`
					} `json:"subagent_trajectory_ref"`
				} `json:"results"`
			} `json:"observation"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &traj); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sub := range traj.Subagents {
		var s struct {
			ID    string            `json:"trajectory_id"`
			Steps []json.RawMessage `json:"steps"`
		}
		if err := json.Unmarshal(sub, &s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
		if len(s.Steps) < 2 {
			t.Errorf("subagent %s: %d steps, want its conversation", s.ID, len(s.Steps))
		}
	}
	refs := map[string]bool{}
	for _, st := range traj.Steps {
		if st.Observation == nil {
			continue
		}
		for _, r := range st.Observation.Results {
			for _, ref := range r.Refs {
				refs[ref.ID] = true
			}
		}
	}
	if len(ids) != 2 || !refs[ids[0]] || !refs[ids[1]] {
		t.Errorf("subagent trajectories %v, referred to %v; want both children, each referred to", ids, refs)
	}

	// The same children as the export of the stored session.
	exported := e.run("session", "export", out.end(t).Session, "--format", "atif")
	if exported.code != 0 {
		t.Fatalf("export: exit %d\n%s", exported.code, exported.stderr)
	}
	var doc struct {
		Subagents []json.RawMessage `json:"subagent_trajectories"`
	}
	if err := json.Unmarshal([]byte(exported.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Subagents) != len(traj.Subagents) {
		t.Fatalf("export has %d subagent trajectories, run %d", len(doc.Subagents), len(traj.Subagents))
	}
	for i := range doc.Subagents {
		if !bytes.Equal(compactJSON(t, doc.Subagents[i]), compactJSON(t, traj.Subagents[i])) {
			t.Errorf("subagent %d differs between run and export:\nrun    %s\nexport %s", i, traj.Subagents[i], doc.Subagents[i])
		}
	}
}

func compactJSON(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRunSubagentToolsTornDown: SIGTERM while two children each run a
// long shell command, one of which left a process in the background:
// afterwards no process of any group the children's tools started is in
// /proc, not even a zombie.
func TestRunSubagentToolsTornDown(t *testing.T) {
	t.Parallel()
	e := newE2E(t, toolTurn(spawn("sa", "long-a: run"), spawn("sb", "long-b: run")), answer("never"))
	long := func(id string) testenv.Turn {
		return toolTurn(call(id, "bash", map[string]any{
			"command": "sleep 301 & awk '{print $5}' /proc/$$/stat >> groups; sleep 302", "timeout": 600,
		}))
	}
	e.model.Conversation("long-a:", long("a"), answer("never"))
	e.model.Conversation("long-b:", long("b"), answer("never"))
	cmd, stdout, stderr := e.start("run", "run twice")
	groups := waitLines(t, filepath.Join(e.ws, "groups"), 2)
	if groups[0] == groups[1] {
		t.Fatalf("the children's commands share process group %s, want one each", groups[0])
	}
	if live := inGroups(t, groups); len(live) < 4 {
		t.Fatalf("before the signal, %d processes in groups %v, want the shells and sleeps of both", len(live), groups)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out := e.output(cmd.Wait(), stdout.String(), stderr.String())
	if out.code != 143 {
		t.Fatalf("exit %d, want 143; stderr:\n%s", out.code, out.stderr)
	}
	// The subreaper reaps asynchronously; give it a moment.
	deadline := time.Now().Add(30 * time.Second)
	for {
		live := inGroups(t, groups)
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the children's groups outlived the session: %v", live)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inGroups lists the processes in /proc whose process group is one of
// groups, each as its /proc/PID/stat line.
func inGroups(t *testing.T, groups []string) []string {
	t.Helper()
	want := map[string]bool{}
	for _, g := range groups {
		want[g] = true
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so count
		// from the last parenthesis.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 2 && want[fields[2]] {
			live = append(live, strings.TrimSpace(s))
		}
	}
	return live
}
