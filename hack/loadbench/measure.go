package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kind is what a controller under test turns into pods: AgentSessions or
// Jobs.
type kind struct {
	// name names the objects in messages.
	name string
	// object is the i-th object to create in namespace ns.
	object func(ns string, i int) client.Object
	// list is an empty list of the objects, to watch them.
	list func() client.ObjectList
}

// load is how a run creates its objects.
type load struct {
	// objects is how many objects are created at once.
	objects int
	// clients is how many goroutines create them, sharing one client.
	clients int
	// timeout bounds the wait for the last pod.
	timeout time.Duration
}

// recorder collects, per object UID, when the object was created and when
// its first pod was seen. All times come from time.Now, whose monotonic
// reading makes their differences immune to wall-clock steps.
type recorder struct {
	mu sync.Mutex
	// created is the earlier of the create call's return and the
	// object's ADDED event: both come after the object was stored, and
	// whichever this process saw first is nearer that moment.
	created map[types.UID]time.Time
	// pods is when the watch saw the first pod controlled by the object.
	pods map[types.UID]time.Time
	want int
	// lastCreate is when the last create call returned.
	lastCreate time.Time
	// all is closed when want pods have been seen.
	all chan struct{}
}

func newRecorder(want int) *recorder {
	return &recorder{
		created: map[types.UID]time.Time{},
		pods:    map[types.UID]time.Time{},
		want:    want,
		all:     make(chan struct{}),
	}
}

func (r *recorder) sawObject(uid types.UID, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.created[uid]; !ok || at.Before(t) {
		r.created[uid] = at
	}
}

func (r *recorder) createReturned(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at.After(r.lastCreate) {
		r.lastCreate = at
	}
}

func (r *recorder) sawPod(pod client.Object, at time.Time) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pods[owner.UID]; ok {
		return
	}
	r.pods[owner.UID] = at
	if len(r.pods) == r.want {
		close(r.all)
	}
}

func (r *recorder) podCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pods)
}

// latencies pairs the objects with their pods: create → pod for each, and
// the time of the last pod. An object without a pod (or a pod of an object
// not created here) is an error.
func (r *recorder) latencies() ([]time.Duration, time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var (
		out  []time.Duration
		last time.Time
	)
	for uid, created := range r.created {
		seen, ok := r.pods[uid]
		if !ok {
			return nil, last, fmt.Errorf("object %s has no pod", uid)
		}
		out = append(out, seen.Sub(created))
		if seen.After(last) {
			last = seen
		}
	}
	if len(r.pods) != len(r.created) {
		return nil, last, fmt.Errorf("%d pods for %d objects: some pod belongs to no object of this run",
			len(r.pods), len(r.created))
	}
	return out, last, nil
}

// measure creates l.objects objects of kind k in namespace ns at once and
// waits for the pods the controller under test makes of them. Both the pods
// and the objects are watched from before the first create, so that every
// ADDED event is seen.
func measure(ctx context.Context, c client.WithWatch, k kind, ns string, l load) (summary, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := newRecorder(l.objects)

	watchErr := make(chan error, 2)
	pods := func() client.ObjectList { return &corev1.PodList{} }
	if err := follow(ctx, c, pods, ns, rec.sawPod, watchErr); err != nil {
		return summary{}, fmt.Errorf("watch pods: %w", err)
	}
	sawObject := func(o client.Object, at time.Time) { rec.sawObject(o.GetUID(), at) }
	if err := follow(ctx, c, k.list, ns, sawObject, watchErr); err != nil {
		return summary{}, fmt.Errorf("watch %s: %w", k.name, err)
	}

	next := make(chan int)
	createErr := make(chan error, l.clients)
	var wg sync.WaitGroup
	for range l.clients {
		wg.Go(func() {
			for i := range next {
				obj := k.object(ns, i)
				if err := c.Create(ctx, obj); err != nil {
					createErr <- fmt.Errorf("create %s %s: %w", k.name, obj.GetName(), err)
					return
				}
				now := time.Now()
				rec.sawObject(obj.GetUID(), now)
				rec.createReturned(now)
			}
		})
	}
	begin := time.Now()
	go func() {
		defer close(next)
		for i := range l.objects {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()

	timeout := time.NewTimer(l.timeout)
	defer timeout.Stop()
	select {
	case <-rec.all:
	case err := <-createErr:
		return summary{}, err
	case err := <-watchErr:
		return summary{}, err
	case <-timeout.C:
		return summary{}, fmt.Errorf("after %s only %d of %d pods appeared: is the controller running? (see its log)",
			l.timeout, rec.podCount(), l.objects)
	case <-ctx.Done():
		return summary{}, ctx.Err()
	}
	wg.Wait()
	select {
	case err := <-createErr:
		return summary{}, err
	default:
	}
	lat, last, err := rec.latencies()
	if err != nil {
		return summary{}, err
	}
	s, err := summarize(lat, last.Sub(begin))
	s.Creating = rec.lastCreate.Sub(begin)
	return s, err
}

// follow watches the objects of list's type in ns from their current state
// and calls seen with each object ADDED and the time it was received, until
// ctx ends; errors go to errc. It returns once the first watch is open, so
// nothing created afterwards is missed. A watch the API server closes (they
// time out) is reopened from the last version seen.
func follow(
	ctx context.Context, c client.WithWatch, list func() client.ObjectList, ns string,
	seen func(client.Object, time.Time), errc chan<- error,
) error {
	l := list()
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return err
	}
	rv := l.GetResourceVersion()
	open := func() (watch.Interface, error) {
		from := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}}
		return c.Watch(ctx, list(), client.InNamespace(ns), from)
	}
	w, err := open()
	if err != nil {
		return err
	}
	go func() {
		defer func() { w.Stop() }()
		for {
			var ev watch.Event
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.ResultChan():
				if ok {
					ev = e
					break
				}
				if w, err = open(); err != nil {
					if ctx.Err() == nil {
						errc <- fmt.Errorf("reopen the watch in %s: %w", ns, err)
					}
					w = watch.NewEmptyWatch()
					return
				}
				continue
			}
			at := time.Now()
			if ev.Type == watch.Error {
				errc <- fmt.Errorf("watch in %s: %w", ns, apierrors.FromObject(ev.Object))
				return
			}
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			if ev.Type == watch.Added {
				seen(o, at)
			}
		}
	}()
	return nil
}
