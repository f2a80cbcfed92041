package faults

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestKillExtensions is the kill loop with the steps spread over what
// else runs a command: a custom tool of the home layer, a subagent that
// runs the step's command in a conversation of its own, and bash; a
// PostToolUse hook of the home layer records every call it sees. Beside
// the kill loop's invariants (each step's command once, at most once when
// its call, or the child's, was interrupted), every call's hook runs at
// most once, and exactly once for a call that completed.
func TestKillExtensions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	writeExtensions(t, e.home)
	rng := rand.New(rand.NewPCG(22, 3))
	for i := range 3 * scale() {
		s := e.session(t, fmt.Sprintf("ext%d", i))
		m := &mixedModel{s: s, children: map[string]bool{}}
		s.model = m.answer
		if s.killUntilDone(rng, 6) {
			s.checkEnd()
			s.checkHooks()
		}
	}
}

// writeExtensions writes the home layer's custom tool record_step, whose
// program does what a bash step's command does, and a PostToolUse hook
// that appends the id of every call to hooks.log in the workspace.
func writeExtensions(t *testing.T, home string) {
	t.Helper()
	writeRecordStep(t, home, "0.2")
	testenv.WriteFile(t, filepath.Join(home, "hooks.toml"), `[[hooks.PostToolUse]]
[[hooks.PostToolUse.hooks]]
command = "`+filepath.Join(home, "posthook.sh")+`"
`, 0o644)
	testenv.WriteFile(t, filepath.Join(home, "posthook.sh"), `#!/bin/sh
input=$(cat)
printf '%s\n' "$input" | sed -n 's/.*"tool_use_id" *: *"\([^"]*\)".*/\1/p' >> hooks.log
`, 0o755)
}

// writeRecordStep writes the custom tool record_step into the layer dir:
// it appends its step and its pid to steps.log and pids.log in the
// workspace it is given, then works for work seconds.
func writeRecordStep(t *testing.T, dir, work string) {
	t.Helper()
	testenv.WriteFile(t, filepath.Join(dir, "tools/record_step.toml"), `name = "record_step"
description = "Records a step in the workspace."
command = ["./record_step.sh"]
[parameters.dir]
type = "string"
required = true
[parameters.step]
type = "string"
required = true
`, 0o644)
	testenv.WriteFile(t, filepath.Join(dir, "tools/record_step.sh"), `#!/bin/sh
read -r input
field() { printf '%s\n' "$input" | sed -n "s/.*\"$1\" *: *\"\([^\"]*\)\".*/\1/p"; }
dir=$(field dir)
step=$(field step)
echo "$step" >> "$dir/steps.log"
echo $$ >> "$dir/pids.log"
sleep `+work+`
echo "recorded $step"
`, 0o755)
}

// mixedModel is the step model with each step done another way: step 1, 5
// by bash; 2, 6 by the custom tool; 3 (bgStep), 7 by bash; 4, 8 by a
// subagent, whose own model runs the step's command with bash and answers.
type mixedModel struct {
	s        *sess
	mu       sync.Mutex
	children map[string]bool // tasks whose conversation is scripted
}

func (m *mixedModel) answer(req testenv.ModelRequest) testenv.Turn {
	s := m.s
	next, err := testenv.NextStep(req)
	if err != nil {
		s.t.Errorf("decode the request: %v", err)
	}
	if next > steps || next%4 == 1 || next%4 == 3 {
		return s.stepModel(req)
	}
	id := fmt.Sprintf("step%d-%d", next, req.Turn)
	var call testenv.ToolCall
	if next%4 == 2 {
		call = testenv.Call(id, "record_step", map[string]any{"dir": s.ws, "step": fmt.Sprintf("step%d", next)})
	} else {
		task := fmt.Sprintf("child of %s, step%d: run the step", s.label, next)
		m.script(task, next)
		call = testenv.Spawn(id, task)
	}
	return testenv.Turn{ToolCalls: []testenv.ToolCall{call}, Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 10}, Delay: 50 * time.Millisecond}
}

// script scripts the conversation of the child with task, once: it runs
// the step's command until its call has a result that says it ran (or was
// interrupted: never again), then answers.
func (m *mixedModel) script(task string, step int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.children[task] {
		return
	}
	m.children[task] = true
	turns := make([]testenv.Turn, 40)
	for i := range turns {
		turns[i] = testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn { return m.child(req, step) }}
	}
	m.s.e.model.Conversation(task, turns...)
}

func (m *mixedModel) child(req testenv.ModelRequest, step int) testenv.Turn {
	return childStep(m.s.t, req, step, 0.2)
}

// childStep is the answer of a subagent's model that runs the command of
// step, which works sleep seconds, until its call has a result that says
// it ran (or was interrupted: never again), then answers.
func childStep(t *testing.T, req testenv.ModelRequest, step int, sleep float64) testenv.Turn {
	var r request
	if err := req.Decode(&r); err != nil {
		t.Errorf("decode the child's request: %v", err)
	}
	last := ""
	for _, msg := range r.Messages {
		for _, c := range msg.Content {
			if c.Type == "tool_result" {
				last = string(c.Content)
			}
		}
	}
	if last != "" && !strings.Contains(last, "not run") {
		return testenv.Turn{Text: fmt.Sprintf("step%d done", step), Delay: 20 * time.Millisecond}
	}
	cmd := fmt.Sprintf("echo step%d >> steps.log; echo $$ >> pids.log; sleep %g", step, sleep)
	return testenv.Turn{
		ToolCalls: []testenv.ToolCall{testenv.Call(fmt.Sprintf("cstep%d-%d", step, req.Turn), "bash", map[string]any{"command": cmd})},
		Usage:     testenv.TokenUsage{InputTokens: 100, OutputTokens: 10},
		Delay:     50 * time.Millisecond,
	}
}

// children returns the entries of each subagent the session's stored
// entries record an outcome of, by the parent's call.
func (s *sess) children(es []transcript.Entry) map[string][]transcript.Entry {
	s.t.Helper()
	out := map[string][]transcript.Entry{}
	st := s.open()
	defer st.Close()
	for _, en := range es {
		o, ok := en.Payload.(transcript.SubagentOutcome)
		if !ok {
			continue
		}
		ces, err := st.Entries(s.t.Context(), s.ws, o.Session)
		if err != nil {
			s.t.Fatalf("session %s: entries of subagent %s: %v", s.label, o.Session, err)
		}
		out[o.CallID] = ces
	}
	return out
}

// checkHooks checks hooks.log: the PostToolUse hook of each call, the
// session's and its subagents', ran at most once, and once for a call that
// completed.
func (s *sess) checkHooks() {
	s.t.Helper()
	ran := map[string]int{}
	if b, err := os.ReadFile(filepath.Join(s.ws, "hooks.log")); err == nil {
		for _, id := range strings.Fields(string(b)) {
			ran[id]++
		}
	}
	es := s.entries()
	all := append([]transcript.Entry(nil), es...)
	for _, ces := range s.children(es) {
		all = append(all, ces...)
	}
	for _, en := range all {
		c, ok := en.Payload.(transcript.ToolCompletion)
		if !ok {
			continue
		}
		switch n := ran[c.CallID]; {
		case n > 1:
			violation(s.t, "session %s: the PostToolUse hook of call %s ran %d times", s.label, c.CallID, n)
		case n == 0 && c.Status == transcript.ToolOK:
			violation(s.t, "session %s: call %s completed, and its PostToolUse hook never ran", s.label, c.CallID)
		}
	}
}

// childInterrupted reports, by the parent's call, whether a call of the
// subagent it spawned was interrupted: the step's command then ran at most
// once, as for an interrupted call of the parent's own.
func (s *sess) childInterrupted(es []transcript.Entry) map[string]bool {
	out := map[string]bool{}
	for call, ces := range s.children(es) {
		for _, en := range ces {
			if c, ok := en.Payload.(transcript.ToolCompletion); ok && c.Status == transcript.ToolInterrupted {
				out[call] = true
			}
		}
		s.checkChildStored(call, ces)
	}
	return out
}

// checkChildStored checks a subagent's entries: numbered from 1 without a
// gap or a repeat, no call or result stored twice.
func (s *sess) checkChildStored(call string, es []transcript.Entry) {
	calls, results := tally(s.t, fmt.Sprintf("session %s: the subagent of %s", s.label, call), es)
	for id, n := range calls {
		if n > 1 || results[id] > 1 {
			violation(s.t, "session %s: the subagent of %s stored call %s %d times, its result %d times", s.label, call, id, n, results[id])
		}
	}
}
