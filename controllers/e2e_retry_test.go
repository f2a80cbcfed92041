package controllers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// testPodDeletedResumes deletes a runner pod from outside (evict: through
// the Eviction API, as a node drain does), while the model holds the
// agent's second turn or (midTool) while a tool runs: the
// controller starts attempt 2, which resumes the same session from
// PostgreSQL with attempt 1's history and finishes it; the journal has
// every entry once, and nothing of attempt 1's pod is left running.
func testPodDeletedResumes(t *testing.T, e *e2e, name string, midTool, evict bool) {
	held, release := make(chan struct{}), make(chan struct{})
	var turns []testenv.Turn
	lastOf1, firstOf2 := 2, 3 // the turns of attempt 1's last request and attempt 2's first
	if midTool {
		// The call runs in the foreground: the pod goes while it runs.
		turns = append(turns, bashTurn("c1", "echo $$ > tool.pid; sleep 600"))
		close(held)
		lastOf1, firstOf2 = 1, 2
	} else {
		turns = append(turns,
			// A process that would outlive its tool call, and the pod too
			// if nothing tore its group down.
			callTurn("c1", "bash", map[string]any{"command": "echo $$ > tool.pid; exec sleep 600", "background": true}),
			testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
				close(held)
				<-release
				return testenv.Turn{Text: "nobody reads this: attempt 1's pod is gone"}
			}})
	}
	turns = append(turns,
		bashTurn("c2", "echo resumed > resumed.txt"),
		testenv.Turn{Text: "Done after a retry.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
	model := testenv.StartModelServer(t, turns...)
	// Registered after the model server's own cleanup, so it runs first:
	// the server's Close waits for the held request.
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)

	e.session(t, name, model)
	pod := e.pod(t, name)
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("attempt 1 did not ask the model for its second turn within 2m")
	}
	toolPIDText := waitForFile(t, filepath.Join(e.runner.VolumePath(pod, volumeWorkspace), "tool.pid"))
	toolPID, err := strconv.Atoi(strings.TrimSpace(string(toolPIDText)))
	if err != nil {
		t.Fatalf("tool.pid: %v", err)
	}
	toolPID = hostPID(t, pod.Name, toolPID)
	procs := podProcesses(t, pod.Name)
	if !slicesContainsPID(procs, toolPID) {
		t.Fatalf("the tool's process %d is not among the pod's processes %v", toolPID, procs)
	}

	// Someone deletes the pod: the runner gets SIGTERM and its grace period.
	if evict {
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}}
		if err := e.cp.Client.SubResource("eviction").Create(t.Context(), pod, eviction); err != nil {
			t.Fatalf("evict runner pod: %v", err)
		}
	} else if err := e.cp.Client.Delete(t.Context(), pod, client.Preconditions{UID: &pod.UID}); err != nil {
		t.Fatalf("delete runner pod: %v", err)
	}
	waitPodGone(t, e, pod)
	waitProcessesGone(t, procs)
	unblock()

	s := e.waitFinished(t, name)
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || s.Status.Attempts != 2 || s.Status.PodName != childName(name, 2) || s.Status.SessionID != string(s.UID) {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("want Succeeded in attempt 2 (pod %s) with session id %s; status:\n%s", childName(name, 2), s.UID, b)
	}
	// The retry was reported when attempt 2 started.
	retry := retryEvent(t, e, name)
	if want := fmt.Sprintf("attempt 2 of %d resumes session %s in pod %s", defaultMaxAttempts, s.UID, childName(name, 2)); !strings.Contains(retry, want) {
		t.Errorf("Retrying event %q, want it to say %q", retry, want)
	}
	// Attempt 2 ran its tool in its own workspace.
	pod2 := e.podN(t, name, 2)
	if b, err := os.ReadFile(filepath.Join(e.runner.VolumePath(pod2, volumeWorkspace), "resumed.txt")); err != nil || string(b) != "resumed\n" {
		t.Errorf("attempt 2's resumed.txt = %q, %v", b, err)
	}

	// Attempt 2 sent the model attempt 1's conversation as it stood: what
	// attempt 1 last sent, then (mid-tool) the call and its result.
	sent1, sent2 := messagesOf(t, requestForTurn(t, model, lastOf1)), messagesOf(t, requestForTurn(t, model, firstOf2))
	if len(sent2) < len(sent1) {
		t.Fatalf("attempt 2 sent %d messages, fewer than attempt 1's %d", len(sent2), len(sent1))
	}
	if diff := cmp.Diff(sent1, sent2[:len(sent1)]); diff != "" {
		t.Errorf("attempt 2's first request does not go on from attempt 1's last (-attempt 1 +attempt 2):\n%s", diff)
	}
	b, _ := json.Marshal(sent2)
	if n, m := bytes.Count(b, []byte(`"id":"c1"`)), bytes.Count(b, []byte(`"tool_use_id":"c1"`)); n != 1 || m != 1 {
		t.Errorf("attempt 2 sent the call c1 %d times and its result %d times, want once each: %s", n, m, b)
	}

	// The journal: one session, contiguous sequence numbers, the task, each
	// tool call and each result exactly once.
	entries := storedEntries(t, e, s)
	var prompts int
	calls, results := map[string]int{}, map[string]int{}
	for i, en := range entries {
		if en.Seq != int64(i+1) {
			t.Errorf("entry %d has sequence number %d, want %d (a gap or a duplicate)", i, en.Seq, i+1)
		}
		switch p := en.Payload.(type) {
		case transcript.UserMessage:
			for _, b := range p.Content {
				if b.Type == transcript.BlockText && b.Text == s.Spec.Prompt {
					prompts++
				}
			}
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
	want := map[string]int{"c1": 1, "c2": 1}
	if prompts != 1 || !cmp.Equal(calls, want) || !cmp.Equal(results, want) {
		t.Errorf("stored: the task %d times, tool calls %v, tool results %v; want each once\n%s", prompts, calls, results, describeEntries(entries))
	}
}

// waitPodGone waits until the pod object is removed, which the pod runner
// does once its containers have stopped.
func waitPodGone(t *testing.T, e *e2e, pod *corev1.Pod) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var p corev1.Pod
		err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), &p)
		if apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("runner pod %s still there a minute after its deletion: %v", pod.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// retryEvent is the note of the session's Retrying event.
func retryEvent(t *testing.T, e *e2e, session string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list eventsv1.EventList
		if err := e.cp.Client.List(t.Context(), &list, client.InNamespace(e.ns)); err != nil {
			t.Fatalf("list events: %v", err)
		}
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "AgentSession" && ev.Regarding.Name == session && ev.Reason == aeriev1alpha1.ReasonRetrying {
				return ev.Note
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for session %s", aeriev1alpha1.ReasonRetrying, session)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requestForTurn is the request the model server answered with turn n.
func requestForTurn(t *testing.T, model *testenv.ModelServer, n int) testenv.ModelRequest {
	t.Helper()
	for _, r := range model.Requests() {
		if r.Turn == n && !r.Fault {
			return r
		}
	}
	t.Fatalf("the model server answered no request with turn %d", n)
	return testenv.ModelRequest{}
}

// messagesOf is the conversation an Anthropic request carries.
func messagesOf(t *testing.T, r testenv.ModelRequest) []any {
	t.Helper()
	var body struct {
		Messages []any `json:"messages"`
	}
	if err := r.Decode(&body); err != nil {
		t.Fatalf("decode request: %v", err)
	}
	for _, m := range body.Messages {
		dropCacheControl(m)
	}
	return body.Messages
}

// dropCacheControl removes the cache breakpoints from a decoded message:
// they mark where each request's cached prefix ends, which moves on with
// the conversation, and are not part of what was said.
func dropCacheControl(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "cache_control")
		for _, x := range v {
			dropCacheControl(x)
		}
	case []any:
		for _, x := range v {
			dropCacheControl(x)
		}
	}
}

// storedEntries are the session's entries in PostgreSQL, after checking
// that the stored session completed.
func storedEntries(t *testing.T, e *e2e, s *aeriev1alpha1.AgentSession) []transcript.Entry {
	t.Helper()
	st, err := dburl.Open(t.Context(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := uuid.MustParse(s.Status.SessionID)
	sess, err := st.Session(t.Context(), e.ns, id)
	if err != nil {
		t.Fatalf("stored session %s: %v", id, err)
	}
	if sess.State != store.StateCompleted {
		t.Errorf("stored session state %s, want completed", sess.State)
	}
	entries, err := st.Entries(t.Context(), e.ns, id)
	if err != nil {
		t.Fatalf("stored entries of %s: %v", id, err)
	}
	return entries
}

func describeEntries(entries []transcript.Entry) string {
	var b strings.Builder
	for _, en := range entries {
		p, _ := json.Marshal(en.Payload)
		fmt.Fprintf(&b, "%d %s %s\n", en.Seq, en.Kind(), p)
	}
	return b.String()
}

// proc is a process, told from a later one with its pid by its start time.
type proc struct {
	PID   int
	Start string
}

// podProcesses are the processes of a pod the pod runner runs: those of
// its containers (whose environment names the pod as HOSTNAME) and all
// their descendants, tools included.
func podProcesses(t *testing.T, pod string) []proc {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	var roots []int
	marker := []byte("HOSTNAME=" + pod + "\x00")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, ok := procStat(pid)
		if !ok {
			continue
		}
		ppid, _ := strconv.Atoi(st[1])
		children[ppid] = append(children[ppid], pid)
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil && bytes.Contains(env, marker) {
			roots = append(roots, pid)
		}
	}
	if len(roots) < 2 {
		t.Fatalf("found %d processes of pod %s, want at least its two containers'", len(roots), pod)
	}
	seen := map[int]bool{}
	var out []proc
	for queue := roots; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if st, ok := procStat(pid); ok {
			out = append(out, proc{PID: pid, Start: st[19]})
		}
		queue = append(queue, children[pid]...)
	}
	return out
}

// procStat is the fields of /proc/pid/stat after the command's name (state
// first), and whether the process is alive: not gone, not a zombie.
func procStat(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return nil, false
	}
	return f, true
}

func slicesContainsPID(procs []proc, pid int) bool {
	for _, p := range procs {
		if p.PID == pid {
			return true
		}
	}
	return false
}

// waitProcessesGone waits until none of procs runs any more.
func waitProcessesGone(t *testing.T, procs []proc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var alive []proc
		for _, p := range procs {
			if st, ok := procStat(p.PID); ok && st[19] == p.Start {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the deleted pod still run 30s after it was removed: %v", alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostPID is the host's id of a pod's process that reported its id as
// nsPID from inside the pod: on a real node a container has a PID
// namespace of its own, and /proc/<pid>/status's NSpid ends with the id
// it sees; the local pod runner's processes see the host's ids.
func hostPID(t *testing.T, pod string, nsPID int) int {
	t.Helper()
	for _, p := range podProcesses(t, pod) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" && f[len(f)-1] == strconv.Itoa(nsPID) {
				return p.PID
			}
		}
	}
	return nsPID
}
