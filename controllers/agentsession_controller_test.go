package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// The control plane is shared by the tests of this file: each test works
// in namespaces of its own, with a controller manager of its own that
// watches only them, so the tests run in parallel without seeing each
// other.
var (
	controlPlaneOnce sync.Once
	controlPlane     *testenv.ControlPlane
	controlPlaneErr  error
	// stopControlPlane stops the shared control plane; TestMain calls it
	// after the tests, so that no kube-apiserver or etcd outlives them.
	stopControlPlane = func() error { return nil }
)

func TestMain(m *testing.M) {
	// The managers' errors, in the output of a failed run; without a
	// logger controller-runtime prints a warning with a goroutine stack.
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	code := m.Run()
	if err := stopControlPlane(); err != nil {
		fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
	}
	os.Exit(code)
}

// sharedControlPlane starts the control plane on first use; it lives as
// long as the package's tests.
func sharedControlPlane(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the envtest binaries")
	}
	controlPlaneOnce.Do(func() {
		dir, err := os.MkdirTemp("", "aerie-controllers-")
		if err != nil {
			controlPlaneErr = err
			return
		}
		var stop func() error
		controlPlane, stop, controlPlaneErr = testenv.NewControlPlane(dir)
		if controlPlaneErr == nil {
			stopControlPlane = func() error {
				return errors.Join(stop(), os.RemoveAll(dir))
			}
		}
	})
	if controlPlaneErr != nil {
		t.Fatal(controlPlaneErr)
	}
	return controlPlane
}

// env is one test's namespaces and controller.
type env struct {
	t        *testing.T
	cp       *testenv.ControlPlane
	c        client.Client
	ns       string // the sessions' namespace
	platform string // the controller's namespace
	metrics  *prometheus.Registry
	stop     func()
	// shift moves the controller's clock forward, for deadlines.
	shift atomic.Int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cp := sharedControlPlane(t)
	e := &env{t: t, cp: cp, c: cp.Client, ns: cp.Namespace(t), platform: cp.Namespace(t)}
	// Every runner pod of these tests is admitted by the API server's Pod
	// Security admission enforcing the restricted profile.
	var ns corev1.Namespace
	if err := e.c.Get(e.ctx(), types.NamespacedName{Name: e.ns}, &ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
	if err := e.c.Update(e.ctx(), &ns); err != nil {
		t.Fatal(err)
	}
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DefaultDatabaseSecret, Namespace: e.ns}, StringData: map[string]string{DefaultDatabaseKey: "postgres://aerie@db/aerie"}})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-credentials", Namespace: e.ns}, StringData: map[string]string{"anthropic-api-key": "sk-test"}})
	e.start()
	return e
}

// start runs a controller manager for the test's namespaces until stop.
func (e *env) start() {
	t := e.t
	t.Helper()
	opts := CacheOptions()
	opts.DefaultNamespaces = map[string]cache.Config{e.ns: {}}
	mgr, err := ctrl.NewManager(e.cp.Config, ctrl.Options{
		Scheme:                 e.cp.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  opts,
	})
	if err != nil {
		t.Fatalf("create manager: %v", err)
	}
	e.metrics = prometheus.NewRegistry()
	m, err := NewMetrics(e.metrics)
	if err != nil {
		t.Fatal(err)
	}
	r := &AgentSessionReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("aerie-controller"),
		Metrics:  m,
		Config:   DefaultConfig(e.platform, "ghcr.io/aerie-run/aerie:test"),
		Now:      func() time.Time { return time.Now().Add(time.Duration(e.shift.Load())) },
	}
	if err := r.SetupWithManager(mgr, controller.Options{SkipNameValidation: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(e.stop)
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	if err := e.c.Create(e.ctx(), obj); err != nil {
		e.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// session creates an AgentSession named name with a prompt and the
// anthropic provider, changed by change.
func (e *env) session(name string, change ...func(*aeriev1alpha1.AgentSession)) *aeriev1alpha1.AgentSession {
	e.t.Helper()
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: "Fix the failing tests.",
			Model: aeriev1alpha1.ModelSpec{Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5",
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"}},
		},
	}
	for _, c := range change {
		c(s)
	}
	e.create(s)
	return s
}

// waitFor polls check until it returns nil, failing the test with its
// last error after a minute.
func (e *env) waitFor(what string, check func() error) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// update applies change to the latest version of the session name, again
// on a conflict with the controller's own writes.
func (e *env) update(name string, change func(*aeriev1alpha1.AgentSession)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := e.get(name)
		change(s)
		return e.c.Update(e.ctx(), s)
	})
	if err != nil {
		e.t.Fatalf("update %s: %v", name, err)
	}
}

func (e *env) get(name string) *aeriev1alpha1.AgentSession {
	e.t.Helper()
	var s aeriev1alpha1.AgentSession
	if err := e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: name}, &s); err != nil {
		e.t.Fatalf("get session %s: %v", name, err)
	}
	return &s
}

// waitStatus waits until the session's status satisfies ok.
func (e *env) waitStatus(name, what string, ok func(st aeriev1alpha1.AgentSessionStatus) bool) *aeriev1alpha1.AgentSession {
	e.t.Helper()
	var s aeriev1alpha1.AgentSession
	e.waitFor(name+": "+what, func() error {
		if err := e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: name}, &s); err != nil {
			return err
		}
		if !ok(s.Status) {
			return fmt.Errorf("status is %+v", s.Status)
		}
		return nil
	})
	return &s
}

func (e *env) waitPhase(name string, phase aeriev1alpha1.AgentSessionPhase) *aeriev1alpha1.AgentSession {
	e.t.Helper()
	return e.waitStatus(name, "phase "+string(phase), func(st aeriev1alpha1.AgentSessionStatus) bool { return st.Phase == phase })
}

// pod waits for the runner pod of attempt n of session name.
func (e *env) pod(name string, n int32) *corev1.Pod {
	e.t.Helper()
	var p corev1.Pod
	e.waitFor("pod "+childName(name, n), func() error {
		return e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: childName(name, n)}, &p)
	})
	return &p
}

// runnerConfig reads the runner configuration of attempt n.
func (e *env) runnerConfig(name string, n int32) *runconfig.Config {
	e.t.Helper()
	var cm corev1.ConfigMap
	if err := e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: childName(name, n)}, &cm); err != nil {
		e.t.Fatalf("get runner config: %v", err)
	}
	rc, err := runconfig.Parse([]byte(cm.Data[runconfig.FileName]))
	if err != nil {
		e.t.Fatalf("parse runner config: %v", err)
	}
	return rc
}

// setPod writes the pod's status as the kubelet would.
func (e *env) setPod(p *corev1.Pod, phase corev1.PodPhase, agent corev1.ContainerState, change ...func(*corev1.PodStatus)) {
	e.t.Helper()
	e.waitFor("pod status update", func() error {
		var cur corev1.Pod
		if err := e.c.Get(e.ctx(), client.ObjectKeyFromObject(p), &cur); err != nil {
			return err
		}
		cur.Status.Phase = phase
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerAgent, Image: cur.Spec.Containers[0].Image, State: agent, Ready: agent.Running != nil}}
		for _, c := range change {
			c(&cur.Status)
		}
		return e.c.Status().Update(e.ctx(), &cur)
	})
}

func (e *env) finishPod(p *corev1.Pod, code int32, rep *runconfig.Report) {
	e.t.Helper()
	msg := ""
	if rep != nil {
		b, err := runconfig.EncodeReport(*rep)
		if err != nil {
			e.t.Fatal(err)
		}
		msg = string(b)
	}
	phase := corev1.PodFailed
	if code == 0 {
		phase = corev1.PodSucceeded
	}
	e.setPod(p, phase, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Completed"}})
}

func (e *env) pods(name string) []corev1.Pod {
	e.t.Helper()
	var list corev1.PodList
	if err := e.c.List(e.ctx(), &list, client.InNamespace(e.ns), client.MatchingLabels{LabelSession: name}); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

func condition(s *aeriev1alpha1.AgentSession, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestAgentSessionController(t *testing.T) {
	t.Parallel()
	t.Run("creates the runner config and pod", testCreate)
	t.Run("succeeds with the runner's usage", testSucceeded)
	t.Run("fails when the budget runs out", testBudget)
	t.Run("cancels", testCancel)
	t.Run("retries an evicted pod, resuming the session", testRetry)
	t.Run("gives up after maxAttempts", testRetriesExhausted)
	t.Run("waits for the pod's teardown before deletion", testFinalizer)
	t.Run("adopts its pod after a restart", testRestart)
	t.Run("resolves promptFrom", testPromptFrom)
	t.Run("fails on missing references", testInvalidReference)
	t.Run("mounts namespace and platform layers", testLayers)
	t.Run("deletes the session after its TTL", testTTL)
	t.Run("times out a pod that never starts", testDeadline)
	t.Run("resolves resumeFrom and forkFrom", testContinuations)
	t.Run("runs executor pods with each attempt", testExecutors)
}

func testCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("create", func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Budget = &aeriev1alpha1.Budget{MaxDuration: &metav1.Duration{Duration: 20 * time.Minute}, MaxTurns: ptr.To(int32(7))}
	})
	s := e.waitPhase("create", aeriev1alpha1.PhasePending)
	pod := e.pod("create", 1)

	if !metav1.IsControlledBy(pod, s) {
		t.Errorf("pod owners %+v, want controlled by the session", pod.OwnerReferences)
	}
	if s.Status.Attempts != 1 || s.Status.PodName != pod.Name || s.Status.SessionID != string(s.UID) || s.Status.StartTime == nil {
		t.Errorf("status %+v", s.Status)
	}
	if c := condition(s, aeriev1alpha1.ConditionAccepted); c.Status != metav1.ConditionTrue || c.ObservedGeneration != s.Generation {
		t.Errorf("Accepted = %+v", c)
	}
	if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Status != metav1.ConditionUnknown {
		t.Errorf("Succeeded = %+v", c)
	}
	if !strings.Contains(strings.Join(s.Finalizers, ","), Finalizer) {
		t.Errorf("finalizers %v", s.Finalizers)
	}
	if pod.Spec.Containers[0].Name != ContainerAgent || pod.Spec.InitContainers[0].Name != ContainerWorkspace || pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("pod spec %+v", pod.Spec)
	}
	if pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds > int64((20*time.Minute+DefaultTerminationGrace+deadlineSlack)/time.Second) {
		t.Errorf("activeDeadlineSeconds %v", pod.Spec.ActiveDeadlineSeconds)
	}
	rc := e.runnerConfig("create", 1)
	if rc.Session.ID != string(s.UID) || rc.Session.Attempt != 1 || rc.Prompt != "Fix the failing tests." || rc.Namespace != e.ns || rc.Budget.MaxTurns != 7 {
		t.Errorf("runner config %+v", rc)
	}
	var cm corev1.ConfigMap
	if err := e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: pod.Name}, &cm); err != nil || cm.Immutable == nil || !*cm.Immutable || !metav1.IsControlledBy(&cm, s) {
		t.Errorf("runner ConfigMap %+v: %v", cm.ObjectMeta, err)
	}

	// The namespace enforces the restricted profile: a pod that breaks it
	// is refused, so the runner pod's admission above meant something.
	bad := pod.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "not-restricted", Namespace: e.ns}
	bad.Spec.NodeName = ""
	bad.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	if err := e.c.Create(e.ctx(), bad); !apierrors.IsForbidden(err) {
		t.Errorf("a pod breaking the restricted profile: %v, want forbidden", err)
	}

	// The agent starts: Running, PodReady.
	e.setPod(pod, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	s = e.waitPhase("create", aeriev1alpha1.PhaseRunning)
	if c := condition(s, aeriev1alpha1.ConditionPodReady); c.Status != metav1.ConditionTrue {
		t.Errorf("PodReady = %+v", c)
	}
}

func testSucceeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("done")
	pod := e.pod("done", 1)
	e.setPod(pod, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	e.waitPhase("done", aeriev1alpha1.PhaseRunning)
	e.finishPod(pod, 0, &runconfig.Report{Outcome: runconfig.OutcomeCompleted, SessionID: string(pod.OwnerReferences[0].UID), Summary: "Fixed the off-by-one in the parser.",
		Usage: runconfig.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 50, Requests: 4, ToolCalls: 6, Compactions: 2,
			CostUSD: 0.01234567}})
	s := e.waitPhase("done", aeriev1alpha1.PhaseSucceeded)

	want := &aeriev1alpha1.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 50, TotalTokens: 1250, Turns: 4, ToolCalls: 6, Compactions: 2,
		CostUSD: "0.012346"}
	if diff := cmp.Diff(want, s.Status.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if r := s.Status.Result; r == nil || r.Outcome != aeriev1alpha1.OutcomeCompleted || r.Summary != "Fixed the off-by-one in the parser." || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("result %+v", s.Status.Result)
	}
	if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Status != metav1.ConditionTrue || c.Reason != aeriev1alpha1.ReasonCompleted {
		t.Errorf("Succeeded = %+v", c)
	}
	if s.Status.CompletionTime == nil {
		t.Error("no completion time")
	}
	e.waitFor("metrics", func() error {
		// The series appear once the reconcile that wrote the status has
		// recorded them; until then there is nothing to read.
		if got, err := counterValue(e.metrics, "aerie_sessions_total", "phase", "Succeeded"); err != nil || got != 1 {
			return fmt.Errorf("aerie_sessions_total{phase=Succeeded} = %v, %v", got, err)
		}
		if got, err := counterValue(e.metrics, "aerie_tokens_total", "kind", "input"); err != nil || got != 1000 {
			return fmt.Errorf("aerie_tokens_total{kind=input} = %v, %v", got, err)
		}
		if got, err := counterValue(e.metrics, "aerie_cost_usd_total", "namespace", e.ns); err != nil || got != 0.012346 {
			return fmt.Errorf("aerie_cost_usd_total{namespace=%s} = %v, %v", e.ns, got, err)
		}
		return nil
	})
	// The events say what happened, once each.
	e.waitFor("events", func() error {
		var list corev1.EventList
		if err := e.c.List(e.ctx(), &list, client.InNamespace(e.ns)); err != nil {
			return err
		}
		var reasons []string
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name == "done" {
				reasons = append(reasons, ev.Reason)
			}
		}
		sort.Strings(reasons)
		if strings.Join(reasons, ",") != "Completed,Created,Running" {
			return fmt.Errorf("events %v, want Created, Running and Completed once each", reasons)
		}
		return nil
	})
}

// counterValue reads one series of a counter in reg, or says it is not
// recorded yet.
func counterValue(reg *prometheus.Registry, name, label, value string) (float64, error) {
	c := mustCounter(reg, name, label, value)
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	if len(ch) != 1 {
		return 0, fmt.Errorf("%d series of %s{%s=%q}", len(ch), name, label, value)
	}
	return testutil.ToFloat64(c), nil
}

// mustCounter finds a counter's child in reg by metric name and one label.
func mustCounter(reg *prometheus.Registry, name, label, value string) prometheus.Collector {
	return counterView{reg: reg, name: name, label: label, value: value}
}

// counterView is a collector exposing one series of a registry, for
// testutil.ToFloat64.
type counterView struct {
	reg                *prometheus.Registry
	name, label, value string
}

func (c counterView) Describe(ch chan<- *prometheus.Desc) {}

func (c counterView) Collect(ch chan<- prometheus.Metric) {
	mfs, err := c.reg.Gather()
	if err != nil {
		return
	}
	for _, mf := range mfs {
		if mf.GetName() != c.name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == c.label && l.GetValue() == c.value {
					ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(c.name, "", nil, nil), prometheus.CounterValue, m.GetCounter().GetValue())
				}
			}
		}
	}
}

func testBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("budget")
	pod := e.pod("budget", 1)
	e.finishPod(pod, 4, &runconfig.Report{Outcome: runconfig.OutcomeBudgetExceeded, ExitCode: 4, Reason: "the turn budget of 3 is spent", Usage: runconfig.Usage{InputTokens: 10, Requests: 3}})
	s := e.waitPhase("budget", aeriev1alpha1.PhaseFailed)
	if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Status != metav1.ConditionFalse || c.Reason != aeriev1alpha1.ReasonBudgetExceeded || c.Message != "the turn budget of 3 is spent" {
		t.Errorf("Succeeded = %+v", c)
	}
	if s.Status.Result.Outcome != aeriev1alpha1.OutcomeBudgetExceeded || *s.Status.Result.ExitCode != 4 || s.Status.Usage.Turns != 3 {
		t.Errorf("status %+v, result %+v", s.Status, s.Status.Result)
	}
}

func testCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("cancel")
	pod := e.pod("cancel", 1)
	e.setPod(pod, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	e.waitPhase("cancel", aeriev1alpha1.PhaseRunning)

	e.update("cancel", func(s *aeriev1alpha1.AgentSession) { s.Spec.Cancel = true })
	// Without a kubelet, the API server deletes an unscheduled pod at once.
	s := e.waitPhase("cancel", aeriev1alpha1.PhaseCancelled)
	if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Status != metav1.ConditionFalse || c.Reason != aeriev1alpha1.ReasonCancelled {
		t.Errorf("Succeeded = %+v", c)
	}
	if s.Status.Result.Outcome != aeriev1alpha1.OutcomeCancelled {
		t.Errorf("result %+v", s.Status.Result)
	}
	if err := e.c.Get(e.ctx(), client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod is still there: %v", err)
	}
	if n := len(e.pods("cancel")); n != 0 {
		t.Errorf("%d pods after cancel, want 0 (no retry of a cancelled session)", n)
	}
}

func testRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("retry")
	pod := e.pod("retry", 1)
	e.setPod(pod, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	e.waitPhase("retry", aeriev1alpha1.PhaseRunning)
	e.setPod(pod, corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error"}}, func(st *corev1.PodStatus) {
		st.Reason, st.Message = "Evicted", "The node was low on resource: memory."
	})

	s := e.waitStatus("retry", "attempt 2", func(st aeriev1alpha1.AgentSessionStatus) bool { return st.Attempts == 2 })
	pod2 := e.pod("retry", 2)
	rc := e.runnerConfig("retry", 2)
	if rc.Session.Attempt != 2 || rc.Session.ID != string(s.UID) || rc.Session.ID != s.Status.SessionID {
		t.Errorf("attempt 2 config session %+v, want attempt 2 of session %s", rc.Session, s.UID)
	}
	if rc.Prompt != "Fix the failing tests." {
		t.Errorf("attempt 2 prompt %q", rc.Prompt)
	}
	if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Reason != aeriev1alpha1.ReasonRetrying || !strings.Contains(c.Message, "Evicted") {
		t.Errorf("Succeeded = %+v", c)
	}
	// PodLost until the new pod is seen, then Pending.
	if c := condition(s, aeriev1alpha1.ConditionPodReady); c.Status != metav1.ConditionFalse || (c.Reason != aeriev1alpha1.ReasonPodLost && c.Reason != aeriev1alpha1.ReasonPending) {
		t.Errorf("PodReady = %+v", c)
	}
	// The second attempt completes the session.
	e.finishPod(pod2, 0, &runconfig.Report{Outcome: runconfig.OutcomeCompleted, SessionID: s.Status.SessionID})
	e.waitPhase("retry", aeriev1alpha1.PhaseSucceeded)
	if n := len(e.pods("retry")); n != 2 {
		t.Errorf("%d pods, want 2", n)
	}
}

func testRetriesExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("exhausted", func(s *aeriev1alpha1.AgentSession) { s.Spec.Retry = &aeriev1alpha1.RetryPolicy{MaxAttempts: 2} })
	for n := int32(1); n <= 2; n++ {
		pod := e.pod("exhausted", n)
		e.setPod(pod, corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}})
	}
	s := e.waitPhase("exhausted", aeriev1alpha1.PhaseFailed)
	if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Reason != aeriev1alpha1.ReasonRetriesExhausted || !strings.Contains(c.Message, "OOM") {
		t.Errorf("Succeeded = %+v", c)
	}
	if s.Status.Attempts != 2 || len(e.pods("exhausted")) != 2 {
		t.Errorf("attempts %d, pods %d; want 2 and 2", s.Status.Attempts, len(e.pods("exhausted")))
	}
}

func testFinalizer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("finalize")
	pod := e.pod("finalize", 1)
	// Bound to a node, the pod is deleted gracefully: it stays, with a
	// deletion timestamp, until its kubelet confirms the containers ended.
	if err := e.c.SubResource("binding").Create(e.ctx(), pod, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	}); err != nil {
		t.Fatalf("bind pod: %v", err)
	}
	e.setPod(pod, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	e.waitPhase("finalize", aeriev1alpha1.PhaseRunning)

	if err := e.c.Delete(e.ctx(), e.get("finalize")); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the pod's graceful deletion", func() error {
		var p corev1.Pod
		if err := e.c.Get(e.ctx(), client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		if p.DeletionTimestamp.IsZero() {
			return errors.New("the pod is not being deleted")
		}
		return nil
	})
	// The session waits for the teardown.
	time.Sleep(500 * time.Millisecond)
	if s := e.get("finalize"); s.DeletionTimestamp.IsZero() {
		t.Fatal("the session is not being deleted")
	}
	// The kubelet's part: the runner exits, the pod is removed.
	e.finishPod(pod, 143, &runconfig.Report{Outcome: runconfig.OutcomeCancelled, ExitCode: 143})
	if err := e.c.Delete(e.ctx(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the session's deletion", func() error {
		err := e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "finalize"}, &aeriev1alpha1.AgentSession{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the session is still there: %v", err)
	})
}

func testRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 5 {
		e.session(fmt.Sprintf("restart-%d", i))
	}
	for i := range 5 {
		e.pod(fmt.Sprintf("restart-%d", i), 1)
	}
	e.stop()
	// A status write lost with the old controller: the new one must find
	// the pod it created rather than create another.
	s := e.get("restart-0")
	s.Status = aeriev1alpha1.AgentSessionStatus{}
	if err := e.c.Status().Update(e.ctx(), s); err != nil {
		t.Fatal(err)
	}
	e.start()
	for i := range 5 {
		name := fmt.Sprintf("restart-%d", i)
		e.setPod(e.pod(name, 1), corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
		s := e.waitPhase(name, aeriev1alpha1.PhaseRunning)
		if s.Status.Attempts != 1 || s.Status.PodName != childName(name, 1) {
			t.Errorf("%s: status %+v", name, s.Status)
		}
		if n := len(e.pods(name)); n != 1 {
			t.Errorf("%s: %d pods after the restart, want 1", name, n)
		}
	}
}

func testPromptFrom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pr-1234", Namespace: e.ns}, Data: map[string]string{"review.md": "Review PR 1234."}})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "private", Namespace: e.ns}, StringData: map[string]string{"task": "Rotate the keys."}})
	e.session("from-cm", func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Prompt = ""
		s.Spec.PromptFrom = &aeriev1alpha1.PromptSource{ConfigMapKeyRef: &aeriev1alpha1.KeyReference{Name: "pr-1234", Key: "review.md"}}
	})
	e.session("from-secret", func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Prompt = ""
		s.Spec.PromptFrom = &aeriev1alpha1.PromptSource{SecretKeyRef: &aeriev1alpha1.KeyReference{Name: "private", Key: "task"}}
	})
	e.pod("from-cm", 1)
	e.pod("from-secret", 1)
	if got := e.runnerConfig("from-cm", 1).Prompt; got != "Review PR 1234." {
		t.Errorf("prompt from ConfigMap = %q", got)
	}
	if got := e.runnerConfig("from-secret", 1).Prompt; got != "Rotate the keys." {
		t.Errorf("prompt from Secret = %q", got)
	}
}

func testInvalidReference(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name   string
		change func(*aeriev1alpha1.AgentSession)
		want   string
	}{
		{"no-configmap", func(s *aeriev1alpha1.AgentSession) {
			s.Spec.Prompt = ""
			s.Spec.PromptFrom = &aeriev1alpha1.PromptSource{ConfigMapKeyRef: &aeriev1alpha1.KeyReference{Name: "missing", Key: "k"}}
		}, "promptFrom.configMapKeyRef: ConfigMap " + e.ns + "/missing not found"},
		{"no-key", func(s *aeriev1alpha1.AgentSession) {
			s.Spec.Model.APIKeySecretRef.Key = "openai"
		}, `model.apiKeySecretRef: Secret ` + e.ns + `/model-credentials has no key "openai"`},
		{"no-layer", func(s *aeriev1alpha1.AgentSession) {
			s.Spec.Extensions = []aeriev1alpha1.ExtensionLayer{{ConfigMap: &aeriev1alpha1.ConfigMapLayer{Name: "tools"}}}
		}, "extensions[0].configMap: ConfigMap " + e.ns + "/tools not found"},
		{"no-resume", func(s *aeriev1alpha1.AgentSession) { s.Spec.ResumeFrom = "yesterday" }, "resumeFrom: AgentSession " + e.ns + "/yesterday not found"},
		{"no-secret", func(s *aeriev1alpha1.AgentSession) {
			s.Spec.Secrets = []aeriev1alpha1.SecretEnv{{Name: "GITHUB_TOKEN", SecretKeyRef: aeriev1alpha1.KeyReference{Name: "github-mcp", Key: "token"}}}
		}, "secrets[0].secretKeyRef (GITHUB_TOKEN): Secret " + e.ns + "/github-mcp not found"},
		{"no-secret-key", func(s *aeriev1alpha1.AgentSession) {
			s.Spec.Secrets = []aeriev1alpha1.SecretEnv{
				{Name: "MODEL_KEY", SecretKeyRef: aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"}},
				{Name: "SENTRY_AUTH_TOKEN", SecretKeyRef: aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "sentry"}},
			}
		}, `secrets[1].secretKeyRef (SENTRY_AUTH_TOKEN): Secret ` + e.ns + `/model-credentials has no key "sentry"`},
	}
	for _, tt := range tests {
		e.session(tt.name, tt.change)
	}
	for _, tt := range tests {
		s := e.waitPhase(tt.name, aeriev1alpha1.PhaseFailed)
		if c := condition(s, aeriev1alpha1.ConditionAccepted); c.Status != metav1.ConditionFalse || c.Reason != aeriev1alpha1.ReasonInvalidReference || c.Message != tt.want {
			t.Errorf("%s: Accepted = %+v, want message %q", tt.name, c, tt.want)
		}
		if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Reason != aeriev1alpha1.ReasonInvalidReference {
			t.Errorf("%s: Succeeded = %+v", tt.name, c)
		}
		if n := len(e.pods(tt.name)); n != 0 {
			t.Errorf("%s: %d pods", tt.name, n)
		}
	}
}

func testLayers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "go-tools", Namespace: e.ns},
		Data:       map[string]string{"tools__lint.toml": "name = 'lint'"},
	})
	e.create(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: e.ns, Labels: map[string]string{runconfig.LayerLabel: ""}},
		Data:       map[string]string{"APPEND_SYSTEM.md": "Team rules."},
	})
	e.create(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: e.platform, Labels: map[string]string{runconfig.LayerLabel: ""},
			Annotations: map[string]string{runconfig.ExecutablesAnnotation: `["tools/bin/check.sh"]`}},
		Data: map[string]string{"skills__review__SKILL.md": "---\nname: review\n---\n", "tools__bin__check.sh": "#!/bin/sh\necho ok\n"},
	})
	s1 := e.session("layers", func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Extensions = []aeriev1alpha1.ExtensionLayer{{Name: "go", ConfigMap: &aeriev1alpha1.ConfigMapLayer{Name: "go-tools"}}}
	})
	pod := e.pod("layers", 1)
	rc := e.runnerConfig("layers", 1)
	var got []string
	for _, l := range rc.Layers {
		got = append(got, l.Kind+":"+l.Name+":"+l.Dir)
	}
	want := []string{"spec:go:/etc/aerie/layers/0", "namespace:team:/etc/aerie/layers/1", "platform:platform:/etc/aerie/layers/2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("layers (-want +got):\n%s", diff)
	}

	// The platform layer is mirrored into the session's namespace, under
	// its digest, immutable; the pod mounts the mirror.
	var mirrors corev1.ConfigMapList
	if err := e.c.List(e.ctx(), &mirrors, client.InNamespace(e.ns), client.HasLabels{LabelPlatformLayer}); err != nil {
		t.Fatal(err)
	}
	if len(mirrors.Items) != 1 {
		t.Fatalf("%d mirrors, want 1", len(mirrors.Items))
	}
	m := mirrors.Items[0]
	if m.Immutable == nil || !*m.Immutable || m.Data["tools__bin__check.sh"] == "" || !strings.Contains(m.Name, strings.TrimPrefix(rc.Layers[2].Digest, "sha256:")[:16]) {
		t.Errorf("mirror %s: immutable %v, data %v", m.Name, m.Immutable, m.Data)
	}
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == "layer-2" {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != m.Name {
		t.Fatalf("layer-2 volume %+v, want the mirror %s", vol, m.Name)
	}
	modes := map[string]int32{}
	for _, it := range vol.ConfigMap.Items {
		modes[it.Path] = *it.Mode
	}
	if diff := cmp.Diff(map[string]int32{"skills/review/SKILL.md": 0o444, "tools/bin/check.sh": 0o555}, modes); diff != "" {
		t.Errorf("mirror items (-want +got):\n%s", diff)
	}

	// The runner is told where each layer comes from, for its record.
	var sources []string
	for _, l := range rc.Layers {
		sources = append(sources, l.Source)
	}
	// The session's own ConfigMaps are mounted through immutable mirrors
	// too: a session sees its layers as they were when it started.
	var own corev1.ConfigMapList
	if err := e.c.List(e.ctx(), &own, client.InNamespace(e.ns), client.HasLabels{LabelLayerMirror}); err != nil {
		t.Fatal(err)
	}
	ownMirror := map[string]string{}
	for _, cm := range own.Items {
		if cm.Immutable == nil || !*cm.Immutable {
			t.Errorf("mirror %s is not immutable", cm.Name)
		}
		ownMirror[cm.Labels[LabelLayerMirror]] = cm.Name
	}
	if len(own.Items) != 2 || ownMirror["go-tools"] == "" || ownMirror["team"] == "" {
		t.Fatalf("mirrors of the namespace's ConfigMaps %v, want one of go-tools and one of team", ownMirror)
	}
	if diff := cmp.Diff([]string{
		"configmap/" + ownMirror["go-tools"] + " from configmap/" + e.ns + "/go-tools",
		"configmap/" + ownMirror["team"] + " from configmap/" + e.ns + "/team",
		"configmap/" + m.Name + " from configmap/" + e.platform + "/platform",
	}, sources); diff != "" {
		t.Errorf("layer sources (-want +got):\n%s", diff)
	}

	// A second session uses the same mirror. Each session that mounts
	// it owns it — not as its controller, and without blocking its own
	// deletion — so that Kubernetes' garbage collector deletes the mirror
	// when the last of them is deleted. envtest runs no garbage
	// collector: the owner references are what is checked here.
	s2 := e.session("layers-2")
	e.pod("layers-2", 1)
	if err := e.c.List(e.ctx(), &mirrors, client.InNamespace(e.ns), client.HasLabels{LabelPlatformLayer}); err != nil || len(mirrors.Items) != 1 {
		t.Fatalf("%d mirrors after a second session, want 1: %v", len(mirrors.Items), err)
	}
	owner := func(s *aeriev1alpha1.AgentSession) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "aerie.run/v1alpha1", Kind: "AgentSession", Name: s.Name, UID: s.UID}
	}
	// The order of owner references means nothing (and server-side apply
	// does not keep it).
	byName := cmpopts.SortSlices(func(a, b metav1.OwnerReference) bool { return a.Name < b.Name })
	if diff := cmp.Diff([]metav1.OwnerReference{owner(s1), owner(s2)}, mirrors.Items[0].OwnerReferences, byName); diff != "" {
		t.Errorf("mirror owners (-want +got):\n%s", diff)
	}
	if !*mirrors.Items[0].Immutable || mirrors.Items[0].Data["tools__bin__check.sh"] == "" {
		t.Errorf("the mirror changed when an owner was added: %+v", mirrors.Items[0])
	}

	// A retry of the first session applies the mirror again: its owners
	// stay as they are.
	e.setPod(pod, corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}})
	e.waitStatus("layers", "attempt 2", func(st aeriev1alpha1.AgentSessionStatus) bool { return st.Attempts == 2 })
	e.pod("layers", 2)
	var again corev1.ConfigMap
	if err := e.c.Get(e.ctx(), client.ObjectKeyFromObject(&mirrors.Items[0]), &again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{owner(s1), owner(s2)}, again.OwnerReferences, byName); diff != "" {
		t.Errorf("mirror owners after a retry (-want +got):\n%s", diff)
	}
}

func testTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("ttl", func(s *aeriev1alpha1.AgentSession) { s.Spec.TTLSecondsAfterFinished = ptr.To(int32(1)) })
	pod := e.pod("ttl", 1)
	e.finishPod(pod, 0, &runconfig.Report{Outcome: runconfig.OutcomeCompleted})
	e.waitFor("the session's deletion after its TTL", func() error {
		err := e.c.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "ttl"}, &aeriev1alpha1.AgentSession{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

func testDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session("deadline", func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Budget = &aeriev1alpha1.Budget{MaxDuration: &metav1.Duration{Duration: 10 * time.Second}}
	})
	pod := e.pod("deadline", 1)
	e.setPod(pod, corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "back-off pulling image"}})
	e.waitStatus("deadline", "the image pull reported", func(st aeriev1alpha1.AgentSessionStatus) bool {
		c := meta.FindStatusCondition(st.Conditions, aeriev1alpha1.ConditionPodReady)
		return c != nil && strings.Contains(c.Message, "ImagePullBackOff")
	})
	// An hour later, the pod still pulls its image.
	e.shift.Store(int64(time.Hour))
	e.update("deadline", func(s *aeriev1alpha1.AgentSession) { s.Annotations = map[string]string{"test": "wake up"} })
	s := e.waitPhase("deadline", aeriev1alpha1.PhaseFailed)
	if c := condition(s, aeriev1alpha1.ConditionSucceeded); c.Reason != aeriev1alpha1.ReasonDeadlineExceeded || !strings.Contains(c.Message, "ImagePullBackOff") {
		t.Errorf("Succeeded = %+v", c)
	}
	if s.Status.Result.Outcome != aeriev1alpha1.OutcomeTimedOut {
		t.Errorf("result %+v", s.Status.Result)
	}
	e.waitFor("the pod's deletion", func() error {
		if err := e.c.Get(e.ctx(), client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod still there: %v", err)
		}
		return nil
	})
}

func testContinuations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.session("first")
	e.finishPod(e.pod("first", 1), 0, &runconfig.Report{Outcome: runconfig.OutcomeCompleted, SessionID: string(first.UID)})
	e.waitPhase("first", aeriev1alpha1.PhaseSucceeded)

	e.session("followup", func(s *aeriev1alpha1.AgentSession) { s.Spec.ResumeFrom = "first" })
	e.session("branch", func(s *aeriev1alpha1.AgentSession) {
		s.Spec.ForkFrom = &aeriev1alpha1.ForkSource{Session: string(first.UID), AtSequence: ptr.To(int64(3))}
	})
	e.pod("followup", 1)
	e.pod("branch", 1)
	followup, branch := e.get("followup"), e.get("branch")

	rc := e.runnerConfig("followup", 1)
	if rc.Session.ID != string(first.UID) || rc.Session.ResumeFrom != string(first.UID) || followup.Status.SessionID != string(first.UID) {
		t.Errorf("resumeFrom: config session %+v, status session %s; want %s", rc.Session, followup.Status.SessionID, first.UID)
	}
	rc = e.runnerConfig("branch", 1)
	if rc.Session.ID != string(branch.UID) || rc.Session.ForkFrom != string(first.UID) || rc.Session.ForkAtSequence != 3 {
		t.Errorf("forkFrom: config session %+v; want a new session %s forked from %s at 3", rc.Session, branch.UID, first.UID)
	}

	// The follow-up's pod is lost after the first session was deleted:
	// the retry resumes the same session all the same.
	if err := e.c.Delete(e.ctx(), first); err != nil {
		t.Fatal(err)
	}
	e.setPod(e.pod("followup", 1), corev1.PodFailed, corev1.ContainerState{}, func(st *corev1.PodStatus) { st.Reason = "Evicted" })
	e.pod("followup", 2)
	if rc := e.runnerConfig("followup", 2); rc.Session.ID != string(first.UID) || rc.Session.Attempt != 2 {
		t.Errorf("attempt 2 of the follow-up: %+v", rc.Session)
	}
}
