package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// restartSessions is how many sessions are in flight when the controller
// restarts: enough for its work queue and cache to matter, few enough for
// their 2×n processes on a small machine.
const restartSessions = 20

// testControllerRestart stops the controller twice: while it is creating
// its sessions' runner pods, and once every runner waits for the model;
// each time a new one starts with the same configuration. Then the model
// answers: every session finishes in the pod it had, no pod is created
// twice, and none is left without its session or running.
func testControllerRestart(t *testing.T, e *e2e) {
	ns := e.namespace(t)
	e = e.in(ns)
	stop := e.startController(t, ns, e.platform)
	pods := watchPods(t, e, ns)

	arrived, release := make(chan struct{}, restartSessions), make(chan struct{})
	hold := testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
		arrived <- struct{}{}
		<-release
		return testenv.Turn{Text: "Done.", Usage: testenv.TokenUsage{InputTokens: 100, OutputTokens: 5}}
	}}
	turns := make([]testenv.Turn, restartSessions)
	for i := range turns {
		turns[i] = hold
	}
	model := testenv.StartModelServer(t, turns...)
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the server's Close, which waits for held requests

	names := make([]string, restartSessions)
	for i := range names {
		names[i] = fmt.Sprintf("restart-%02d", i)
		e.session(t, names[i], model)
	}
	// Half the pods are there: the controller stops with work in its
	// queue, perhaps between creating a pod and recording it.
	for deadline := time.Now().Add(2 * time.Minute); len(pods.created()) < restartSessions/2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runner pods created within 2m", len(pods.created()), restartSessions)
		}
	}
	stop()
	t.Logf("the first controller stopped with %d of %d runner pods created", len(pods.created()), restartSessions)
	stop = e.startController(t, ns, e.platform)

	// Every runner is up and waits for its first answer.
	timeout := time.After(3 * time.Minute)
	for i := range restartSessions {
		select {
		case <-arrived:
		case <-timeout:
			t.Fatalf("%d of %d runners asked the model for a turn within 3m", i, restartSessions)
		}
	}
	stop()
	e.startController(t, ns, e.platform)
	unblock()

	for _, name := range names {
		s := e.waitFinished(t, name)
		if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || s.Status.Attempts != 1 || s.Status.PodName != childName(name, 1) {
			b, _ := json.MarshalIndent(s.Status, "", "  ")
			t.Errorf("session %s: want Succeeded in attempt 1 (pod %s); status:\n%s", name, childName(name, 1), b)
		}
	}

	// Every pod ever created: one per session, its first attempt's.
	created := pods.created()
	var sessions []aeriev1alpha1.AgentSession
	for _, name := range names {
		var s aeriev1alpha1.AgentSession
		if err := e.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		if uids := created[childName(name, 1)]; len(uids) != 1 {
			t.Errorf("runner pod %s was created %d times (UIDs %v), want once", childName(name, 1), len(uids), uids)
		}
	}
	if len(created) != restartSessions {
		t.Errorf("%d runner pods were created (%v), want %d", len(created), slices.Sorted(maps.Keys(created)), restartSessions)
	}

	// None orphaned, none left running: each pod is its session's and has
	// ended, its workspace sidecar too.
	deadline := time.Now().Add(time.Minute)
	for {
		var list corev1.PodList
		if err := e.cp.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var running []string
		for _, p := range list.Items {
			if !ownedByOneOf(&p, sessions) {
				t.Fatalf("pod %s is not controlled by any of the sessions: owners %+v", p.Name, p.OwnerReferences)
			}
			if !podEnded(&p) {
				running = append(running, p.Name+" ("+string(p.Status.Phase)+")")
			}
		}
		if len(running) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods still running a minute after their sessions finished: %s", strings.Join(running, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := model.Remaining(); n != 0 {
		t.Errorf("%d model turns were not asked for", n)
	}
}

// podWatch records the pods created in a namespace, by name, with their
// UIDs: a name created twice has two.
type podWatch struct {
	mu   sync.Mutex
	uids map[string][]types.UID
}

func (w *podWatch) created() map[string][]types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]types.UID, len(w.uids))
	for k, v := range w.uids {
		out[k] = slices.Clone(v)
	}
	return out
}

// watchPods watches the pods of ns from now until the end of t. The watch
// starts from the namespace's current resource version and must not end
// before the test does: a gap would hide a pod.
func watchPods(t *testing.T, e *e2e, ns string) *podWatch {
	t.Helper()
	wc, err := client.NewWithWatch(e.cp.Config, client.Options{Scheme: e.cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.PodList
	if err := e.cp.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("namespace %s already has pods", ns)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		cancel()
		t.Fatalf("watch pods: %v", err)
	}
	pw := &podWatch{uids: map[string][]types.UID{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added:
				p := ev.Object.(*corev1.Pod)
				pw.mu.Lock()
				pw.uids[p.Name] = append(pw.uids[p.Name], p.UID)
				pw.mu.Unlock()
			case watch.Error:
				if ctx.Err() == nil { // not the end of the test's own cancel
					t.Errorf("pod watch: %v", ev.Object)
				}
			}
		}
		if ctx.Err() == nil {
			t.Errorf("the pod watch of %s ended before the test", ns)
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return pw
}

func ownedByOneOf(p *corev1.Pod, sessions []aeriev1alpha1.AgentSession) bool {
	for i := range sessions {
		if metav1.IsControlledBy(p, &sessions[i]) {
			return true
		}
	}
	return false
}

// podEnded reports whether the pod and all its containers have ended.
func podEnded(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if cs.State.Terminated == nil {
			return false
		}
	}
	return true
}
