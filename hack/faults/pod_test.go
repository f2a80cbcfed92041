package faults

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/transcript"
)

// podSteps is the length of the pod sessions' task; every step's command
// appends its line, records its shell's pid and works a second.
const podSteps = 4

// TestPodContainerKilled kills a runner pod's container with SIGKILL in
// the middle of a tool call — the workspace container (the executor
// sidecar, whose process runs the call) or the agent container (the
// runner), the latter also in sessions whose steps a custom tool, a
// subagent and a hook take part in (podKillExtensions) — and checks what
// aerie does: the session completes (the
// sidecar restarted, or the pod retried with resume, per the retry
// policy), the interrupted call answered as interrupted and never made
// again, every step's command run once across the attempts, the journal
// in PostgreSQL numbered from 1 with every call stored and answered once,
// and no process of the tools left.
func TestPodContainerKilled(t *testing.T) {
	c := startCluster(t)
	for _, container := range []string{"workspace", "agent"} {
		for i := range 2 * scale() {
			name := fmt.Sprintf("kill-%s-%d", container, i)
			t.Run(name, func(t *testing.T) {
				c.t = t
				c.podKill(name, container, 2+i%(podSteps-1))
			})
		}
	}
	rng := rand.New(rand.NewPCG(22, uint64(scale())))
	for i := range 3 * scale() {
		name := fmt.Sprintf("kill-agent-random-%d", i)
		delay := time.Duration(rng.Int64N(int64(4 * time.Second)))
		t.Run(name, func(t *testing.T) {
			c.t = t
			c.podKillAt(name, delay)
		})
	}
	c.t = t
	c.createExtensionLayer()
	for i := range 4 * scale() {
		// In the custom tool's command, the subagent's, bash's after
		// both, or at a random point.
		step, delay := 2+i%4, time.Duration(0)
		if step == 5 {
			step, delay = 0, time.Duration(rng.Int64N(int64(6*time.Second)))
		}
		name := fmt.Sprintf("kill-agent-extensions-%d", i)
		t.Run(name, func(t *testing.T) {
			c.t = t
			c.podKillExtensions(name, step, delay)
		})
	}
}

// podKillAt runs the session name and kills its agent container (the
// runner) delay after its pod was bound: while it starts, streams, calls a
// tool or journals.
func (c *cluster) podKillAt(name string, delay time.Duration) {
	t := c.t
	c.session(name, podStepTurns(t))
	pod := c.boundPod(name, 1)
	time.Sleep(delay)
	if pid, err := containerPID(pod.Name, "runner"); err == nil {
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			counts.faults.Add(1)
		}
	} else {
		t.Logf("session %s: no agent container to kill after %s (%v)", name, delay, err)
	}
	got := c.waitFinished(name)
	t.Logf("session %s: %s in %d attempts after its agent container was killed %s after the pod was bound", name, got.Status.Phase, got.Status.Attempts, delay.Round(time.Millisecond))
	if got.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		violation(t, "session %s: phase %s, want Succeeded; status: %s", name, got.Status.Phase, statusJSON(got))
	}
	c.checkPodSession(got)
}

// waitFinished waits for the session to finish, for at most three minutes.
func (c *cluster) waitFinished(name string) *aeriev1alpha1.AgentSession {
	t := c.t
	var got aeriev1alpha1.AgentSession
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := c.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: c.ns, Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase.Finished() {
			return &got
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s not finished within 3m: %s", name, statusJSON(&got))
		}
	}
}

// podKill runs the session name and kills its container once the
// command of step is running.
func (c *cluster) podKill(name, container string, step int) {
	t := c.t
	c.session(name, podStepTurns(t))
	c.killInStep(name, container, step)
	got := c.waitFinished(name)
	t.Logf("session %s: %s in %d attempts after its %s container was killed in step %d", name, got.Status.Phase, got.Status.Attempts, container, step)
	if got.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		violation(t, "session %s: phase %s after its %s container was killed, want Succeeded; status: %s", name, got.Status.Phase, container, statusJSON(got))
	}
	c.checkPodSession(got)
}

// killInStep kills a container of the first pod of session name, with
// SIGKILL, once the command of step is running.
func (c *cluster) killInStep(name, container string, step int) {
	t := c.t
	pod := c.boundPod(name, 1)
	ws := c.runner.VolumePath(pod, "workspace")
	line := fmt.Sprintf("step%d\n", step)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(ws, "steps.log")); bytes.Contains(b, []byte(line)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: step %d did not start within 2m", name, step)
		}
	}
	pid, err := containerPID(pod.Name, map[string]string{"workspace": "executor", "agent": "runner"}[container])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the %s container (pid %d): %v", container, pid, err)
	}
	counts.faults.Add(1)
}

// podStepTurns scripts the pod sessions' step conversation.
func podStepTurns(t *testing.T) []testenv.Turn {
	turn := testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn {
		next, err := testenv.NextStep(req)
		if err != nil {
			t.Errorf("decode the request: %v", err)
		}
		if next > podSteps {
			return testenv.Turn{Text: "all steps done", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}}
		}
		return testenv.ToolTurn(testenv.Call(fmt.Sprintf("step%d-%d", next, req.Turn), "bash",
			map[string]any{"command": fmt.Sprintf("echo step%d >> steps.log; echo $$ >> pids.log; sleep 1", next)}))
	}}
	turns := make([]testenv.Turn, 40)
	for i := range turns {
		turns[i] = turn
	}
	return turns
}

// boundPod returns the session's runner pod of attempt n once it is bound.
func (c *cluster) boundPod(session string, n int) *corev1.Pod {
	t := c.t
	var p corev1.Pod
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		err := c.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: c.ns, Name: session + "-" + strconv.Itoa(n)}, &p)
		if err == nil && p.Spec.NodeName != "" {
			return &p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no bound runner pod of attempt %d for %s: %v", n, session, err)
		}
	}
}

// containerPID finds the process of a pod's container, an aerie process
// whose first argument is sub and whose HOSTNAME is the pod's name.
func containerPID(pod, sub string) (int, error) {
	pid, ok := testenv.FindProcess(func(pid int, args []string) bool {
		if len(args) < 2 || filepath.Base(args[0]) != "aerie" || args[1] != sub {
			return false
		}
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00HOSTNAME="+pod+"\x00"))
	})
	if !ok {
		return 0, fmt.Errorf("no process `aerie %s` of pod %s", sub, pod)
	}
	return pid, nil
}

// checkPodSession checks a finished pod session: its journal, every
// step's command run once over all its attempts' workspaces (at most once
// when its call was interrupted, which is never made again), every
// journaled call answered,
// and none of its commands' processes alive.
func (c *cluster) checkPodSession(s *aeriev1alpha1.AgentSession) {
	t := c.t
	pod := c.boundPod(s.Name, int(s.Status.Attempts))
	counts.entries.Add(int64(c.checkJournal(s, nil)))
	st := c.openStore()
	defer st.Close()
	id, _ := parseUUID(s.Status.SessionID)
	es, err := st.Entries(t.Context(), c.ns, id)
	if err != nil {
		t.Fatal(err)
	}
	sc := testenv.ReadStepCalls(es)
	inChild := c.checkPodChildren(s.Name, es)
	ran, pids := map[string]int{}, []string{}
	for n := int32(1); n <= s.Status.Attempts; n++ {
		p := pod
		if n != s.Status.Attempts {
			p = c.boundPod(s.Name, int(n))
		}
		ws := c.runner.VolumePath(p, "workspace")
		b, _ := os.ReadFile(filepath.Join(ws, "steps.log"))
		for _, l := range strings.Fields(string(b)) {
			ran[l]++
		}
		b, _ = os.ReadFile(filepath.Join(ws, "pids.log"))
		pids = append(pids, strings.Fields(string(b))...)
	}
	interrupted := 0
	for i := 1; i <= podSteps; i++ {
		step := "step" + strconv.Itoa(i)
		cut := false // a call of the step was interrupted: it ran at most once
		for _, id := range sc.Calls[step] {
			if sc.Completions[id] == transcript.ToolInterrupted || inChild[id] {
				interrupted++
				cut = true
			}
		}
		if cut && ran[step] > 1 || !cut && ran[step] != 1 {
			violation(t, "session %s: %s ran %d times, want once (at most once if interrupted; calls %v, completions %v)",
				s.Name, step, ran[step], sc.Calls[step], sc.Completions)
		}
	}
	t.Logf("session %s: %d calls answered as interrupted", s.Name, interrupted)
	for _, f := range pids {
		if pid, err := strconv.Atoi(f); err == nil && testenv.Alive(pid) && hasMarker(pid) {
			violation(t, "session %s: process %d of its commands is alive after the session ended", s.Name, pid)
		}
	}
}
