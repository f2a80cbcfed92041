package controllers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// TestEndToEndNode checks what only a real node shows (AERIE_E2E_NODE=real,
// make e2e-node): the runner image's read-only root filesystem, the native
// sidecar's order, the executor socket shared through fsGroup, the real
// garbage collector and TTL, a tool and the agent killed by the kernel's
// OOM killer, and the kubelet restarted under a running session.
func TestEndToEndNode(t *testing.T) {
	if !testenv.RealNode() {
		t.Skip("real-node test: run with AERIE_E2E_NODE=real (make e2e-node)")
	}
	e := startE2E(t)
	node, ok := e.runner.(*testenv.Node)
	if !ok {
		t.Fatalf("the pods run on %T, want a real node", e.runner)
	}
	t.Run("PodAndGarbageCollection", func(t *testing.T) {
		testNodePodAndGC(t, e)
	})
	t.Run("TTL", func(t *testing.T) {
		testNodeTTL(t, e)
	})
	t.Run("ToolOOMKilled", func(t *testing.T) {
		testNodeToolOOMKilled(t, e)
	})
	t.Run("AgentOOMKilled", func(t *testing.T) {
		testNodeAgentOOMKilled(t, e)
	})
	t.Run("KubeletRestart", func(t *testing.T) {
		testNodeKubeletRestart(t, e, node)
	})
}

// testNodePodAndGC runs a session that uses a platform layer and looks at
// its pod as the kubelet ran it, then deletes the session: the garbage
// collector takes its runner pod, its ConfigMap and the layer's mirror.
func testNodePodAndGC(t *testing.T, e *e2e) {
	e, src := e.withPlatformLayer(t)
	model := testenv.StartModelServer(t,
		bashTurn("c1", "touch /usr/local/bin/probe 2>&1; echo ok > /workspace/w.txt && echo wrote; "+
			"stat -c 'socket %g %a' "+runconfig.DefaultSocket),
		answer("Done."))
	e.session(t, "node", model)
	pod := e.pod(t, "node")
	s := e.waitFinished(t, "node")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s, want Succeeded", s.Status.Phase)
	}
	got := toolResults(t, requestForTurn(t, model, 2))["c1"]
	// The socket: the workspace user's, in the group both containers share.
	socket := fmt.Sprintf("socket %d 660", DefaultFSGroup)
	for _, want := range []string{"Read-only file system", "wrote", socket} {
		if !strings.Contains(got, want) {
			t.Errorf("the tool's output %q lacks %q: the root filesystem must be read-only, the workspace writable, "+
				"the executor socket group-shared", got, want)
		}
	}
	checkSidecarOrder(t, e, pod, "Completed")

	// Owned by the session: its ConfigMap, and the mirror of the layer.
	var cms corev1.ConfigMapList
	if err := e.cp.Client.List(t.Context(), &cms, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	var owned, mirrors []string
	for _, cm := range cms.Items {
		for _, o := range cm.OwnerReferences {
			if o.UID == s.UID {
				owned = append(owned, cm.Name)
				if cm.Labels[LabelPlatformLayer] == src.Name {
					mirrors = append(mirrors, cm.Name)
				}
			}
		}
	}
	if len(mirrors) != 1 || len(owned) < 2 {
		t.Fatalf("ConfigMaps owned by session %s: %v, of them mirrors of %s: %v; want its own and one mirror",
			s.Name, owned, src.Name, mirrors)
	}
	if err := e.cp.Client.Delete(t.Context(), s, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(time.Minute, func() bool { return e.gone(t, &corev1.Pod{ObjectMeta: pod.ObjectMeta}) }) {
		t.Errorf("runner pod %s still there a minute after its session's deletion", pod.Name)
	}
	for _, name := range owned {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
		if !testenv.Poll(time.Minute, func() bool { return e.gone(t, cm) }) {
			t.Errorf("ConfigMap %s still there a minute after its session's deletion", name)
		}
	}
	if e.gone(t, src) {
		t.Errorf("the platform layer %s itself went with a session that used it", src.Name)
	}
}

// gone says whether obj is no longer in the API.
func (e *e2e) gone(t *testing.T, obj client.Object) bool {
	err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("get %s: %v", obj.GetName(), err)
	}
	return apierrors.IsNotFound(err)
}

// checkSidecarOrder checks the native sidecar's life around the agent's, as
// the kubelet ran them: the workspace container started before the agent,
// was stopped after it, and ended cleanly on the kubelet's SIGTERM, with
// reason (Completed; containerd says OOMKilled of a container in which any
// process was).
func checkSidecarOrder(t *testing.T, e *e2e, pod *corev1.Pod, reason string) {
	t.Helper()
	var final corev1.Pod
	var ws, agent *corev1.ContainerStateTerminated
	testenv.Poll(30*time.Second, func() bool {
		if err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), &final); err != nil {
			return false
		}
		ws, agent = nil, nil
		if cs := containerStatus(final.Status.InitContainerStatuses, ContainerWorkspace); cs != nil {
			ws = cs.State.Terminated
		}
		if cs := containerStatus(final.Status.ContainerStatuses, ContainerAgent); cs != nil {
			agent = cs.State.Terminated
		}
		return ws != nil && agent != nil
	})
	if ws == nil || agent == nil {
		b, _ := json.MarshalIndent(final.Status, "", "  ")
		t.Fatalf("the workspace sidecar and the agent did not both end within 30s:\n%s", b)
	}
	// The API's times have second resolution: equal is in order.
	if ws.StartedAt.After(agent.StartedAt.Time) {
		t.Errorf("the workspace sidecar started at %s, after the agent (%s)", ws.StartedAt, agent.StartedAt)
	}
	if ws.FinishedAt.Before(&agent.FinishedAt) {
		t.Errorf("the workspace sidecar ended at %s, before the agent (%s)", ws.FinishedAt, agent.FinishedAt)
	}
	if ws.ExitCode != 0 || ws.Reason != reason {
		t.Errorf("the workspace sidecar ended with %d (%s), want 0 (%s) on the kubelet's SIGTERM",
			ws.ExitCode, ws.Reason, reason)
	}
}

// testNodeTTL: a finished session with ttlSecondsAfterFinished goes, and
// the garbage collector takes its pod.
func testNodeTTL(t *testing.T, e *e2e) {
	model := testenv.StartModelServer(t, answer("Done."))
	e.session(t, "ttl", model, func(s *aeriev1alpha1.AgentSession) { s.Spec.TTLSecondsAfterFinished = ptr.To[int32](2) })
	pod := e.pod(t, "ttl")
	s := e.waitFinished(t, "ttl")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s, want Succeeded", s.Status.Phase)
	}
	if !testenv.Poll(time.Minute, func() bool { return e.gone(t, &aeriev1alpha1.AgentSession{ObjectMeta: s.ObjectMeta}) }) {
		t.Fatalf("session %s still there a minute after it finished, with a TTL of 2s", s.Name)
	}
	if !testenv.Poll(time.Minute, func() bool { return e.gone(t, &corev1.Pod{ObjectMeta: pod.ObjectMeta}) }) {
		t.Errorf("runner pod %s still there a minute after its session's TTL", pod.Name)
	}
}

// testNodeToolOOMKilled: a tool that outgrows the workspace container's
// memory limit is killed by the kernel, not the session: the tool's result
// says so, the next tool runs in the same container, and the session
// succeeds in its first attempt.
func testNodeToolOOMKilled(t *testing.T, e *e2e) {
	model := testenv.StartModelServer(t,
		// A shell that holds 400 MiB of a's in a variable, under a 96 MiB limit.
		bashTurn("c1", `bash -c 'x=$(head -c 400M /dev/zero | tr "\0" a); echo "$((6*7)) held"'; echo "status $?"`),
		bashTurn("c2", "echo still here"),
		answer("Done."))
	limit := resource.MustParse("96Mi")
	e.session(t, "tool-oom", model, func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Runner = &aeriev1alpha1.RunnerSpec{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: limit},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: limit},
		}}
	})
	pod := e.pod(t, "tool-oom")
	s := e.waitFinished(t, "tool-oom")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || s.Status.Attempts != 1 {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("want Succeeded in attempt 1; status:\n%s", b)
	}
	results := allToolResults(t, model)
	if got := results["c1"]; !strings.Contains(got, "status 137") || strings.Contains(got, "42 held") {
		t.Errorf("the tool's result %q, want its shell killed (status 137) before it held the memory", got)
	}
	if got := results["c2"]; !strings.Contains(got, "still here") {
		t.Errorf("the next tool's result %q, want it run in the same workspace", got)
	}
	var final corev1.Pod
	if err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), &final); err == nil {
		if cs := containerStatus(final.Status.InitContainerStatuses, ContainerWorkspace); cs != nil && cs.RestartCount != 0 {
			t.Errorf("the workspace container restarted %d times: the OOM killer took its executor, not only the tool",
				cs.RestartCount)
		}
	}
	// The container outlived the OOM kill in it, and ended cleanly, marked
	// OOMKilled all the same: the controller does not take that for the
	// container's own OOM kill (oomKilled).
	checkSidecarOrder(t, e, pod, "OOMKilled")
}

// testNodeAgentOOMKilled runs a session whose agent container the kernel's
// OOM killer ends: its model answers a turn with 30 MB of text (under the
// answer cap) while the agent may use 80 MiB. The controller takes the pod
// for lost, as the retry policy says, and attempt 2 resumes the session
// with attempt 1's journaled tool call and finishes it.
func testNodeAgentOOMKilled(t *testing.T, e *e2e) {
	ns := e.namespace(t)
	e = e.in(ns)
	limit := resource.MustParse("80Mi")
	e.startController(t, ns, e.cp.Namespace(t), func(c *Config) {
		c.AgentResources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: limit},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: limit},
		}
	})
	model := testenv.StartModelServer(t,
		bashTurn("c1", "echo before > before.txt"),
		testenv.Turn{Text: strings.Repeat("All work and no play makes Jack a dull boy. ", 30<<20/44)},
		answer("Done after the OOM kill."))
	e.session(t, "agent-oom", model)
	pod := e.pod(t, "agent-oom")
	s := e.waitFinished(t, "agent-oom")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || s.Status.Attempts != 2 {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("want Succeeded in attempt 2; status:\n%s", b)
	}
	if retry := retryEvent(t, e, "agent-oom"); !strings.Contains(retry, "resumes session") ||
		!strings.Contains(retry, "the agent container was OOM-killed") {
		t.Errorf("Retrying event %q, want attempt 2 resuming after the agent container's OOM kill", retry)
	}
	var first corev1.Pod
	switch err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), &first); {
	case apierrors.IsNotFound(err):
		t.Logf("attempt 1's pod is gone; the Retrying event said why")
	case err != nil:
		t.Fatal(err)
	default:
		if cs := containerStatus(first.Status.ContainerStatuses, ContainerAgent); cs == nil || !oomKilled(cs.State.Terminated) {
			t.Errorf("attempt 1's agent container %+v, want it OOM-killed", cs)
		}
	}
	// Attempt 2 went on from attempt 1's journal: its request carries the
	// call c1 and its result, once each.
	reqs := model.Requests()
	b, _ := json.Marshal(messagesOf(t, reqs[len(reqs)-1]))
	if n, m := bytes.Count(b, []byte(`"id":"c1"`)), bytes.Count(b, []byte(`"tool_use_id":"c1"`)); n != 1 || m != 1 {
		t.Errorf("attempt 2 sent the call c1 %d times and its result %d times, want once each: %.2000s", n, m, b)
	}
}

// testNodeKubeletRestart restarts the kubelet while a session waits for
// the model: the pod runs on under containerd, and the session finishes in
// its first attempt, its containers never restarted.
func testNodeKubeletRestart(t *testing.T, e *e2e, node *testenv.Node) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	model := testenv.StartModelServer(t,
		bashTurn("c1", "echo before"),
		testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			close(held)
			<-release
			return bashTurn("c2", "echo after")
		}},
		answer("Done."))
	t.Cleanup(unblock)
	e.session(t, "kubelet-restart", model)
	pod := e.pod(t, "kubelet-restart")
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the session did not ask for its second turn within 2m")
	}
	if err := node.RestartKubelet(t.Context()); err != nil {
		t.Fatal(err)
	}
	unblock()
	s := e.waitFinished(t, "kubelet-restart")
	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || s.Status.Attempts != 1 || s.Status.PodName != pod.Name {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("want Succeeded in attempt 1 (pod %s); status:\n%s", pod.Name, b)
	}
	if got := allToolResults(t, model)["c2"]; !strings.Contains(got, "after") {
		t.Errorf("the tool after the restart returned %q", got)
	}
	var final corev1.Pod
	if err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), &final); err != nil {
		t.Fatal(err)
	}
	if final.UID != pod.UID {
		t.Errorf("runner pod %s was replaced", pod.Name)
	}
	for _, cs := range append(final.Status.InitContainerStatuses, final.Status.ContainerStatuses...) {
		if cs.RestartCount != 0 {
			t.Errorf("container %s restarted %d times across the kubelet's restart", cs.Name, cs.RestartCount)
		}
	}
}
