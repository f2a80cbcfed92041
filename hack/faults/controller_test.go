package faults

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
)

var parseUUID = uuid.Parse

// fate is what the test does to a session while the faults go on.
type fate int

const (
	leftAlone fate = iota // runs to its end: Succeeded
	cancelled             // spec.cancel set mid-run: Cancelled
	deleted               // deleted mid-run: gone
)

// TestControllerKilled kills the controller process with SIGKILL 20 times
// at random points, and restarts the API server twice, while 50
// AgentSessions start, run, get cancelled and get deleted; the controller
// is started again after each kill. Once it settles: no runner pod created
// twice, none without a live owner left running, none of a deleted
// session running, every session in its phase (Succeeded, Cancelled,
// gone), and the journal of every session in PostgreSQL numbered from 1
// with every tool call stored and answered once.
func TestControllerKilled(t *testing.T) {
	c := startCluster(t)
	pods := c.watchPods()
	n, kills, restarts := 50*scale(), 20*scale(), 2*scale()
	rng := rand.New(rand.NewPCG(22, uint64(n)))
	fates := make([]fate, n)
	delays := make([]time.Duration, n)
	for i := range fates { // 3 of 5 left alone, 1 cancelled, 1 deleted
		fates[i] = [...]fate{leftAlone, cancelled, leftAlone, deleted, leftAlone}[i%5]
		delays[i] = time.Duration(200+rng.IntN(4000)) * time.Millisecond
	}
	faultRng := rand.New(rand.NewPCG(23, uint64(kills)))
	gaps := make([]time.Duration, kills)
	for i := range gaps {
		gaps[i] = time.Duration(300+faultRng.IntN(1200)) * time.Millisecond
	}
	start := time.Now()

	var wg sync.WaitGroup
	uids := make([]types.UID, n)
	names := make([]string, n)
	wg.Go(func() {
		var acts sync.WaitGroup
		for i := range n {
			names[i] = fmt.Sprintf("ctl-%03d", i)
			sleep := 200 * time.Millisecond
			if fates[i] != leftAlone {
				sleep = time.Minute // ended by the test, never by itself
			}
			uids[i] = c.session(names[i], stepTurns(t, 3, sleep)).UID
			if f, name, d := fates[i], names[i], delays[i]; f != leftAlone {
				acts.Go(func() {
					time.Sleep(d)
					if f == cancelled {
						c.cancel(name)
					} else {
						c.remove(name)
					}
				})
			}
			time.Sleep(300 * time.Millisecond)
		}
		acts.Wait()
	})
	wg.Go(func() {
		for k := range kills {
			time.Sleep(gaps[k])
			c.killController()
			counts.faults.Add(1)
			if restarts > 0 && (k+1)%(kills/(restarts+1)) == 0 && k+1 < kills {
				if err := c.cp.RestartAPIServer(5 * time.Second); err != nil {
					t.Errorf("restart the API server: %v", err)
				}
				counts.faults.Add(1)
				restarts--
			}
			time.Sleep(time.Duration(faultRng.IntN(300)) * time.Millisecond)
			c.startController()
		}
	})
	wg.Wait()
	t.Logf("faults over after %s", time.Since(start).Round(time.Second))

	live := c.checkPhases(names, fates)
	t.Logf("every session in its phase after %s", time.Since(start).Round(time.Second))
	c.checkPods(pods, names, uids, live)
	t.Logf("%d sessions, %d runner pods created", n, len(pods.created()))
}

// checkPhases waits for every session to reach the phase its fate says,
// for at most three minutes, and returns the sessions still there.
func (c *cluster) checkPhases(names []string, fates []fate) map[string]*aeriev1alpha1.AgentSession {
	t := c.t
	want := map[fate]aeriev1alpha1.AgentSessionPhase{leftAlone: aeriev1alpha1.PhaseSucceeded, cancelled: aeriev1alpha1.PhaseCancelled}
	live := map[string]*aeriev1alpha1.AgentSession{}
	deadline := time.Now().Add(3 * time.Minute)
	for i, name := range names {
		for {
			var s aeriev1alpha1.AgentSession
			err := c.cp.Client.Get(t.Context(), types.NamespacedName{Namespace: c.ns, Name: name}, &s)
			done := false
			switch {
			case apierrors.IsNotFound(err) && fates[i] == deleted:
				done = true
			case apierrors.IsNotFound(err):
				violation(t, "session %s (not deleted) is gone", name)
				done = true
			case err != nil:
				t.Fatalf("get session %s: %v", name, err)
			case fates[i] != deleted && s.Status.Phase.Finished():
				if s.Status.Phase != want[fates[i]] {
					violation(t, "session %s: phase %s, want %s; status: %s", name, s.Status.Phase, want[fates[i]], statusJSON(&s))
				}
				live[name] = &s
				done = true
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				violation(t, "session %s: not %s within 3m; status: %s", name, map[bool]string{true: "gone", false: "finished"}[fates[i] == deleted], statusJSON(&s))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return live
}

func statusJSON(s *aeriev1alpha1.AgentSession) string {
	b, _ := json.Marshal(s.Status)
	return string(b)
}

// checkPods checks the runner pods and ConfigMaps once the sessions have
// settled: each pod name (a session's attempt) created once, the attempts
// of each session those its status counts, every pod and ConfigMap owned
// by a session of the test, none running (a deleted session's included),
// and the journals.
func (c *cluster) checkPods(pods *podWatch, names []string, uids []types.UID, live map[string]*aeriev1alpha1.AgentSession) {
	t := c.t
	owner := map[types.UID]string{}
	for i, uid := range uids {
		owner[uid] = names[i]
	}
	created := pods.created()
	for name, ids := range created {
		if len(ids) > 1 {
			violation(t, "runner pod %s created %d times (UIDs %v)", name, len(ids), ids)
		}
		dash := strings.LastIndex(name, "-")
		if s := live[name[:dash]]; s != nil {
			if a, _ := strconv.Atoi(name[dash+1:]); int32(a) > s.Status.Attempts {
				violation(t, "runner pod %s: attempt %d of a session that counts %d", name, a, s.Status.Attempts)
			}
		}
	}
	retried := 0
	for _, s := range live {
		if s.Status.Attempts > 1 {
			retried++
			t.Logf("session %s: %d attempts (%s)", s.Name, s.Status.Attempts, statusJSON(s))
		}
	}
	t.Logf("%d sessions retried in a new pod", retried)

	deadline := time.Now().Add(time.Minute)
	for {
		var list corev1.PodList
		if err := c.cp.Client.List(t.Context(), &list, client.InNamespace(c.ns)); err != nil {
			t.Fatal(err)
		}
		var running []string
		for i := range list.Items {
			if p := &list.Items[i]; !podEnded(p) {
				running = append(running, p.Name+" ("+string(p.Status.Phase)+")")
			}
		}
		if len(running) == 0 {
			c.checkOwners(list.Items, owner, live)
			break
		}
		if time.Now().After(deadline) {
			violation(t, "pods still running a minute after every session settled: %s", strings.Join(running, ", "))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, s := range live {
		if s.Status.SessionID == "" {
			continue // cancelled before its pod started
		}
		pods.mu.Lock()
		p := pods.last[s.Status.PodName]
		pods.mu.Unlock()
		counts.entries.Add(int64(c.checkJournal(s, p)))
	}
}

// checkOwners checks that every pod and ConfigMap left is controlled by a
// session of the test; those of deleted sessions are left for the garbage
// collector, which envtest does not run.
func (c *cluster) checkOwners(pods []corev1.Pod, owner map[types.UID]string, live map[string]*aeriev1alpha1.AgentSession) {
	t := c.t
	var cms corev1.ConfigMapList
	if err := c.cp.Client.List(t.Context(), &cms, client.InNamespace(c.ns)); err != nil {
		t.Fatal(err)
	}
	objs := make([]metav1.Object, 0, len(pods)+len(cms.Items))
	for i := range pods {
		objs = append(objs, &pods[i])
	}
	for i := range cms.Items {
		if cms.Items[i].Name != "kube-root-ca.crt" {
			objs = append(objs, &cms.Items[i])
		}
	}
	gc := 0
	for _, o := range objs {
		ref := metav1.GetControllerOf(o)
		if ref == nil || owner[ref.UID] == "" {
			violation(t, "%s is controlled by no session of the test: owners %+v", o.GetName(), o.GetOwnerReferences())
			continue
		}
		if s := live[owner[ref.UID]]; s == nil || s.UID != ref.UID {
			gc++
		}
	}
	t.Logf("%d pods and %d ConfigMaps left, %d of them of deleted sessions (the garbage collector's)", len(pods), len(cms.Items), gc)
}
