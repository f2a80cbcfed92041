package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/transcript"
)

// podLayer is the ConfigMap of the extension layer the pod sessions with
// extensions name in spec.extensions.
const podLayer = "faults-extensions"

// podKillExtensions is TestKillExtensions in a pod: the session's steps are
// done by bash (1 and 4), by the custom tool record_step of a ConfigMap
// layer (2) and by a subagent that runs the step's command (3), and the
// layer's PostToolUse hook records every call it sees in the workspace.
// The agent container is killed with SIGKILL once the command of step is
// running, or delay after the pod was bound when step is 0. Besides the
// pod kill loop's invariants (each step's command once across the
// attempts, at most once when its call, or the subagent's, was
// interrupted; the journal numbered from 1, every call answered once; no
// process left), each subagent's journal is numbered from 1 without a
// repeat, and every call's hook ran at most once, and once for a call that
// completed.
func (c *cluster) podKillExtensions(name string, step int, delay time.Duration) {
	t := c.t
	c.sessionWith(name, c.podExtensionTurns(name), func(spec *aeriev1alpha1.AgentSessionSpec) {
		spec.Extensions = []aeriev1alpha1.ExtensionLayer{{ConfigMap: &aeriev1alpha1.ConfigMapLayer{Name: podLayer}}}
	})
	if step > 0 {
		c.killInStep(name, "agent", step)
	} else {
		pod := c.boundPod(name, 1)
		time.Sleep(delay)
		if pid, err := containerPID(pod.Name, "runner"); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			counts.faults.Add(1)
		}
	}
	got := c.waitFinished(name)
	t.Logf("session %s: %s in %d attempts after its agent container was killed (step %d, delay %v)",
		name, got.Status.Phase, got.Status.Attempts, step, delay.Round(time.Millisecond))
	if got.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		violation(t, "session %s: phase %s, want Succeeded; status: %s", name, got.Status.Phase, statusJSON(got))
		return
	}
	c.checkPodSession(got)
	c.checkPodHooks(got)
}

// createExtensionLayer creates the ConfigMap podLayer, packed as `kubectl
// aerie layer pack` packs a directory: the custom tool record_step, whose
// program (run in its own directory, in the layer) appends the step's line
// and its pid in the workspace it is given and works a second, and a PostToolUse hook that appends each call's id to hooks.log
// in the workspace.
func (c *cluster) createExtensionLayer() {
	t := c.t
	dir := t.TempDir()
	writeRecordStep(t, dir, "1")
	testenv.WriteFile(t, filepath.Join(dir, "hooks.toml"), `[[hooks.PostToolUse]]
[[hooks.PostToolUse.hooks]]
command = '''sed -n 's/.*"tool_use_id" *: *"\([^"]*\)".*/\1/p' >> hooks.log'''
`, 0o644)
	packed, err := runconfig.PackLayer(runconfig.PackTree{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: podLayer, Namespace: c.ns, Annotations: packed.Annotations},
		Data:       packed.Data, BinaryData: packed.BinaryData,
	}
	if err := c.cp.Client.Create(t.Context(), cm); err != nil {
		t.Fatalf("create the layer ConfigMap: %v", err)
	}
}

// podExtensionTurns scripts the conversation of the pod session name whose
// steps are spread over bash, the custom tool and a subagent.
func (c *cluster) podExtensionTurns(name string) []testenv.Turn {
	t := c.t
	var once sync.Once
	turn := testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn {
		next, err := testenv.NextStep(req)
		if err != nil {
			t.Errorf("decode the request: %v", err)
		}
		id := fmt.Sprintf("step%d-%d", next, req.Turn)
		switch {
		case next > podSteps:
			return testenv.Turn{Text: "all steps done", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}}
		case next == 2:
			return testenv.ToolTurn(testenv.Call(id, "record_step", map[string]any{"dir": runconfig.DefaultWorkspace, "step": "step2"}))
		case next == 3:
			task := fmt.Sprintf("child of %s, step3: run the step", name)
			once.Do(func() {
				turns := make([]testenv.Turn, 40)
				for i := range turns {
					turns[i] = testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn { return childStep(t, req, 3, 1) }}
				}
				c.model.Conversation(task, turns...)
			})
			return testenv.ToolTurn(testenv.Spawn(id, task))
		}
		return testenv.ToolTurn(testenv.Call(id, "bash",
			map[string]any{"command": fmt.Sprintf("echo step%d >> steps.log; echo $$ >> pids.log; sleep 1", next)}))
	}}
	turns := make([]testenv.Turn, 40)
	for i := range turns {
		turns[i] = turn
	}
	return turns
}

// checkPodChildren checks the journal of each subagent the pod session's
// entries es record an outcome of — numbered from 1 without a gap or a
// repeat, no call or result stored twice — and reports, by the parent's
// call, whether a call of the subagent was interrupted.
func (c *cluster) checkPodChildren(session string, es []transcript.Entry) map[string]bool {
	t := c.t
	st := c.openStore()
	defer st.Close()
	out := map[string]bool{}
	for _, en := range es {
		o, ok := en.Payload.(transcript.SubagentOutcome)
		if !ok {
			continue
		}
		ces, err := st.Entries(t.Context(), c.ns, o.Session)
		if err != nil {
			t.Fatalf("session %s: entries of subagent %s: %v", session, o.Session, err)
		}
		calls, results := tally(t, fmt.Sprintf("session %s: the subagent of %s", session, o.CallID), ces)
		for id, n := range calls {
			if n > 1 || results[id] != 1 {
				violation(t, "session %s: the subagent of %s stored call %s %d times, its result %d times", session, o.CallID, id, n, results[id])
			}
		}
		for _, ce := range ces {
			if cc, ok := ce.Payload.(transcript.ToolCompletion); ok && cc.Status == transcript.ToolInterrupted {
				out[o.CallID] = true
			}
		}
	}
	return out
}

// checkPodHooks checks the hooks.log of every attempt's workspace: the
// PostToolUse hook of each call, the session's and its subagents', ran at
// most once, and once for a call that completed.
func (c *cluster) checkPodHooks(s *aeriev1alpha1.AgentSession) {
	t := c.t
	ran := map[string]int{}
	for n := 1; n <= int(s.Status.Attempts); n++ {
		b, _ := os.ReadFile(filepath.Join(c.runner.VolumePath(c.boundPod(s.Name, n), "workspace"), "hooks.log"))
		for _, id := range strings.Fields(string(b)) {
			ran[id]++
		}
	}
	st := c.openStore()
	defer st.Close()
	id, _ := parseUUID(s.Status.SessionID)
	es, err := st.Entries(t.Context(), c.ns, id)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]transcript.Entry(nil), es...)
	for _, en := range es {
		if o, ok := en.Payload.(transcript.SubagentOutcome); ok {
			ces, err := st.Entries(t.Context(), c.ns, o.Session)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ces...)
		}
	}
	completed := 0
	for _, en := range all {
		cc, ok := en.Payload.(transcript.ToolCompletion)
		if !ok {
			continue
		}
		switch n := ran[cc.CallID]; {
		case n > 1:
			violation(t, "session %s: the PostToolUse hook of call %s ran %d times", s.Name, cc.CallID, n)
		case n == 0 && cc.Status == transcript.ToolOK:
			violation(t, "session %s: call %s completed, and its PostToolUse hook never ran", s.Name, cc.CallID)
		case cc.Status == transcript.ToolOK:
			completed++
		}
	}
	t.Logf("session %s: %d completed calls, each with its PostToolUse hook once", s.Name, completed)
}
