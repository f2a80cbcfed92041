package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// instructionsTree is a workspace with project instructions at the root
// and two levels below it.
var instructionsTree = map[string]string{
	"AGENTS.md":         "Root rules: run make test.",
	"sub/AGENTS.md":     "Sub rules: no new dependencies.",
	"sub/dir/AGENTS.md": "Dir rules: keep functions short.",
	"sub/dir/file.go":   "package dir\n",
	"sub/dir/other.go":  "package dir\n\nfunc Other() {}\n",
}

// system is a request's system prompt, as sent.
func system(t *testing.T, req testenv.ModelRequest) string {
	t.Helper()
	var r anthropicRequest
	if err := req.Decode(&r); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(r.System)
}

// TestRunInstructionsFollowReads reads a file two directories below the
// working directory: the next request carries both directories' AGENTS.md
// once, after the read's result; reading another file there adds nothing;
// the system prompt, which holds the root's, never changes.
func TestRunInstructionsFollowReads(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		toolTurn(call("r1", "read_file", map[string]any{"path": "sub/dir/file.go"})),
		toolTurn(call("r2", "read_file", map[string]any{"path": "sub/dir/other.go"})),
		answer("Read both."))
	testenv.WriteTree(t, e.ws, instructionsTree)
	out := e.run("run", "--events-jsonl", "Read the files.")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	reqs := e.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	first := toolResults(t, reqs[1])["r1"].text
	for _, want := range []string{"package dir", "Project instructions from sub/AGENTS.md:", "Sub rules", "Project instructions from sub/dir/AGENTS.md:", "Dir rules"} {
		if !strings.Contains(first, want) {
			t.Errorf("the first read's result lacks %q:\n%s", want, first)
		}
	}
	if second := toolResults(t, reqs[2])["r2"].text; strings.Contains(second, "rules") {
		t.Errorf("the second read in the same directory adds instructions again:\n%s", second)
	}
	for i, req := range reqs {
		for _, rule := range []string{"Sub rules", "Dir rules"} {
			want := 0
			if i > 0 {
				want = 1
			}
			if n := bytes.Count(req.Body, []byte(rule)); n != want {
				t.Errorf("request %d holds %q %d times, want %d", i+1, rule, n, want)
			}
		}
		if s := system(t, req); !strings.Contains(s, "Root rules") || s != system(t, reqs[0]) {
			t.Errorf("request %d's system prompt differs from the first's, or lacks the root's instructions:\n%s", i+1, s)
		}
	}
}

// TestRunInstructionsAfterCompaction reads a deep file, then runs a long
// task within a small window: after each compaction replaces the read's
// result, the instructions it carried come back once, in the replacement.
func TestRunInstructionsAfterCompaction(t *testing.T) {
	t.Parallel()
	const window = 32_000
	var mu sync.Mutex
	step := 0
	respond := func(req testenv.ModelRequest) testenv.Turn {
		if strings.Contains(string(req.Body), "You summarize the first part of a conversation") {
			return testenv.Turn{Text: "Task: read the file, then run the build steps. State: the steps above are built."}
		}
		mu.Lock()
		defer mu.Unlock()
		step++
		switch {
		case step == 1:
			return testenv.Turn{ToolCalls: []testenv.ToolCall{call("read", "read_file", map[string]any{"path": "sub/dir/file.go"})}}
		case step > compactionSteps:
			return testenv.Turn{Text: "All steps built."}
		}
		cmd := fmt.Sprintf("yes 'compiling unit %d of the build' | head -n 220", step)
		return testenv.Turn{ToolCalls: []testenv.ToolCall{call(fmt.Sprintf("step%d", step), "bash", map[string]any{"command": cmd})}}
	}
	turns := make([]testenv.Turn, 2*compactionSteps+2)
	for i := range turns {
		turns[i].Respond = respond
	}
	e := newE2E(t, turns...)
	testenv.WriteTree(t, e.ws, instructionsTree)
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
	out := e.run("run", "--events-jsonl", "--context-window", fmt.Sprint(window), "Read the file, then build every step.")
	if out.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", out.code, out.stderr)
	}
	compacted := 0
	var sys string
	for i, req := range e.model.Requests() {
		body := string(req.Body)
		if strings.Contains(body, "You summarize the first part of a conversation") {
			continue
		}
		if sys == "" {
			sys = system(t, req)
		} else if system(t, req) != sys {
			t.Errorf("request %d's system prompt changed", i+1)
		}
		if !strings.Contains(body, "were compacted to save context") {
			continue
		}
		compacted++
		for _, rule := range []string{"Sub rules", "Dir rules"} {
			if n := strings.Count(body, rule); n != 1 {
				t.Errorf("request %d, after a compaction, holds %q %d times, want 1", i+1, rule, n)
			}
		}
	}
	if compacted == 0 {
		t.Fatal("no request after a compaction")
	}
	t.Logf("%d requests after a compaction", compacted)
}
