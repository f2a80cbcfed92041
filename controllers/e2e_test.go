package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// e2eAPIKey and the database DSN are the secrets the end-to-end tests
// look for where they must not be.
const e2eAPIKey = "sk-ant-e2e-secret-7f3a"

// e2e is a whole installation without a cluster: a control plane of its
// own (its pod runner binds every pod, so it shares the plane with no
// other test), the controller, the pod runner running the aerie binary
// built from this tree, and PostgreSQL.
type e2e struct {
	cp *testenv.ControlPlane
	// runner runs the pods: the local pod runner, or a real node under
	// AERIE_E2E_NODE=real (see startPods). local is the pod runner, nil on
	// a real node.
	runner podHost
	local  *testenv.PodRunner
	// image is the runner image, command the aerie binary in it.
	image, command string
	// ns is the namespace of the sessions, platform the controller's
	// namespace: the shared controller's, or (in) another's.
	ns       string
	platform string
	dsn      string
	// bin is the aerie binary built from this tree.
	bin string
	// metrics is the registry of the controllers' metrics.
	metrics *prometheus.Registry
}

func startE2E(t testing.TB) *e2e {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: builds aerie and starts a control plane and PostgreSQL")
	}
	// aerie, and beside it kubectl-aerie, which runs aerie's cluster
	// commands (aerie submit).
	dir := t.TempDir()
	bin := filepath.Join(dir, "aerie")
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/aerie", "./cmd/kubectl-aerie")
	build.Dir = testenv.RepoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/aerie ./cmd/kubectl-aerie: %v\n%s", err, out)
	}
	pg := testenv.StartPostgres(t)
	e := &e2e{
		dsn:     pg.NewDatabase(t),
		bin:     bin,
		metrics: prometheus.NewRegistry(),
	}
	e.startPods(t)
	e.ns, e.platform = e.namespace(t), e.cp.Namespace(t)
	e.startController(t, e.ns, e.platform)
	return e
}

// podHost is where the runner pods run, as the tests look into them.
type podHost interface {
	// VolumePath is the local directory of a pod's emptyDir volume.
	VolumePath(pod *corev1.Pod, volume string) string
	// Mounts is how containers see their volumes.
	Mounts() testenv.MountMode
}

// startPods starts the control plane and what runs its pods: the one switch
// between the local pod runner, which runs the aerie binary built from this
// tree as processes, and, under AERIE_E2E_NODE=real, a real node (kubelet,
// containerd, runc) running the runner image built from the Dockerfile
// (hack/images.sh), imported into its containerd.
func (e *e2e) startPods(t testing.TB) {
	t.Helper()
	if !testenv.RealNode() {
		e.cp = testenv.StartControlPlane(t)
		e.local = testenv.StartPodRunner(t, e.cp, testenv.PodRunnerOptions{Commands: map[string]string{"aerie": e.bin}})
		e.runner, e.image, e.command = e.local, "ghcr.io/aerie-run/aerie:e2e", "aerie"
		return
	}
	n := testenv.StartNode(t)
	if err := n.ImportImage(t.Context(), testenv.RunnerImageArchive(t)); err != nil {
		t.Fatal(err)
	}
	e.cp, e.runner = n.ControlPlane, n
	e.image, e.command = testenv.RunnerImage, DefaultRunnerCommand
}

// namespace creates a namespace for sessions, with the Secrets they need
// (the store's DSN, the model's API key) and Pod Security admission
// enforcing the restricted profile, so that every runner pod the tests
// run was admitted under it.
func (e *e2e) namespace(t testing.TB) string {
	t.Helper()
	ns := e.cp.Namespace(t)
	var obj corev1.Namespace
	if err := e.cp.Client.Get(t.Context(), types.NamespacedName{Name: ns}, &obj); err != nil {
		t.Fatal(err)
	}
	obj.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
	if err := e.cp.Client.Update(t.Context(), &obj); err != nil {
		t.Fatalf("label namespace %s restricted: %v", ns, err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: DefaultDatabaseSecret, Namespace: ns}, StringData: map[string]string{DefaultDatabaseKey: e.dsn}},
		{ObjectMeta: metav1.ObjectMeta{Name: "model-credentials", Namespace: ns}, StringData: map[string]string{"anthropic-api-key": e2eAPIKey}},
	} {
		if err := e.cp.Client.Create(t.Context(), s); err != nil {
			t.Fatalf("create Secret %s/%s: %v", ns, s.Name, err)
		}
	}
	return ns
}

// startController runs a controller manager for the sessions of ns, with
// its platform layers in platform and its configuration changed by change,
// until stop (or the end of t). stop cancels the manager's context and
// waits for it to return, as a controller's process ends; calling it again
// does nothing.
func (e *e2e) startController(t testing.TB, ns, platform string, change ...func(*Config)) (stop func()) {
	t.Helper()
	opts := CacheOptions()
	opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(e.cp.Config, ctrl.Options{
		Scheme:                 e.cp.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  opts,
	})
	if err != nil {
		t.Fatalf("create manager: %v", err)
	}
	cfg := DefaultConfig(platform, e.image)
	// The pod runner maps the command name to the built binary; a real
	// node runs the image's.
	cfg.RunnerCommand = e.command
	if e.local == nil {
		// Imported into containerd, never pulled; the git clone runs in
		// the runner image too (no --git-image).
		cfg.ImagePullPolicy = corev1.PullNever
	}
	cfg.TerminationGrace = 10 * time.Second
	for _, c := range change {
		c(&cfg)
	}
	m, err := NewMetrics(e.metrics)
	if err != nil {
		t.Fatal(err)
	}
	r := &AgentSessionReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("aerie-controller"),
		Config:   cfg,
		Metrics:  m,
	}
	if err := r.SetupWithManager(mgr, controller.Options{SkipNameValidation: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// in is e for the sessions of namespace ns.
func (e *e2e) in(ns string) *e2e {
	c := *e
	c.ns = ns
	return &c
}

// session creates an AgentSession that talks to model, changed by change.
func (e *e2e) session(t testing.TB, name string, model *testenv.ModelServer, change ...func(*aeriev1alpha1.AgentSession)) {
	t.Helper()
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Fix the failing tests.",
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: model.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
		},
	}
	for _, c := range change {
		c(s)
	}
	if err := e.cp.Client.Create(t.Context(), s); err != nil {
		t.Fatalf("create session %s: %v", name, err)
	}
}

// waitFinished polls the session until it has finished, for at most two minutes.
func (e *e2e) waitFinished(t testing.TB, name string) *aeriev1alpha1.AgentSession {
	t.Helper()
	return e.waitFinishedWithin(t, name, 2*time.Minute)
}

// waitFinishedWithin polls the session until it has finished, for at most d.
func (e *e2e) waitFinishedWithin(t testing.TB, name string, d time.Duration) *aeriev1alpha1.AgentSession {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var s aeriev1alpha1.AgentSession
		if err := e.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: e.ns, Name: name}, &s); err != nil {
			t.Fatalf("get session %s: %v", name, err)
		}
		if s.Status.Phase.Finished() {
			return &s
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Fatalf("session %s not finished after %s; status:\n%s", name, d, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pod returns the session's runner pod of attempt 1 once it is bound.
func (e *e2e) pod(t testing.TB, session string) *corev1.Pod {
	t.Helper()
	return e.podN(t, session, 1)
}

// podN returns the session's runner pod of attempt n once it is bound.
func (e *e2e) podN(t testing.TB, session string, n int32) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	deadline := time.Now().Add(time.Minute)
	for {
		err := e.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: e.ns, Name: childName(session, n)}, &p)
		if err == nil && p.Spec.NodeName != "" {
			return &p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no bound runner pod of attempt %d for %s: %v", n, session, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitForFile(t *testing.T, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 2m", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The fake model's script, in this package's short names.
var (
	bashTurn = testenv.BashTurn
	answer   = testenv.Answer
)

// callTurn is a model turn that calls tool with args.
func callTurn(id, tool string, args map[string]any) testenv.Turn {
	return testenv.ToolTurn(testenv.Call(id, tool, args))
}

// TestEndToEnd runs AgentSessions through the controller, runner pods
// with the agent and its workspace sidecar, the fake model and
// PostgreSQL.
func TestEndToEnd(t *testing.T) {
	e := startE2E(t)

	t.Run("Succeeds", func(t *testing.T) {
		t.Parallel()
		model := testenv.StartModelServer(t,
			bashTurn("c1", "id -u > uid.txt; env | sort > env.txt; echo ran"),
			testenv.Turn{Text: "Done: the tool ran.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
		start := time.Now()
		e.session(t, "succeeds", model)
		pod := e.pod(t, "succeeds")
		s := e.waitFinished(t, "succeeds")
		t.Logf("session ran end to end in %s", time.Since(start).Round(time.Millisecond))
		if s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Fatalf("phase %s, want Succeeded; status:\n%s", s.Status.Phase, b)
		}
		if u := s.Status.Usage; u == nil || u.InputTokens != 200 || u.OutputTokens != 15 || u.ToolCalls != 1 {
			t.Errorf("usage %+v, want 200 in, 15 out, 1 tool call", u)
		}

		// The tool ran in the workspace container, as its user, without the
		// agent's secrets.
		ws := e.runner.VolumePath(pod, volumeWorkspace)
		if b, err := os.ReadFile(filepath.Join(ws, "uid.txt")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(DefaultWorkspaceUser) {
			t.Errorf("uid.txt = %q, %v; want the workspace user %d", b, err, DefaultWorkspaceUser)
		}
		env, err := os.ReadFile(filepath.Join(ws, "env.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{e2eAPIKey, e.dsn} {
			if bytes.Contains(env, []byte(secret)) {
				t.Errorf("the tool's environment holds a secret %q:\n%s", secret, env)
			}
			for _, req := range model.Requests() {
				if bytes.Contains(req.Body, []byte(secret)) {
					t.Errorf("a secret reached the model: %q", secret)
				}
			}
		}

		// The runner pod ended as the kubelet ends it: the agent exited 0,
		// the workspace sidecar was stopped after it. The session is
		// finished once the agent container has; a real kubelet stops the
		// sidecar and reports the pod's phase a moment later.
		var final corev1.Pod
		sidecarDone := func() bool {
			for _, cs := range final.Status.InitContainerStatuses {
				if cs.Name == ContainerWorkspace && cs.State.Terminated == nil {
					return false
				}
			}
			return true
		}
		testenv.Poll(30*time.Second, func() bool {
			err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), &final)
			return err != nil || final.Status.Phase == corev1.PodSucceeded && sidecarDone()
		})
		if err := e.cp.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), &final); err == nil {
			if final.Status.Phase != corev1.PodSucceeded {
				t.Errorf("runner pod phase %s, want Succeeded", final.Status.Phase)
			}
			if !sidecarDone() {
				t.Errorf("workspace sidecar not terminated at the end: %+v", final.Status.InitContainerStatuses)
			}
		}

		// The journal is in PostgreSQL, under the namespace.
		st, err := dburl.Open(t.Context(), e.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		id := uuid.MustParse(s.Status.SessionID)
		entries, err := st.Entries(t.Context(), e.ns, id)
		if err != nil {
			t.Fatal(err)
		}
		var tools int
		for _, en := range entries {
			if _, ok := en.Payload.(transcript.ToolResult); ok {
				tools++
			}
		}
		if len(entries) < 4 || tools != 1 {
			t.Errorf("%d entries with %d tool results stored, want at least 4 with 1", len(entries), tools)
		}
		sess, err := st.Session(t.Context(), e.ns, id)
		if err != nil {
			t.Fatal(err)
		}
		if sess.State != store.StateCompleted {
			t.Errorf("stored session state %s, want completed", sess.State)
		}
	})

	// Alone, before the parallel cases: it runs 20 pods at once.
	t.Run("ControllerRestart", func(t *testing.T) {
		testControllerRestart(t, e)
	})

	t.Run("PodDeletedResumes", func(t *testing.T) {
		t.Parallel()
		testPodDeletedResumes(t, e, "resumed", false, false)
	})

	t.Run("PodEvictedResumes", func(t *testing.T) {
		t.Parallel()
		testPodDeletedResumes(t, e, "evicted", false, true)
	})

	t.Run("PodDeletedMidTool", func(t *testing.T) {
		t.Parallel()
		testPodDeletedResumes(t, e, "resumed-mid-tool", true, false)
	})

	t.Run("PodDeletedDuringSubagent", func(t *testing.T) {
		t.Parallel()
		testPodDeletedDuringSubagent(t, e)
	})

	t.Run("CompactionResumes", func(t *testing.T) {
		t.Parallel()
		testCompactionResumes(t, e)
	})

	t.Run("PlatformLayer", func(t *testing.T) {
		t.Parallel()
		testPlatformLayer(t, e)
	})

	t.Run("PlatformPlugins", func(t *testing.T) {
		t.Parallel()
		testPlatformPlugins(t, e)
	})

	t.Run("PlatformPluginHooks", func(t *testing.T) {
		t.Parallel()
		testPlatformPluginHooks(t, e)
	})

	t.Run("SecretsAgentOnly", func(t *testing.T) {
		t.Parallel()
		testSecretsAgentOnly(t, e)
	})

	t.Run("NamespaceLayerConfig", func(t *testing.T) {
		t.Parallel()
		testNamespaceLayerConfig(t, e)
	})

	t.Run("NamespaceLayerChanged", func(t *testing.T) {
		t.Parallel()
		testNamespaceLayerChanged(t, e)
	})

	t.Run("SubmitWaitFollow", func(t *testing.T) {
		t.Parallel()
		model := testenv.StartModelServer(t,
			bashTurn("c1", "echo submitted"),
			testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}})
		manifest := filepath.Join(t.TempDir(), "session.yaml")
		if err := os.WriteFile(manifest, []byte(`apiVersion: aerie.run/v1alpha1
kind: AgentSession
metadata:
  name: submitted
spec:
  prompt: Say it.
  model:
    provider: anthropic
    name: claude-sonnet-4-5
    baseURL: `+model.URL()+`
    apiKeySecretRef: {name: model-credentials, key: anthropic-api-key}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(e.bin, "submit", "-f", manifest, "--wait", "--follow", "--timeout", "2m", "--kubeconfig", e.cp.Kubeconfig, "-n", e.ns)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("aerie submit --wait --follow: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
		var types []string
		var last struct {
			Type  string
			Phase string
			Event *struct{ Type string }
		}
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			if err := json.Unmarshal([]byte(line), &last); err != nil {
				t.Fatalf("a line that is not JSON: %q", line)
			}
			if last.Event != nil {
				types = append(types, last.Event.Type)
			}
		}
		if last.Type != "finished" || last.Phase != string(aeriev1alpha1.PhaseSucceeded) {
			t.Errorf("last record %+v, want finished and Succeeded", last)
		}
		if !strings.Contains(strings.Join(types, ","), "tool_result") {
			t.Errorf("--follow streamed the events %v, want the runner's tool_result among them", types)
		}
	})

	t.Run("ExecutorsRoute", func(t *testing.T) {
		t.Parallel()
		testExecutorsRoute(t, e)
	})

	t.Run("ExecutorsCancel", func(t *testing.T) {
		t.Parallel()
		testExecutorsCancel(t, e)
	})

	t.Run("ExecutorLost", func(t *testing.T) {
		t.Parallel()
		testExecutorLost(t, e)
	})

	t.Run("DeadlineExceeded", func(t *testing.T) {
		t.Parallel()
		testDeadlineExceeded(t, e)
	})

	t.Run("CancelMidTool", func(t *testing.T) {
		t.Parallel()
		model := testenv.StartModelServer(t, bashTurn("c1", "sleep 300 & echo $! > sleep.pid; wait"))
		e.session(t, "cancelled", model)
		pid := e.toolPID(t, e.pod(t, "cancelled"), "sleep.pid")
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Fatalf("the tool's sleep (pid %d) is not running: %v", pid, err)
		}
		start := time.Now()
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":true}}`))
		s := &aeriev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cancelled"}}
		if err := e.cp.Client.Patch(t.Context(), s, patch); err != nil {
			t.Fatal(err)
		}
		s = e.waitFinished(t, "cancelled")
		t.Logf("cancelled in %s", time.Since(start).Round(time.Millisecond))
		if s.Status.Phase != aeriev1alpha1.PhaseCancelled {
			t.Errorf("phase %s, want Cancelled", s.Status.Phase)
		}
		waitProcessGone(t, pid, "the cancellation")
	})
}

// testDeadlineExceeded runs a session whose tool outlasts its maxDuration:
// the session ends TimedOut in its first attempt, without a retry, and the
// tool's process is gone with its pod.
func testDeadlineExceeded(t *testing.T, e *e2e) {
	model := testenv.StartModelServer(t, bashTurn("c1", "sleep 600 & echo $! > sleep.pid; wait"))
	e.session(t, "deadline", model, func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Budget = &aeriev1alpha1.Budget{MaxDuration: &metav1.Duration{Duration: 10 * time.Second}}
	})
	pid := e.toolPID(t, e.pod(t, "deadline"), "sleep.pid")
	s := e.waitFinished(t, "deadline")
	c := condition(s, aeriev1alpha1.ConditionSucceeded)
	if s.Status.Phase != aeriev1alpha1.PhaseFailed || s.Status.Attempts != 1 || s.Status.Result == nil ||
		s.Status.Result.Outcome != aeriev1alpha1.OutcomeTimedOut || c.Reason != aeriev1alpha1.ReasonDeadlineExceeded {
		b, _ := json.MarshalIndent(s.Status, "", "  ")
		t.Fatalf("want Failed, TimedOut (DeadlineExceeded) in attempt 1; status:\n%s", b)
	}
	waitProcessGone(t, pid, "the session timed out")
}

// toolPID is the process id a tool wrote to file in the workspace of pod,
// as the host sees it.
func (e *e2e) toolPID(t *testing.T, pod *corev1.Pod, file string) int {
	t.Helper()
	text := waitForFile(t, filepath.Join(e.runner.VolumePath(pod, volumeWorkspace), file))
	pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return hostPID(t, pod.Name, pid)
}

// waitProcessGone waits until process pid has ended (a zombie has, but for
// its parent's wait), for at most 30 s after what.
func waitProcessGone(t *testing.T, pid int, after string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, alive := procStat(pid); !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool's process %d still runs 30s after %s", pid, after)
		}
	}
}
