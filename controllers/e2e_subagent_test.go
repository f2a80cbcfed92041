package controllers

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/subagent"
	"github.com/aerie-run/aerie/runner/transcript"
)

// childTask starts the task of the subagent in testPodDeletedDuringSubagent:
// the key of its conversation with the fake model.
const childTask = "child-pod: "

// testPodDeletedDuringSubagent deletes a runner pod while a subagent waits
// for the model's answer to its second request: attempt 2 resumes the
// child from its journal (its first call and result as attempt 1 last sent
// them, the call not run again), the child finishes, and the root gets its
// outcome exactly once, without its own first turn asked again.
func testPodDeletedDuringSubagent(t *testing.T, e *e2e) {
	const name = "subagent-resumed"
	held, release := make(chan struct{}), make(chan struct{})
	model := testenv.StartModelServer(t,
		callTurn("s1", subagent.Name, map[string]any{"task": childTask + "count the files"}),
		testenv.Turn{Text: "Done: the subagent counted.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	model.Conversation(childTask,
		bashTurn("c1", "echo once >> child.log; ls | wc -l"),
		testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			close(held)
			<-release
			return testenv.Turn{Text: "nobody reads this: attempt 1's pod is gone"}
		}},
		testenv.Turn{Text: "3 files.", Usage: testenv.TokenUsage{InputTokens: 50, OutputTokens: 5}})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the server's Close, which waits for the held request

	e.session(t, name, model)
	pod := e.pod(t, name)
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("attempt 1's subagent did not ask the model for its second turn within 2m")
	}
	if err := e.cp.Client.Delete(t.Context(), pod, client.Preconditions{UID: &pod.UID}); err != nil {
		t.Fatalf("delete runner pod: %v", err)
	}
	waitPodGone(t, e, pod)
	unblock()

	s := e.waitFinished(t, name)
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || s.Status.Attempts != 2 {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("want Succeeded in attempt 2; status:\n%s", b)
	}

	// The child: two requests in attempt 1, one in attempt 2 that goes on
	// from the held one, with the call c1 and its result once.
	var root, child []testenv.ModelRequest
	for _, r := range model.Requests() {
		if strings.HasPrefix(r.FirstUser(), childTask) {
			child = append(child, r)
		} else {
			root = append(root, r)
		}
	}
	if len(child) != 3 {
		t.Fatalf("the subagent made %d requests, want 3 (2 in attempt 1, 1 in attempt 2)", len(child))
	}
	if diff := cmp.Diff(messagesOf(t, child[1]), messagesOf(t, child[2])); diff != "" {
		t.Errorf("attempt 2's subagent did not go on from its journal (-attempt 1's last +attempt 2's first):\n%s", diff)
	}
	b, _ := json.Marshal(messagesOf(t, child[2]))
	if n, m := bytes.Count(b, []byte(`"id":"c1"`)), bytes.Count(b, []byte(`"tool_use_id":"c1"`)); n != 1 || m != 1 {
		t.Errorf("attempt 2's subagent sent the call c1 %d times and its result %d times, want once each", n, m)
	}

	// The root: its first turn once, then its last with the child's answer
	// as the one result of s1.
	if len(root) != 2 {
		t.Fatalf("the root made %d requests, want 2 (its first turn was not asked again)", len(root))
	}
	b, _ = json.Marshal(messagesOf(t, root[1]))
	if n := bytes.Count(b, []byte(`"tool_use_id":"s1"`)); n != 1 || !bytes.Contains(b, []byte("3 files.")) {
		t.Errorf("the root's last request has %d results of s1, want one with the child's answer: %s", n, b)
	}

	// Stored: the root journals one outcome and one result for s1; the
	// child completed under it, its call c1 answered once.
	rootID := uuid.MustParse(s.Status.SessionID)
	childID := subagent.ChildID(rootID, "s1")
	var outcomes []transcript.SubagentOutcome
	results := 0
	for _, en := range storedEntries(t, e, s) {
		switch p := en.Payload.(type) {
		case transcript.SubagentOutcome:
			outcomes = append(outcomes, p)
		case transcript.ToolResult:
			if p.CallID == "s1" {
				results++
			}
		}
	}
	if len(outcomes) != 1 || outcomes[0].Session != childID || outcomes[0].Outcome != transcript.OutcomeCompleted || results != 1 {
		t.Errorf("root's outcomes %+v and %d results of s1, want one completed outcome of %s and one result", outcomes, results, childID)
	}
	entries := storedChild(t, e, rootID, childID)
	c1 := 0
	for i, en := range entries {
		if en.Seq != int64(i+1) {
			t.Errorf("the subagent's entry %d has sequence number %d, want %d", i, en.Seq, i+1)
		}
		if p, ok := en.Payload.(transcript.ToolResult); ok && p.CallID == "c1" {
			c1++
		}
	}
	if c1 != 1 {
		t.Errorf("the subagent's journal answers c1 %d times, want once:\n%s", c1, describeEntries(entries))
	}
}

// storedChild is the entries in PostgreSQL of the subagent child of the
// session parent, after checking that it completed under parent.
func storedChild(t *testing.T, e *e2e, parent, child uuid.UUID) []transcript.Entry {
	t.Helper()
	st, err := dburl.Open(t.Context(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs, err := st.Session(t.Context(), e.ns, child)
	if err != nil {
		t.Fatalf("the subagent's stored session %s: %v", child, err)
	}
	if cs.State != store.StateCompleted || cs.ParentID != parent {
		t.Errorf("the subagent's session: state %s, parent %s; want completed under %s", cs.State, cs.ParentID, parent)
	}
	entries, err := st.Entries(t.Context(), e.ns, child)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
