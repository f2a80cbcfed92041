package faults

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/transcript"
)

// checkStored checks the stored entries after a fault: numbered from 1
// without a gap or a repeat, every entry seen after an earlier fault still
// there and byte-identical, no tool call or result stored twice. The
// entries read become seen ones.
func (s *sess) checkStored() []transcript.Entry {
	s.t.Helper()
	es := s.entries()
	calls, results := map[string]int{}, map[string]int{}
	for i, en := range es {
		if en.Seq != int64(i+1) {
			violation(s.t, "session %s: entry %d of %d has sequence number %d", s.label, i+1, len(es), en.Seq)
		}
		b, err := json.Marshal(en)
		if err != nil {
			s.t.Fatal(err)
		}
		if old, ok := s.seen[en.Seq]; ok && old != string(b) {
			violation(s.t, "session %s: entry %d changed after a fault:\nwas %s\nnow %s", s.label, en.Seq, old, b)
		}
		s.seen[en.Seq] = string(b)
		switch p := en.Payload.(type) {
		case transcript.ToolCall:
			calls[p.CallID]++
		case transcript.ToolResult:
			results[p.CallID]++
		}
	}
	for seq := range s.seen {
		if seq > int64(len(es)) {
			violation(s.t, "session %s: entry %d, stored after an earlier fault, is gone (%d entries now)", s.label, seq, len(es))
		}
	}
	for id, n := range calls {
		if n > 1 {
			violation(s.t, "session %s: tool call %s stored %d times", s.label, id, n)
		}
	}
	for id, n := range results {
		if n > 1 {
			violation(s.t, "session %s: tool result of %s stored %d times", s.label, id, n)
		}
	}
	return es
}

// checkEnd checks a session that has completed: the stored invariants,
// every journaled call with one result and one completion, every step's
// command run once (at most once when its call was interrupted), every
// tool call answered once in the last request the model was sent, and no
// process the session's commands started still alive.
func (s *sess) checkEnd() {
	s.t.Helper()
	es := s.checkStored()
	counts.entries.Add(int64(len(es)))
	sc := testenv.ReadStepCalls(es)
	calls, results, completions := sc.Calls, sc.Results, sc.Completions
	inChild := s.childInterrupted(es)
	ran := map[string]int{}
	if b, err := os.ReadFile(filepath.Join(s.ws, "steps.log")); err == nil {
		for _, line := range strings.Fields(string(b)) {
			ran[line]++
		}
	}
	for i := 1; i <= steps; i++ {
		step := "step" + strconv.Itoa(i)
		interrupted := false
		for j, id := range calls[step] {
			res, answered := results[id]
			switch {
			case !answered:
				violation(s.t, "session %s: call %s has no result", s.label, id)
			case completions[id] == "":
				violation(s.t, "session %s: call %s has no completion", s.label, id)
			case completions[id] == transcript.ToolInterrupted || inChild[id]:
				interrupted = true
			case j < len(calls[step])-1 && !strings.HasPrefix(res, "not run"):
				violation(s.t, "session %s: %s called again after call %s was answered %q", s.label, step, id, res)
			}
		}
		switch {
		case len(calls[step]) == 0:
			violation(s.t, "session %s: %s was never called", s.label, step)
		case interrupted && ran[step] > 1:
			violation(s.t, "session %s: %s was interrupted and ran %d times, want at most once", s.label, step, ran[step])
		case !interrupted && ran[step] != 1:
			violation(s.t, "session %s: %s ran %d times, want once (calls %v)", s.label, step, ran[step], calls[step])
		}
	}
	s.checkAnswered()
	s.checkProcesses()
}

// checkAnswered checks that every tool call in the last request of the
// session has exactly one result there.
func (s *sess) checkAnswered() {
	s.t.Helper()
	var last *testenv.ModelRequest
	reqs := s.e.model.Requests()
	for i := range reqs {
		if strings.Contains(string(reqs[i].Body), s.prompt) {
			last = &reqs[i]
		}
	}
	if last == nil {
		violation(s.t, "session %s: no model request", s.label)
		return
	}
	var r request
	if err := last.Decode(&r); err != nil {
		s.t.Fatal(err)
	}
	uses, answers := map[string]int{}, map[string]int{}
	for _, m := range r.Messages {
		for _, c := range m.Content {
			switch c.Type {
			case "tool_use":
				uses[c.ID]++
			case "tool_result":
				answers[c.ToolUseID]++
			}
		}
	}
	for id, n := range uses {
		if n != 1 || answers[id] != 1 {
			violation(s.t, "session %s: in the last request, call %s appears %d times with %d results", s.label, id, n, answers[id])
		}
	}
	for id := range answers {
		if uses[id] == 0 {
			violation(s.t, "session %s: in the last request, a result answers call %s, which is not there", s.label, id)
		}
	}
}

// checkProcesses checks that every process the session's commands
// recorded (each command's shell and the background one of bgStep) is
// gone.
func (s *sess) checkProcesses() {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.ws, "pids.log"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if testenv.Alive(pid) && hasMarker(pid) {
			violation(s.t, "session %s: process %d of its commands is alive after the session ended", s.label, pid)
		}
	}
}

// hasMarker reports whether pid carries aerie's process group marker, so
// that a reused pid is not taken for a survivor.
func hasMarker(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return true
	}
	return strings.Contains(string(b), process.MarkerEnv+"=")
}

// tally checks that the entries es of what (a session, named for the
// messages) are numbered from 1 without a gap or a repeat, and counts the
// ToolCall and ToolResult entries of each call.
func tally(t *testing.T, what string, es []transcript.Entry) (calls, results map[string]int) {
	t.Helper()
	calls, results = map[string]int{}, map[string]int{}
	for i, en := range es {
		if en.Seq != int64(i+1) {
			violation(t, "%s: entry %d of %d has sequence number %d", what, i+1, len(es), en.Seq)
		}
		switch p := en.Payload.(type) {
		case transcript.ToolCall:
			calls[p.CallID]++
		case transcript.ToolResult:
			results[p.CallID]++
		}
	}
	return calls, results
}
