package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// compactHooks writes home-layer hooks that record the PreCompact input in
// precompact.json of the workspace, and a SessionStart hook for source
// compact that adds context.
func compactHooks(t *testing.T, e *e2e) {
	t.Helper()
	testenv.WriteFile(t, filepath.Join(e.home, "precompact.sh"), "#!/bin/sh\ncat > precompact.json\n", 0o755)
	testenv.WriteFile(t, filepath.Join(e.home, "hooks/compact.yaml"), `hooks:
  PreCompact:
    - hooks:
        - type: command
          command: "`+filepath.Join(e.home, "precompact.sh")+`"
  SessionStart:
    - matcher: compact
      hooks:
        - type: command
          command: "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"SessionStart\", \"additionalContext\": \"The release is on Friday.\"}}'"
`, 0o644)
}

// requestTexts returns every text and tool result of a request, by message.
func requestTexts(t *testing.T, req testenv.ModelRequest) []string {
	t.Helper()
	var r anthropicRequest
	if err := req.Decode(&r); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		var b strings.Builder
		for _, c := range m.Content {
			b.WriteString(c.Text)
			b.Write(c.Content)
		}
		out[i] = b.String()
	}
	return out
}

// TestSessionCompact compacts a stored session with aerie session compact:
// the hooks run, the checkpoint is journaled, and the next resume sends
// the summary and the tail only.
func TestSessionCompact(t *testing.T) {
	t.Parallel()
	e := newE2E(t, buildSteps(12)...)
	out := e.run("run", "--events-jsonl", "Build every step.")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	id := out.end(t).Session
	compactHooks(t, e)

	before := len(e.model.Requests())
	out = e.run("session", "compact", "--base-url", e.model.URL(), "--json", id[:8], "keep the step numbers")
	if out.code != 0 {
		t.Fatalf("session compact: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	var got sessionCompactJSON
	if err := json.Unmarshal([]byte(out.stdout), &got); err != nil {
		t.Fatalf("session compact --json: %v\n%s", err, out.stdout)
	}
	if !got.Compacted || got.Messages < 4 || got.TokensAfter <= 0 || got.TokensAfter >= got.TokensBefore ||
		got.Session.ID.String() != id || got.Model != "claude-sonnet-4-5" {
		t.Errorf("session compact --json = %+v", got)
	}
	if got.Session.State != string(store.StateCompleted) {
		t.Errorf("the compacted session is %s, want it left completed", got.Session.State)
	}
	reqs := e.model.Requests()[before:]
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "You summarize the first part") ||
		!strings.Contains(string(reqs[0].Body), "keep the step numbers") {
		t.Fatalf("session compact sent %d requests, want one summary request with the instructions", len(reqs))
	}

	var pre struct {
		Event        string  `json:"hook_event_name"`
		Trigger      string  `json:"trigger"`
		Instructions *string `json:"custom_instructions"`
		Session      string  `json:"session_id"`
	}
	b, err := os.ReadFile(filepath.Join(e.ws, "precompact.json"))
	if err != nil {
		t.Fatalf("the PreCompact hook did not run: %v", err)
	}
	if err := json.Unmarshal(b, &pre); err != nil {
		t.Fatal(err)
	}
	if pre.Event != "PreCompact" || pre.Trigger != "manual" || pre.Instructions == nil ||
		*pre.Instructions != "keep the step numbers" || pre.Session != id {
		t.Errorf("PreCompact input = %s", b)
	}

	var checkpoint transcript.Compaction
	for _, en := range e.entries(id) {
		if c, ok := en.Payload.(transcript.Compaction); ok {
			checkpoint = c
		}
	}
	if p := checkpoint.Provenance; p.Trigger != "manual" || p.Messages != got.Messages || p.TokensBefore != got.TokensBefore {
		t.Errorf("the journaled compaction = %+v, want the one reported", p)
	}

	before = len(e.model.Requests())
	out = e.run("run", "--events-jsonl", "--resume", id, "Check the steps.")
	if out.code != 0 {
		t.Fatalf("resume: exit %d\n%s", out.code, out.stderr)
	}
	msgs := requestTexts(t, e.model.Requests()[before])
	first := msgs[0]
	for _, want := range []string{"<summary>", "Task: run the build steps in order.", "The release is on Friday."} {
		if !strings.Contains(first, want) {
			t.Errorf("the resumed request's first message lacks %q:\n%s", want, first)
		}
	}
	all := strings.Join(msgs, "\n")
	if strings.Contains(all, "compiling unit 1 of the build") || strings.Contains(all, "Build every step.") {
		t.Error("the resumed request still holds the compacted start of the conversation")
	}
	if !strings.Contains(all, "compiling unit 12 of the build") || msgs[len(msgs)-1] != "Check the steps." {
		t.Errorf("the resumed request lacks the tail or the new prompt: %d messages, last %q", len(msgs), msgs[len(msgs)-1])
	}
	// The conversation was the task, a call and a result per step and the
	// answer: 26 messages.
	if len(msgs) >= 26 {
		t.Errorf("the resumed request has %d messages: the whole conversation", len(msgs))
	}
}

// TestSessionCompactRefuses: an active session is not compacted, and one
// too short to cut is nothing to do.
func TestSessionCompactRefuses(t *testing.T) {
	t.Parallel()
	e := newE2E(t, answer("done"))
	out := e.run("run", "--events-jsonl", "a short task")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	id := out.end(t).Session
	before := len(e.model.Requests())

	out = e.run("session", "compact", "--base-url", e.model.URL(), id)
	if out.code != 0 || !strings.Contains(out.stdout, "Nothing to compact") ||
		!strings.Contains(out.stdout, "too short to compact") {
		t.Errorf("a short session: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	out = e.run("session", "compact", "--base-url", e.model.URL(), "--json", id)
	var got sessionCompactJSON
	if err := json.Unmarshal([]byte(out.stdout), &got); err != nil || out.code != 0 || got.Compacted || got.Reason == "" {
		t.Errorf("a short session --json: exit %d %+v (%v)\n%s", out.code, got, err, out.stderr)
	}

	if out := e.run("session", "switch", id); out.code != 0 {
		t.Fatalf("switch: exit %d\n%s", out.code, out.stderr)
	}
	out = e.run("session", "compact", "--base-url", e.model.URL(), id)
	if out.code != 1 || !strings.Contains(out.stderr, "the session is active") {
		t.Errorf("an active session: exit %d\n%s", out.code, out.stderr)
	}
	// A run's /compact is refused the same way.
	out = e.run("run", "--events-jsonl", "--resume", id, "/compact")
	if out.code != 2 || !strings.Contains(out.stderr, "the session is active") {
		t.Errorf("/compact of an active session: exit %d\n%s", out.code, out.stderr)
	}
	if n := len(e.model.Requests()); n != before {
		t.Errorf("%d model requests to compact nothing", n-before)
	}
}

// TestRunCompactCommand: /compact as the prompt of a resumed run compacts
// the conversation, with its focus instructions, and ends the run without
// a model turn.
func TestRunCompactCommand(t *testing.T) {
	t.Parallel()
	e := newE2E(t, buildSteps(10)...)
	out := e.run("run", "--events-jsonl", "Build every step.")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	id := out.end(t).Session
	compactHooks(t, e)
	before := len(e.model.Requests())
	out = e.run("run", "--events-jsonl", "--resume", id, "/compact focus on the failing steps")
	if out.code != 0 {
		t.Fatalf("/compact: exit %d\n%s", out.code, out.stderr)
	}
	var compactions []events.Event
	for _, ev := range out.events {
		if ev.Type == events.Compaction {
			compactions = append(compactions, ev)
		}
		if ev.Type == events.UserMessage || ev.Type == events.AssistantMessage {
			t.Errorf("/compact ran a turn: %s event %q", ev.Type, ev.Text)
		}
	}
	if len(compactions) != 1 || compactions[0].Compaction.Trigger != "manual" {
		t.Fatalf("compaction events %+v, want one, manual", compactions)
	}
	if end := out.end(t); end.Outcome != transcript.OutcomeCompleted || !strings.Contains(end.Reason, "compacted") {
		t.Errorf("session end %s %q", end.Outcome, end.Reason)
	}
	reqs := e.model.Requests()[before:]
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "focus on the failing steps") {
		t.Errorf("/compact sent %d requests, want one summary request with the instructions", len(reqs))
	}
	b, err := os.ReadFile(filepath.Join(e.ws, "precompact.json"))
	if err != nil || !strings.Contains(string(b), `"custom_instructions":"focus on the failing steps"`) {
		t.Errorf("PreCompact input %s (%v)", b, err)
	}

	// A new session has nothing to compact.
	out = e.run("run", "/compact")
	if out.code != 2 || !strings.Contains(out.stderr, "resume the session to compact") {
		t.Errorf("/compact of a new session: exit %d\n%s", out.code, out.stderr)
	}
}
