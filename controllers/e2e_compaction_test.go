package controllers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// compactionFiles is how many empty files the listing of the compaction
// test shows: enough for list_directory's output to be compressed, and
// for retrieve to give it back in more than one page.
const compactionFiles = 1400

// compactionReplacement starts the message that stands in for the
// messages a compaction replaced.
const compactionReplacement = "This conversation continues an earlier one whose first "

// compactionScript is the model of testCompactionResumes: it makes the
// files, lists them (compressed, with a retrieve handle), runs long bash
// steps until the runner compacts the conversation, holds the first
// request after the compaction (attempt 1's pod is deleted meanwhile),
// and in attempt 2 retrieves the listing, runs one more step and ends.
type compactionScript struct {
	t       *testing.T
	held    chan struct{}
	release chan struct{}

	mu        sync.Mutex
	step      int
	compacted bool
	phase     int // 0 attempt 1, 1 held, 2 attempt 2's first request answered, 3 retrieved, 4 done
	lastOf1   []any
	firstOf2  []any
	retrieved string
}

const summaryAsk = "You summarize the first part of a conversation"

// stepTurn calls tool with args and reports no usage, so that the fake
// server reports the request's real size, which the runner's compaction
// trigger reads.
func stepTurn(id, tool string, args map[string]any) testenv.Turn {
	turn := callTurn(id, tool, args)
	turn.Usage = testenv.TokenUsage{}
	return turn
}

func (c *compactionScript) respond(req testenv.ModelRequest) testenv.Turn {
	if strings.Contains(string(req.Body), summaryAsk) {
		c.mu.Lock()
		c.compacted = true
		c.mu.Unlock()
		return testenv.Turn{Text: "Task: make the files, list them, run the build steps in order. State: the steps so far are built; the listing is handle l."}
	}
	c.mu.Lock()
	phase := c.phase
	if c.compacted && phase == 0 {
		c.phase = 1
		c.lastOf1 = messagesOf(c.t, req)
		c.mu.Unlock()
		close(c.held)
		<-c.release
		return testenv.Turn{Text: "nobody reads this: attempt 1's pod is gone"}
	}
	defer c.mu.Unlock()
	switch phase {
	case 0:
		c.step++
		switch c.step {
		case 1:
			cmd := fmt.Sprintf("echo step 1 >> steps.log && mkdir many && for i in $(seq -f %%04g 0 %d); do : > many/file_$i.txt; done", compactionFiles-1)
			return stepTurn("step1", "bash", map[string]any{"command": cmd})
		case 2:
			return stepTurn("l", "list_directory", map[string]any{"path": "many"})
		}
		cmd := fmt.Sprintf("echo step %d >> steps.log && yes 'compiling unit %d of the build' | head -n 220", c.step, c.step)
		return stepTurn(fmt.Sprintf("step%d", c.step), "bash", map[string]any{"command": cmd})
	case 1:
		c.phase = 2
		c.firstOf2 = messagesOf(c.t, req)
		return stepTurn("r", "retrieve", map[string]any{"handle": "l"})
	case 2:
		c.phase = 3
		c.retrieved = toolResults(c.t, req)["r"]
		return stepTurn("final", "bash", map[string]any{"command": "echo step final >> steps.log"})
	default:
		c.phase = 4
		return testenv.Turn{Text: "Built after a retry."}
	}
}

// testCompactionResumes runs a session whose tool outputs fill its small
// context window, with tool-result compression turned on by a namespace
// layer's config.toml: once the runner has stored a compaction checkpoint,
// its pod is deleted; attempt 2 resumes from the replacement and the tail,
// not the whole history, every step runs once, the journal is contiguous,
// and retrieve gives attempt 2 the original bytes of a listing attempt 1
// compressed.
func testCompactionResumes(t *testing.T, e *e2e) {
	e, _ = e.withNamespaceLayer(t, "compress", map[string]string{"config.toml": "[tool_results]\ncompress_context = true\n"})

	script := &compactionScript{t: t, held: make(chan struct{}), release: make(chan struct{})}
	// A turn for each request, with room for the summaries; each looks
	// at the request it answers.
	turns := make([]testenv.Turn, 80)
	for i := range turns {
		turns[i].Respond = script.respond
	}
	model := testenv.StartModelServer(t, turns...)
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(script.release) }) }
	t.Cleanup(unblock)

	const name = "compacted"
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Make the files, list them and build every step.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: model.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
				ContextWindow:   ptr.To[int64](32_000),
			},
		},
	}
	if err := e.cp.Client.Create(t.Context(), s); err != nil {
		t.Fatalf("create session %s: %v", name, err)
	}
	pod := e.pod(t, name)
	select {
	case <-script.held:
	case <-time.After(5 * time.Minute):
		t.Fatal("attempt 1 did not compact and ask the model again within 5m")
	}
	waitCompactionStored(t, e, name)
	// Attempt 1's steps, before its workspace goes with its pod.
	log1, err := os.ReadFile(filepath.Join(e.runner.VolumePath(pod, volumeWorkspace), "steps.log"))
	if err != nil {
		t.Fatalf("attempt 1's steps.log: %v", err)
	}
	if err := e.cp.Client.Delete(t.Context(), pod, client.Preconditions{UID: &pod.UID}); err != nil {
		t.Fatalf("delete runner pod: %v", err)
	}
	waitPodGone(t, e, pod)
	unblock()

	done := e.waitFinishedWithin(t, name, 5*time.Minute)
	if done.Status.Phase != aeriev1alpha1.PhaseSucceeded || done.Status.Attempts != 2 {
		b, _ := json.MarshalIndent(done.Status, "", "  ")
		t.Fatalf("want Succeeded in attempt 2; status:\n%s", b)
	}
	log2, err := os.ReadFile(filepath.Join(e.runner.VolumePath(e.podN(t, name, 2), volumeWorkspace), "steps.log"))
	if err != nil {
		t.Fatalf("attempt 2's steps.log: %v", err)
	}

	script.mu.Lock()
	defer script.mu.Unlock()
	checkResumedFromReplacement(t, script.lastOf1, script.firstOf2)
	checkStepsOnce(t, string(log1), string(log2), script.step)
	// retrieve in attempt 2 gave back the first page of attempt 1's
	// listing, byte for byte.
	var want strings.Builder
	for i := range compactionFiles {
		fmt.Fprintf(&want, "file_%04d.txt (0 bytes)\n", i)
	}
	page, next := retrievedPage(t, script.retrieved)
	if next <= 0 || page != want.String()[:next] {
		t.Errorf("retrieve in attempt 2: a page of %d bytes up to %d, not the original's first:\n%.300s", len(page), next, script.retrieved)
	}
	checkCompactedJournal(t, storedEntries(t, e, done))
}

// checkResumedFromReplacement checks that attempt 2's first request
// starts with the replacement of the compaction, as attempt 1's last
// request after it did, and goes on from that request.
func checkResumedFromReplacement(t *testing.T, lastOf1, firstOf2 []any) {
	t.Helper()
	if len(firstOf2) == 0 || len(firstOf2) < len(lastOf1) {
		t.Fatalf("attempt 2 sent %d messages, attempt 1 last %d", len(firstOf2), len(lastOf1))
	}
	b, _ := json.Marshal(firstOf2[0])
	if !strings.Contains(string(b), compactionReplacement) || !strings.Contains(string(b), "the listing is handle l") {
		t.Errorf("attempt 2's first message is not the compaction's replacement: %.400s", b)
	}
	if all, _ := json.Marshal(firstOf2); strings.Contains(string(all), "Make the files, list them and build every step.") {
		t.Errorf("attempt 2 sent the task, which the compaction replaced: the whole history, not replacement + tail")
	}
	if diff := cmp.Diff(lastOf1, firstOf2[:len(lastOf1)]); diff != "" {
		t.Errorf("attempt 2's first request does not go on from attempt 1's last (-attempt 1 +attempt 2):\n%s", diff)
	}
}

// checkStepsOnce checks that each step of the script ran exactly once, in
// one attempt or the other.
func checkStepsOnce(t *testing.T, log1, log2 string, steps int) {
	t.Helper()
	runs := map[string]int{}
	for l := range strings.Lines(log1 + log2) {
		runs[strings.TrimSpace(l)]++
	}
	want := map[string]int{"step final": 1}
	for s := 1; s <= steps; s++ {
		if s != 2 { // the listing
			want[fmt.Sprintf("step %d", s)] = 1
		}
	}
	if !cmp.Equal(runs, want) {
		t.Errorf("steps run %v, want each once: %v\nattempt 1:\n%sattempt 2:\n%s", runs, want, log1, log2)
	}
	if strings.Contains(log2, "step 1\n") || log2 != "step final\n" {
		t.Errorf("attempt 2 ran %q, want only the final step", log2)
	}
}

// checkCompactedJournal checks the journal: contiguous from 1, one
// compaction checkpoint, every tool call and its result exactly once.
func checkCompactedJournal(t *testing.T, entries []transcript.Entry) {
	t.Helper()
	compactions := 0
	calls, results := map[string]int{}, map[string]int{}
	for i, en := range entries {
		if en.Seq != int64(i+1) {
			t.Errorf("entry %d has sequence number %d, want %d (a gap or a duplicate)", i, en.Seq, i+1)
		}
		switch p := en.Payload.(type) {
		case transcript.Compaction:
			compactions++
		case transcript.AssistantMessage:
			for _, b := range p.Content {
				if b.Type == transcript.BlockToolUse {
					calls[b.ID]++
				}
			}
		case transcript.ToolResult:
			results[p.CallID]++
		}
	}
	if compactions != 1 {
		t.Errorf("%d compaction checkpoints, want 1\n%s", compactions, describeEntries(entries))
	}
	for id, n := range calls {
		if n != 1 || results[id] != 1 {
			t.Errorf("call %s stored %d times, its result %d times", id, n, results[id])
		}
	}
	if len(calls) != len(results) || calls["r"] != 1 || calls["l"] != 1 || calls["final"] != 1 {
		t.Errorf("stored calls %v, results %v", calls, results)
	}
}

// waitCompactionStored waits until the session's journal holds a
// compaction checkpoint.
func waitCompactionStored(t *testing.T, e *e2e, name string) {
	t.Helper()
	var s aeriev1alpha1.AgentSession
	if err := e.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: e.ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	st, err := dburl.Open(t.Context(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The session's id in the store is its UID.
	id := uuid.MustParse(string(s.UID))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		entries, err := st.Entries(t.Context(), e.ns, id)
		if err == nil {
			for _, en := range entries {
				if _, ok := en.Payload.(transcript.Compaction); ok {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction checkpoint stored for %s within 2m: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// retrievedPage splits a page of retrieve's output into the original's
// bytes and the offset of the next page (-1 after the last).
func retrievedPage(t *testing.T, got string) (string, int) {
	t.Helper()
	page, note, ok := strings.Cut(got, "\n[retrieve: bytes ")
	if !ok {
		return got, -1
	}
	if strings.HasSuffix(note, "the end]") {
		return page, -1
	}
	var next int
	if _, err := fmt.Sscanf(note[strings.LastIndex(note, "offset=")+len("offset="):], "%d", &next); err != nil {
		t.Fatalf("no next offset in %q", note)
	}
	return page, next
}
