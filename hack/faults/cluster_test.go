package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/controllers"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
)

// clusterAPIKey is the model key the runner pods get from their Secret.
const clusterAPIKey = "sk-ant-faults-cluster-secret"

// cluster is an installation without a cluster: a control plane of its
// own (whose API server the test restarts), PostgreSQL, the pod runner
// running runner pods as local processes of the aerie binary, the fake
// model server, and the controller as a process of its own, built from
// ./cmd/aerie-controller, which the test kills and starts again.
type cluster struct {
	t        *testing.T
	cp       *testenv.ControlPlane
	runner   *testenv.PodRunner
	model    *testenv.ModelServer
	ns       string // the sessions' namespace
	platform string // the controller's
	dsn      string
	ctrlBin  string
	ctrlLog  *os.File

	mu   sync.Mutex
	ctrl *exec.Cmd
	exit chan struct{} // closed when ctrl has exited
}

// startCluster starts the cluster, its controller among it.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t, ctrlBin: filepath.Join(dir, "aerie-controller")}
	build := exec.Command("go", "build", "-o", c.ctrlBin, "github.com/aerie-run/aerie/cmd/aerie-controller")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/aerie-controller: %v\n%s", err, out)
	}
	log, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.ctrlLog = log
	t.Cleanup(func() { _ = log.Close() })
	c.cp = testenv.StartControlPlaneWith(t, testenv.ControlPlaneOptions{NoWatchCache: true})
	c.dsn = testenv.StartPostgres(t).NewDatabase(t)
	c.model = testenv.StartModelServer(t)
	c.runner = testenv.StartPodRunner(t, c.cp, testenv.PodRunnerOptions{Commands: map[string]string{"aerie": aerieBin}})
	c.ns, c.platform = c.namespace(), c.cp.Namespace(t)
	c.startController()
	t.Cleanup(func() {
		c.killController()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("the controllers' log:\n%s", tail(string(b)))
		}
	})
	return c
}

// namespace creates the sessions' namespace, Pod Security "restricted"
// enforced, with the Secrets of the store's DSN and the model's key.
func (c *cluster) namespace() string {
	t := c.t
	ns := c.cp.Namespace(t)
	var obj corev1.Namespace
	if err := c.cp.Client.Get(t.Context(), types.NamespacedName{Name: ns}, &obj); err != nil {
		t.Fatal(err)
	}
	obj.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
	if err := c.cp.Client.Update(t.Context(), &obj); err != nil {
		t.Fatalf("label namespace %s restricted: %v", ns, err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: controllers.DefaultDatabaseSecret, Namespace: ns}, StringData: map[string]string{controllers.DefaultDatabaseKey: c.dsn}},
		{ObjectMeta: metav1.ObjectMeta{Name: "model-credentials", Namespace: ns}, StringData: map[string]string{"anthropic-api-key": clusterAPIKey}},
	} {
		if err := c.cp.Client.Create(t.Context(), s); err != nil {
			t.Fatalf("create Secret %s/%s: %v", ns, s.Name, err)
		}
	}
	return ns
}

// startController starts an aerie-controller process.
func (c *cluster) startController() {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmd := exec.Command(c.ctrlBin, "--namespace", c.platform,
		"--runner-image", "ghcr.io/aerie-run/aerie:faults", "--runner-command", "aerie",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--termination-grace", "10s")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.cp.Kubeconfig)
	cmd.Stdout, cmd.Stderr = c.ctrlLog, c.ctrlLog
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start aerie-controller: %v", err)
	}
	exit := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exit)
	}()
	c.ctrl, c.exit = cmd, exit
}

// killController kills the controller with SIGKILL and waits for it to
// exit.
func (c *cluster) killController() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctrl == nil {
		return
	}
	_ = c.ctrl.Process.Signal(syscall.SIGKILL)
	<-c.exit
	c.ctrl = nil
}

// session creates the AgentSession name, whose model answers with turns.
func (c *cluster) session(name string, turns []testenv.Turn) *aeriev1alpha1.AgentSession {
	return c.sessionWith(name, turns, nil)
}

// sessionWith is session with the spec changed by edit, if not nil.
func (c *cluster) sessionWith(name string, turns []testenv.Turn, edit func(*aeriev1alpha1.AgentSessionSpec)) *aeriev1alpha1.AgentSession {
	prompt := "session " + name + ": work through the steps"
	c.model.Conversation(prompt, turns...)
	s := &aeriev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: aeriev1alpha1.AgentSessionSpec{
			Prompt: prompt,
			Model: aeriev1alpha1.ModelSpec{
				Provider: aeriev1alpha1.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: c.model.URL(),
				APIKeySecretRef: &aeriev1alpha1.KeyReference{Name: "model-credentials", Key: "anthropic-api-key"},
			},
		},
	}
	if edit != nil {
		edit(&s.Spec)
	}
	c.retry(fmt.Sprintf("create session %s", name), func(ctx context.Context) error {
		err := c.cp.Client.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			// Created by an attempt whose answer the API server's restart cut.
			return c.cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s)
		}
		return err
	})
	counts.sessions.Add(1)
	return s
}

// stepTurns scripts a step conversation (testenv.NextStep) of n steps,
// each a shell command appending its line to steps.log in the workspace;
// the last sleeps lastSleep, the others 0.2 s. The turns answer whatever
// the conversation asks for, so a resumed run gets its next step.
func stepTurns(t *testing.T, n int, lastSleep time.Duration) []testenv.Turn {
	turn := testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn {
		next, err := testenv.NextStep(req)
		if err != nil {
			t.Errorf("decode the request: %v", err)
		}
		if next > n {
			return testenv.Turn{Text: "all steps done", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}}
		}
		sleep := 0.2
		if next == n {
			sleep = lastSleep.Seconds()
		}
		cmd := fmt.Sprintf("echo step%d >> steps.log; sleep %g", next, sleep)
		args, _ := json.Marshal(map[string]any{"command": cmd})
		return testenv.Turn{
			ToolCalls: []testenv.ToolCall{{ID: fmt.Sprintf("step%d-%d", next, req.Turn), Name: "bash", Arguments: string(args)}},
			Usage:     testenv.TokenUsage{InputTokens: 100, OutputTokens: 10},
		}
	}}
	turns := make([]testenv.Turn, 40)
	for i := range turns {
		turns[i] = turn
	}
	return turns
}

// retry calls f until it succeeds, for at most two minutes: the API
// server may be restarting.
func (c *cluster) retry(what string, f func(context.Context) error) {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(c.t.Context(), 20*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cancel sets the session's spec.cancel.
func (c *cluster) cancel(name string) {
	c.retry("cancel session "+name, func(ctx context.Context) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var s aeriev1alpha1.AgentSession
			if err := c.cp.Client.Get(ctx, types.NamespacedName{Namespace: c.ns, Name: name}, &s); err != nil {
				return err
			}
			s.Spec.Cancel = true
			return c.cp.Client.Update(ctx, &s)
		})
	})
}

// remove deletes the session, as `kubectl delete` does (in the
// background: the controller's finalizer holds it until its pod ended).
func (c *cluster) remove(name string) {
	c.retry("delete session "+name, func(ctx context.Context) error {
		s := &aeriev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name}}
		err := c.cp.Client.Delete(ctx, s, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// podWatch records every runner pod created in a namespace, by name, with
// its UIDs (a name created twice has two), through API server restarts:
// a retry watcher resumes from the last resource version it saw, so no
// creation is missed.
type podWatch struct {
	mu   sync.Mutex
	uids map[string][]types.UID
	last map[string]*corev1.Pod // the last state of each pod seen
}

func (w *podWatch) created() map[string][]types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]types.UID, len(w.uids))
	for k, v := range w.uids {
		out[k] = append([]types.UID(nil), v...)
	}
	return out
}

func (c *cluster) watchPods() *podWatch {
	t := c.t
	cs, err := kubernetes.NewForConfig(c.cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods(c.ns)
	list, err := pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("namespace %s already has pods", c.ns)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pw := &podWatch{uids: map[string][]types.UID{}, last: map[string]*corev1.Pod{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range rw.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				if ctx.Err() == nil {
					t.Errorf("pod watch: %v", ev.Object)
				}
				continue
			}
			pw.mu.Lock()
			if ev.Type == watch.Added {
				pw.uids[p.Name] = append(pw.uids[p.Name], p.UID)
			}
			pw.last[p.Name] = p
			pw.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		rw.Stop()
		<-done
	})
	return pw
}

// podEnded reports whether the pod and all its containers have ended.
func podEnded(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if cs.State.Terminated == nil {
			return false
		}
	}
	return true
}

// checkJournal checks the session's entries in PostgreSQL: numbered from
// 1 without a gap or repeat, no tool call or result stored twice, every
// call answered, and each step's command run at most once a call (the
// workspace's steps.log, when the pod is still there to read it). It
// returns how many entries there are.
func (c *cluster) checkJournal(s *aeriev1alpha1.AgentSession, pod *corev1.Pod) int {
	t := c.t
	st := c.openStore()
	defer st.Close()
	id, err := parseUUID(s.Status.SessionID)
	if err != nil {
		violation(t, "session %s: status.sessionID %q: %v", s.Name, s.Status.SessionID, err)
		return 0
	}
	es, err := st.Entries(t.Context(), c.ns, id)
	if errors.Is(err, store.ErrNotFound) && s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
		return 0 // cancelled or failed before the runner stored it (a wrong phase is a violation of its own)
	}
	if err != nil {
		t.Fatalf("session %s: entries: %v", s.Name, err)
	}
	calls, results := tally(t, "session "+s.Name, es)
	for id, n := range calls {
		if n != 1 || results[id] != 1 {
			violation(t, "session %s: tool call %s stored %d times with %d results", s.Name, id, n, results[id])
		}
	}
	if pod != nil && s.Status.Phase == aeriev1alpha1.PhaseSucceeded {
		b, _ := os.ReadFile(filepath.Join(c.runner.VolumePath(pod, "workspace"), "steps.log"))
		sc := testenv.ReadStepCalls(es)
		for step, ids := range sc.Calls {
			if n := strings.Count(string(b), step+"\n"); n > len(ids) {
				violation(t, "session %s: %s ran %d times for %d calls", s.Name, step, n, len(ids))
			}
		}
	}
	return len(es)
}

func (c *cluster) openStore() *store.DB {
	st, err := dburl.Open(c.t.Context(), c.dsn)
	if err != nil {
		c.t.Fatalf("open the session store: %v", err)
	}
	return st
}
