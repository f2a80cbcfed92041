package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
)

// skillsTree is a workspace with two skills: one the agent reads with the
// skill tool, one whose SKILL.md it reads with read_file.
var skillsTree = map[string]string{
	".agents/skills/release/SKILL.md": "---\nname: release\ndescription: Use when releasing.\n---\n" +
		"RELEASE-RULE: sign every tag.\n",
	".agents/skills/lint/SKILL.md": "---\nname: lint\ndescription: Use when linting.\n---\n" +
		"LINT-RULE: run the linter twice.\n",
}

// TestRunSkillsAfterCompaction reads two skills, then runs a long task
// within a small window: every request after a compaction carries both
// skills once, in the replacement; so does the first request of a resumed
// run in a new process, and every request after it compacts again.
func TestRunSkillsAfterCompaction(t *testing.T) {
	t.Parallel()
	const window = 32_000
	var mu sync.Mutex
	step, steps := 0, compactionSteps
	respond := func(req testenv.ModelRequest) testenv.Turn {
		if strings.Contains(string(req.Body), summaryPrompt) {
			return testenv.Turn{Text: "Task: read the skills, then run the build steps. State: the steps above are built."}
		}
		mu.Lock()
		defer mu.Unlock()
		step++
		switch {
		case step == 1:
			return testenv.Turn{ToolCalls: []testenv.ToolCall{call("sk", "skill", map[string]any{"name": "release"})}}
		case step == 2:
			return testenv.Turn{ToolCalls: []testenv.ToolCall{call("rd", "read_file", map[string]any{"path": ".agents/skills/lint/SKILL.md"})}}
		case step > steps:
			return testenv.Turn{Text: "All steps built."}
		}
		cmd := fmt.Sprintf("yes 'compiling unit %d of the build' | head -n 220", step)
		return testenv.Turn{ToolCalls: []testenv.ToolCall{call(fmt.Sprintf("step%d", step), "bash", map[string]any{"command": cmd})}}
	}
	turns := make([]testenv.Turn, 4*compactionSteps)
	for i := range turns {
		turns[i].Respond = respond
	}
	e := newE2E(t, turns...)
	testenv.WriteTree(t, e.ws, skillsTree)
	e.model.SetContextWindow(testenv.ContextWindow{Tokens: window})
	first := e.run("run", "--events-jsonl", "--context-window", fmt.Sprint(window), "Read the skills, then build every step.")
	if first.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", first.code, first.stderr)
	}
	n := len(e.model.Requests())
	if compacted := skillsAfterCompaction(t, e.model.Requests()); compacted == 0 {
		t.Fatal("no request after a compaction")
	}

	// A new process resumes the compacted session: its first request is
	// the replacement and the tail, with both skills; then it compacts
	// again, and they come back again.
	mu.Lock()
	step, steps = 2, 2+compactionSteps/2
	mu.Unlock()
	second := e.run("run", "--events-jsonl", "--context-window", fmt.Sprint(window), "--resume", first.end(t).Session, "Build the remaining steps.")
	if second.code != 0 {
		t.Fatalf("resume: exit %d; stderr:\n%s", second.code, second.stderr)
	}
	resumed := e.model.Requests()[n:]
	if len(resumed) == 0 {
		t.Fatal("the resumed run made no request")
	}
	for _, rule := range []string{"RELEASE-RULE", "LINT-RULE"} {
		if c := strings.Count(string(resumed[0].Body), rule); c != 1 {
			t.Errorf("the resumed run's first request holds %q %d times, want 1", rule, c)
		}
	}
	summaries := 0
	for _, req := range resumed {
		if strings.Contains(string(req.Body), summaryPrompt) {
			summaries++
		}
	}
	if summaries == 0 {
		t.Fatal("the resumed run did not compact again")
	}
	skillsAfterCompaction(t, resumed)
}

// skillsAfterCompaction checks that each request of reqs made after a
// compaction holds each skill's rule once, and returns how many there are.
func skillsAfterCompaction(t *testing.T, reqs []testenv.ModelRequest) int {
	t.Helper()
	compacted := 0
	for i, req := range reqs {
		body := string(req.Body)
		if strings.Contains(body, summaryPrompt) || !strings.Contains(body, "were compacted to save context") {
			continue
		}
		compacted++
		if !strings.Contains(body, "The skills read before the conversation was compacted") {
			t.Errorf("request %d, after a compaction, does not re-attach the skills", i+1)
		}
		for _, rule := range []string{"RELEASE-RULE", "LINT-RULE"} {
			if c := strings.Count(body, rule); c != 1 {
				t.Errorf("request %d, after a compaction, holds %q %d times, want 1", i+1, rule, c)
			}
		}
	}
	return compacted
}
