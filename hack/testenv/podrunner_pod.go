package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aerie-run/aerie/runner/process"
)

// podWorker runs one pod: a goroutine that owns the pod's state and
// brings it one step further at every event (the pod changed, a container
// exited, a timer fired).
type podWorker struct {
	r               *PodRunner
	uid             types.UID
	namespace, name string
	dir             string
	wake            chan struct{}

	// The rest belongs to the worker's goroutine, but for logs.
	pod         *corev1.Pod
	accepted    bool
	startTime   metav1.Time
	volumes     map[string]podVolume // nil until prepared
	volumeErr   error
	init, main  []*containerState
	nextInit    int  // index of the first init container that has not succeeded
	terminating bool // deleted or past its deadline: nothing starts any more
	terminal    bool // phase is final
	phase       corev1.PodPhase
	reason      string
	message     string
	lastWritten *corev1.PodStatus
	// adopted: a pod that had finished under an earlier runner; its status
	// is left as that runner wrote it.
	adopted bool
	retry   time.Duration // delay after an API or configuration error

	logMu sync.Mutex
	logs  map[string][]*containerLog // by container name, one per start
}

// containerState is what the worker knows of one container.
type containerState struct {
	spec *corev1.Container
	init bool
	// sidecar: an init container with restartPolicy Always, which runs
	// beside the containers until they are done.
	sidecar  bool
	restarts int32
	run      *containerRun // the current or the last start; nil before the first
	// state is the state to report; zero before the first start, when
	// the report depends on the pod (ContainerCreating, PodInitializing).
	state corev1.ContainerState
	last  corev1.ContainerState
	// done: terminated and not to be restarted.
	done      bool
	exitCode  int32
	nextStart time.Time // when a restart is due
}

func (c *containerState) running() bool { return c.run != nil && !c.run.collected }

func newPodWorker(r *PodRunner, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		r:         r,
		uid:       pod.UID,
		namespace: pod.Namespace,
		name:      pod.Name,
		dir:       r.podDir(pod),
		wake:      make(chan struct{}, 1),
		pod:       pod,
		logs:      make(map[string][]*containerLog),
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		w.init = append(w.init, &containerState{spec: c, init: true, sidecar: sidecar})
	}
	for i := range pod.Spec.Containers {
		w.main = append(w.main, &containerState{spec: &pod.Spec.Containers[i]})
	}
	return w
}

// wakeUp makes the worker look at its pod again.
func (w *podWorker) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *podWorker) containers() []*containerState { return slices.Concat(w.init, w.main) }

func (w *podWorker) run(ctx context.Context) {
	defer w.r.forget(w)
	log := w.r.log.With("pod", w.namespace+"/"+w.name)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		next, stop := w.sync(ctx)
		if stop {
			log.Debug("pod worker done")
			return
		}
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			// The runner stops: like a kubelet that is shut down, leave the
			// pod object alone, but leave no process behind either.
			w.terminate(context.WithoutCancel(ctx), process.DefaultGrace)
			return
		case <-w.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// sync brings the pod one step further and says when to look again (zero:
// at the next event) or that the worker is done.
func (w *podWorker) sync(ctx context.Context) (next time.Time, stop bool) {
	log := w.r.log.With("pod", w.namespace+"/"+w.name)
	pod, err := w.r.lister.Pods(w.namespace).Get(w.name)
	if apierrors.IsNotFound(err) || (err == nil && pod.UID != w.uid) {
		// Removed without us (a deletion with grace 0): stop what runs.
		w.terminate(ctx, process.DefaultGrace)
		return time.Time{}, true
	}
	if err != nil {
		log.Warn("read pod from cache", "error", err)
		return w.again(), false
	}
	w.pod = pod

	switch pod.Spec.NodeName {
	case w.r.node:
	case "":
		if pod.DeletionTimestamp != nil {
			return time.Time{}, false // the API server removes it at once
		}
		err := w.bind(ctx)
		switch {
		case err == nil, apierrors.IsConflict(err):
			// The update that shows the binding wakes us up.
			return time.Time{}, false
		case apierrors.IsNotFound(err):
			return time.Time{}, false
		default:
			log.Warn("bind pod", "error", err)
			return w.again(), false
		}
	default:
		// Bound to another node: not ours.
		w.terminate(ctx, process.DefaultGrace)
		return time.Time{}, true
	}

	w.collectExits()
	if !w.accepted {
		w.accept()
	}

	if pod.DeletionTimestamp != nil {
		return w.remove(ctx)
	}

	now := time.Now()
	if ads := pod.Spec.ActiveDeadlineSeconds; ads != nil && !w.terminal {
		deadline := w.startTime.Add(time.Duration(*ads) * time.Second)
		if now.Before(deadline) {
			next = deadline
		} else {
			log.Info("pod passed its active deadline", "activeDeadlineSeconds", *ads)
			w.terminate(ctx, specGrace(pod))
			w.collectExits()
			w.fail("DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
		}
	}
	if !w.terminal {
		next = earliest(next, w.advance(ctx))
		w.stopSidecarsWhenDone(ctx)
		w.settlePhase()
	}
	if err := w.writeStatus(ctx); err != nil {
		log.Warn("write pod status", "error", err)
		next = earliest(next, w.again())
	}
	return next, false
}

// again is when to try again after an error: soon, then less and less
// often.
func (w *podWorker) again() time.Time {
	w.retry = min(max(2*w.retry, 100*time.Millisecond), 5*time.Second)
	return time.Now().Add(w.retry)
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// bind binds the pod to the runner's node, as a scheduler does.
func (w *podWorker) bind(ctx context.Context) error {
	return w.r.cs.CoreV1().Pods(w.namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.namespace, UID: w.uid},
		Target:     corev1.ObjectReference{Kind: "Node", Name: w.r.node},
	}, metav1.CreateOptions{})
}

// accept takes the pod on. A pod that already has a start time was taken
// on by an earlier runner of this node, whose processes are gone: a pod
// that had finished stays as it is, any other has lost its containers.
func (w *podWorker) accept() {
	w.accepted = true
	st := w.pod.Status.StartTime
	if st == nil {
		w.startTime = metav1.Now().Rfc3339Copy()
		return
	}
	w.startTime = *st
	w.terminal, w.terminating = true, true
	w.phase = w.pod.Status.Phase
	if w.phase == corev1.PodSucceeded || w.phase == corev1.PodFailed {
		w.adopted = true
		return
	}
	w.phase = corev1.PodFailed
	for _, c := range w.containers() {
		c.done, c.exitCode = true, 137
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown",
			Message: "The container could not be located when the pod was terminated",
		}}
	}
}

// specGrace is the pod's terminationGracePeriodSeconds.
func specGrace(pod *corev1.Pod) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// remove ends a deleted pod as the kubelet does: every container gets the
// deletion's grace period between SIGTERM and SIGKILL, the final status is
// written, and the object is removed with grace 0.
func (w *podWorker) remove(ctx context.Context) (time.Time, bool) {
	log := w.r.log.With("pod", w.namespace+"/"+w.name)
	grace := specGrace(w.pod)
	if g := w.pod.DeletionGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if w.anyRunning() {
		log.Info("pod deleted: stopping its containers", "grace", grace)
	}
	w.terminate(ctx, grace)
	w.collectExits()
	w.settlePhase()
	if err := w.writeStatus(ctx); err != nil && !apierrors.IsNotFound(err) {
		log.Warn("write final pod status", "error", err)
	}
	zero := int64(0)
	err := w.r.cs.CoreV1().Pods(w.namespace).Delete(ctx, w.name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &w.uid},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Conflict: the UID precondition failed, the name is another pod's.
		return time.Time{}, true
	default:
		log.Warn("remove pod", "error", err)
		return w.again(), false
	}
}

func (w *podWorker) anyRunning() bool {
	return slices.ContainsFunc(w.containers(), (*containerState).running)
}

// terminate stops every running container: SIGTERM to its group, grace,
// SIGKILL, and waits until each has been recorded as exited. Nothing starts
// afterwards. As the kubelet does, the sidecars are stopped last, once the
// other containers have exited, one by one in the reverse order of the
// spec, with what is left of the grace period (at least
// minSidecarGrace each): a container may need its sidecars (the agent its
// executor) until its very end.
func (w *podWorker) terminate(ctx context.Context, grace time.Duration) {
	w.terminating = true
	deadline := time.Now().Add(grace)
	var wg sync.WaitGroup
	for _, c := range w.containers() {
		if !c.running() || c.sidecar {
			continue
		}
		run := c.run
		wg.Go(func() {
			run.teardown(ctx, grace, w.r.log)
			<-run.exited
		})
	}
	wg.Wait()
	w.stopSidecars(ctx, deadline)
}

// minSidecarGrace is the least grace a sidecar gets when the pod's grace
// period was spent on the other containers: the kubelet's minimum.
const minSidecarGrace = 2 * time.Second

// stopSidecars stops the running sidecars in the reverse order of the
// spec, each with the grace left until deadline.
func (w *podWorker) stopSidecars(ctx context.Context, deadline time.Time) {
	for _, c := range slices.Backward(w.init) {
		if !c.sidecar || !c.running() {
			continue
		}
		c.run.teardown(ctx, max(time.Until(deadline), minSidecarGrace), w.r.log)
		<-c.run.exited
	}
}

// fail makes the pod Failed for good.
func (w *podWorker) fail(reason, message string) {
	w.terminal, w.terminating = true, true
	w.phase, w.reason, w.message = corev1.PodFailed, reason, message
}

// collectExits records the containers that have exited since the last
// look, and schedules their restarts.
func (w *podWorker) collectExits() {
	for _, c := range w.containers() {
		if !c.running() {
			continue
		}
		select {
		case <-c.run.exited:
		default:
			continue
		}
		c.run.collected = true
		w.recordTermination(c, c.run.terminated())
	}
}

// recordTermination sets a container terminated, and restarting when
// restartPolicy says so.
func (w *podWorker) recordTermination(c *containerState, term *corev1.ContainerStateTerminated) {
	c.exitCode = term.ExitCode
	if w.terminating || !shouldRestart(c, w.pod.Spec.RestartPolicy, term.ExitCode) {
		c.state = corev1.ContainerState{Terminated: term}
		c.done = true
		return
	}
	delay := min(w.r.backoff<<min(c.restarts, 16), time.Minute)
	c.nextStart = time.Now().Add(delay)
	c.last = corev1.ContainerState{Terminated: term}
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.spec.Name, w.name, w.namespace, w.uid),
	}}
}

func shouldRestart(c *containerState, policy corev1.RestartPolicy, exitCode int32) bool {
	switch {
	case c.sidecar:
		return true
	case c.init:
		return exitCode != 0 && policy != corev1.RestartPolicyNever
	case policy == corev1.RestartPolicyAlways:
		return true
	case policy == corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return false
}

// advance prepares the volumes and starts what is due: the next init
// container, or the containers once the init containers have succeeded,
// and restarts whose back-off has passed.
func (w *podWorker) advance(ctx context.Context) time.Time {
	log := w.r.log.With("pod", w.namespace+"/"+w.name)
	if w.volumes == nil {
		vols, err := w.prepareVolumes(ctx)
		if err != nil {
			if w.volumeErr == nil || w.volumeErr.Error() != err.Error() {
				log.Warn("prepare volumes", "error", err)
			}
			w.volumeErr = err
			return w.again()
		}
		w.volumes, w.volumeErr, w.retry = vols, nil, 0
	}
	now := time.Now()
	for w.nextInit < len(w.init) {
		c := w.init[w.nextInit]
		switch {
		case c.sidecar && c.running():
			// Started: a sidecar without a startup probe lets the next
			// container start as soon as it runs.
			w.nextInit++
			continue
		case c.running():
			return time.Time{}
		case c.done && c.exitCode == 0:
			w.nextInit++
			continue
		case c.done:
			w.fail("", "")
			return time.Time{}
		case c.run != nil && now.Before(c.nextStart):
			return c.nextStart
		}
		if err := w.start(ctx, c); err != nil {
			return w.again()
		}
	}
	var next time.Time
	for _, c := range slices.Concat(w.init[:w.nextInit], w.main) {
		if c.init && !c.sidecar {
			continue
		}
		switch {
		case c.running() || c.done:
			continue
		case c.run != nil && now.Before(c.nextStart):
			next = earliest(next, c.nextStart)
			continue
		}
		if err := w.start(ctx, c); err != nil {
			next = earliest(next, w.again())
		}
	}
	return next
}

// stopSidecarsWhenDone stops the sidecars once every container has
// terminated for good, as the kubelet does: the pod's phase then follows
// the containers alone.
func (w *podWorker) stopSidecarsWhenDone(ctx context.Context) {
	if w.terminal || w.nextInit < len(w.init) {
		return
	}
	if !slices.ContainsFunc(w.init, func(c *containerState) bool { return c.sidecar && c.running() }) {
		return
	}
	if slices.ContainsFunc(w.main, func(c *containerState) bool { return !c.done }) {
		return
	}
	w.terminate(ctx, specGrace(w.pod))
	w.collectExits()
}

// settlePhase makes the pod Succeeded or Failed once every container has
// terminated for good.
func (w *podWorker) settlePhase() {
	if w.terminal {
		return
	}
	if w.nextInit < len(w.init) && w.terminating {
		w.fail("", "")
		return
	}
	if w.nextInit < len(w.init) {
		return
	}
	failed := false
	for _, c := range w.main {
		if w.terminating && !c.done && !c.running() && c.last.Terminated != nil {
			// Waiting to restart, which will not happen: its last
			// termination is its end.
			c.state, c.last, c.done = c.last, corev1.ContainerState{}, true
		}
		if !c.done {
			if w.terminating && !c.running() && c.run == nil {
				continue // never started, never will
			}
			return
		}
		failed = failed || c.exitCode != 0
	}
	w.terminal = true
	w.phase = corev1.PodSucceeded
	if failed || w.terminating && slices.ContainsFunc(w.main, func(c *containerState) bool { return c.run == nil }) {
		w.phase = corev1.PodFailed
	}
}

// currentPhase is the phase to report.
func (w *podWorker) currentPhase() corev1.PodPhase {
	switch {
	case w.terminal:
		return w.phase
	case w.nextInit < len(w.init):
		return corev1.PodPending
	case slices.ContainsFunc(w.main, func(c *containerState) bool { return c.run == nil }):
		return corev1.PodPending
	}
	return corev1.PodRunning
}

// status is the pod status to write: the pod's own, with what the runner
// knows in place of the kubelet's fields.
func (w *podWorker) status() corev1.PodStatus {
	st := *w.pod.Status.DeepCopy()
	st.Phase = w.currentPhase()
	st.Reason, st.Message = w.reason, w.message
	st.HostIP, st.HostIPs = nodeIP, []corev1.HostIP{{IP: nodeIP}}
	st.PodIP = podIP(w.pod)
	st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	start := w.startTime
	st.StartTime = &start
	st.InitContainerStatuses = w.containerStatuses(w.init)
	st.ContainerStatuses = w.containerStatuses(w.main)

	now := metav1.Now().Rfc3339Copy()
	set := func(t corev1.PodConditionType, ok bool, reason, message string) {
		s := corev1.ConditionFalse
		if ok {
			s, reason, message = corev1.ConditionTrue, "", ""
		}
		for i := range st.Conditions {
			c := &st.Conditions[i]
			if c.Type != t {
				continue
			}
			if c.Status != s {
				c.LastTransitionTime = now
			}
			c.Status, c.Reason, c.Message = s, reason, message
			return
		}
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: message, LastTransitionTime: now})
	}
	set(corev1.PodScheduled, true, "", "")
	set(corev1.PodReadyToStartContainers, w.volumes != nil && !w.terminal, "", "")
	pending := w.init[min(w.nextInit, len(w.init)):]
	incomplete := make([]string, 0, len(pending))
	for _, c := range pending {
		incomplete = append(incomplete, c.spec.Name)
	}
	set(corev1.PodInitialized, len(incomplete) == 0, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " ")))
	var unready []string
	for _, c := range w.main {
		if !c.running() || w.terminal {
			unready = append(unready, c.spec.Name)
		}
	}
	reason, message := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if w.terminal {
		reason = "PodCompleted"
		message = ""
	}
	set(corev1.ContainersReady, len(unready) == 0, reason, message)
	set(corev1.PodReady, len(unready) == 0, reason, message)
	return st
}

func (w *podWorker) containerStatuses(cs []*containerState) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		running := c.running() && !w.terminal
		s := corev1.ContainerStatus{
			Name:                 c.spec.Name,
			Image:                c.spec.Image,
			ImageID:              "",
			State:                c.state,
			LastTerminationState: c.last,
			Ready:                running,
			Started:              &running,
			RestartCount:         c.restarts,
		}
		if c.run != nil {
			s.ContainerID = c.run.containerID()
		}
		if s.State == (corev1.ContainerState{}) {
			reason := "PodInitializing"
			if w.volumes == nil || c.init {
				reason = "ContainerCreating"
			}
			var msg string
			if w.volumeErr != nil {
				msg = w.volumeErr.Error()
			}
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
		}
		out = append(out, s)
	}
	return out
}

// writeStatus writes the pod's status when it changed.
func (w *podWorker) writeStatus(ctx context.Context) error {
	if w.adopted {
		return nil
	}
	desired := w.status()
	if w.lastWritten != nil && equality.Semantic.DeepEqual(desired, *w.lastWritten) {
		return nil
	}
	if equality.Semantic.DeepEqual(desired, w.pod.Status) {
		w.lastWritten = &desired
		return nil
	}
	pods := w.r.cs.CoreV1().Pods(w.namespace)
	for attempt := 0; ; attempt++ {
		p := w.pod.DeepCopy()
		p.Status = desired
		updated, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			w.pod, w.lastWritten = updated, &desired
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			return fmt.Errorf("update status: %w", err)
		}
		fresh, err := pods.Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("update status: %w", err)
		}
		if fresh.UID != w.uid {
			return fmt.Errorf("update status: %w", errors.New("the pod was replaced by another of the same name"))
		}
		w.pod = fresh
		desired = w.status()
	}
}

// addLog records the log of a container's new start.
func (w *podWorker) addLog(name string, l *containerLog) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	w.logs[name] = append(w.logs[name], l)
}

// logFor returns the log of a container's current start, or of the one
// before with previous.
func (w *podWorker) logFor(name string, previous bool) (*containerLog, error) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	logs, ok := w.logs[name]
	if !ok {
		// The containers' specs never change: they may be read here.
		known := slices.ContainsFunc(w.containers(), func(c *containerState) bool { return c.spec.Name == name })
		if !known {
			return nil, fmt.Errorf("container %q is not in pod %s/%s", name, w.namespace, w.name)
		}
		return nil, fmt.Errorf("container %q in pod %s/%s is waiting to start", name, w.namespace, w.name)
	}
	if previous {
		if len(logs) < 2 {
			return nil, fmt.Errorf("previous terminated container %q in pod %s/%s not found", name, w.namespace, w.name)
		}
		return logs[len(logs)-2], nil
	}
	return logs[len(logs)-1], nil
}
