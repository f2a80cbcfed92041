package controllers

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// startupSessions is how many sessions a round of
// BenchmarkNodeSessionStartup starts.
const startupSessions = 50

// BenchmarkNodeSessionStartup measures a session's start as its user sees
// it, on a real node with the runner image present (AERIE_E2E_NODE=real,
// make bench-node): from the AgentSession's create to its runner pod
// created (the controller's part), bound (the scheduler's) and Running (the
// kubelet's), as a watch of the pods sees them, and to the model's first
// request (the runner's), as the model server receives it. A round starts
// startupSessions sessions one after another, each as soon as the one
// before has made its first request (so they overlap as they finish); a
// session started before the rounds warms the node. It reports the p50 and
// p99 of each, in milliseconds, against the Kubernetes pod-startup SLO
// (p99 ≤ 5 s, image pulls excluded). With 50 sessions, p99 is the slowest.
func BenchmarkNodeSessionStartup(b *testing.B) {
	if !testenv.RealNode() {
		b.Skip("real-node benchmark: run with AERIE_E2E_NODE=real (make bench-node)")
	}
	e := startE2E(b)
	pods := e.watchPods(b)
	e.startSession(b, pods, "start-warm")

	var names []string
	var starts []sessionStart
	round := 0
	for b.Loop() {
		round++
		for i := range startupSessions {
			name := fmt.Sprintf("start-%d-%02d", round, i)
			starts = append(starts, e.startSession(b, pods, name))
			names = append(names, name)
		}
	}
	b.StopTimer()
	for _, name := range names {
		if s := e.waitFinished(b, name); s.Status.Phase != aeriev1alpha1.PhaseSucceeded {
			b.Fatalf("session %s: phase %s, want Succeeded; conditions: %+v", name, s.Status.Phase, s.Status.Conditions)
		}
	}
	for _, stage := range []struct {
		name string
		of   func(sessionStart) time.Duration
	}{
		{"pod-created", func(s sessionStart) time.Duration { return s.created }},
		{"pod-bound", func(s sessionStart) time.Duration { return s.bound }},
		{"running", func(s sessionStart) time.Duration { return s.running }},
		{"first-request", func(s sessionStart) time.Duration { return s.firstRequest }},
	} {
		var ds []time.Duration
		for _, s := range starts {
			ds = append(ds, stage.of(s))
		}
		reportPercentiles(b, stage.name, ds)
	}
}

// sessionStart is how long after its create a session's runner pod was
// created, bound and Running, and its model's first request came.
type sessionStart struct {
	created, bound, running, firstRequest time.Duration
}

// startSession applies a session whose model answers at once and returns
// how long its start took.
func (e *e2e) startSession(b *testing.B, pods *podStages, name string) sessionStart {
	b.Helper()
	model := testenv.StartModelServer(b, answer("Done."))
	start := time.Now()
	e.session(b, name, model)
	first := firstRequest(b, model, name)
	at := pods.wait(b, childName(name, 1))
	return sessionStart{
		created: at.created.Sub(start), bound: at.bound.Sub(start), running: at.running.Sub(start),
		firstRequest: first.Sub(start),
	}
}

// firstRequest waits for model's first request and returns when the server
// received it.
func firstRequest(b *testing.B, model *testenv.ModelServer, session string) time.Time {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if reqs := model.Requests(); len(reqs) > 0 {
			return reqs[0].Time
		}
		if time.Now().After(deadline) {
			b.Fatalf("session %s: no model request within a minute", session)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// podStages records when a watch first saw each pod of a namespace, bound
// to a node and Running.
type podStages struct {
	mu sync.Mutex
	at map[string]*podTimes
}

// podTimes is when a watch first saw a pod, bound and Running.
type podTimes struct {
	created, bound, running time.Time
}

// watchPods watches the pods of e's namespace until the end of tb.
func (e *e2e) watchPods(tb testing.TB) *podStages {
	tb.Helper()
	wc, err := client.NewWithWatch(e.cp.Config, client.Options{Scheme: e.cp.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	w, err := wc.Watch(tb.Context(), &corev1.PodList{}, client.InNamespace(e.ns))
	if err != nil {
		tb.Fatalf("watch the pods of %s: %v", e.ns, err)
	}
	tb.Cleanup(w.Stop)
	ps := &podStages{at: map[string]*podTimes{}}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				ps.saw(p, time.Now())
			}
		}
	}()
	return ps
}

// saw records the stages pod has reached by now.
func (ps *podStages) saw(pod *corev1.Pod, now time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	at := ps.at[pod.Name]
	if at == nil {
		at = &podTimes{created: now}
		ps.at[pod.Name] = at
	}
	if at.bound.IsZero() && pod.Spec.NodeName != "" {
		at.bound = now
	}
	if at.running.IsZero() && pod.Status.Phase == corev1.PodRunning {
		at.running = now
	}
}

// wait returns when the watch first saw pod, bound and Running, once it
// has seen it Running.
func (ps *podStages) wait(tb testing.TB, pod string) podTimes {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ps.mu.Lock()
		at := ps.at[pod]
		var got podTimes
		if at != nil {
			got = *at
		}
		ps.mu.Unlock()
		if !got.running.IsZero() {
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pod %s not seen Running within a minute", pod)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// reportPercentiles reports the nearest-rank p50 and p99 of ds in
// milliseconds, as name-p50-ms and name-p99-ms.
func reportPercentiles(b *testing.B, name string, ds []time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		b.Fatalf("no %s figures", name)
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	for _, p := range []float64{0.50, 0.99} {
		d := s[int(math.Ceil(p*float64(len(s))))-1]
		b.ReportMetric(float64(d.Microseconds())/1000, fmt.Sprintf("%s-p%.0f-ms", name, p*100))
	}
}
