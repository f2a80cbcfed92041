package controllers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// +kubebuilder:rbac:groups=aerie.run,resources=agentsessions,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=aerie.run,resources=agentsessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=aerie.run,resources=agentsessions/finalizers,verbs=update
// +kubebuilder:rbac:groups=core,resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups=core;events.k8s.io,resources=events,verbs=create;patch

// Finalizer holds an AgentSession until its runner pod has torn down.
const Finalizer = "aerie.run/teardown"

// fieldOwner is the controller's field manager in server-side apply.
const fieldOwner = "aerie-controller"

// AgentSessionReconciler runs each AgentSession in runner pods: one per
// attempt, created once and never changed, with the session's status
// computed from the pod.
type AgentSessionReconciler struct {
	// Client reads from the manager's cache and writes to the API.
	Client client.Client
	// Reader reads the API directly: the users' ConfigMaps and Secrets,
	// which are not cached, and a pod the cache has not seen.
	Reader   client.Reader
	Recorder events.EventRecorder
	Metrics  *Metrics
	Config   Config
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	// secretKeys are the Secret keys found lately; SetupWithManager
	// makes it.
	secretKeys *presence
}

// CacheOptions restrict the manager's cache to what the controller made:
// the runner pods and ConfigMaps, by their managed-by label.
func CacheOptions() cache.Options {
	mine := labels.SelectorFromSet(labels.Set{labelManagedBy: managedBy})
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:       {Label: mine},
			&corev1.ConfigMap{}: {Label: mine},
		},
		// The controller never reads managed fields; without them every
		// cached object is smaller, and so is each copy a read makes.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// SetupWithManager registers the reconciler: it watches AgentSessions and
// the pods and ConfigMaps they own.
func (r *AgentSessionReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := r.Config.Validate(); err != nil {
		return fmt.Errorf("controller config: %w", err)
	}
	r.secretKeys = newPresence(secretCheckTTL)
	return ctrl.NewControllerManagedBy(mgr).
		For(&aeriev1alpha1.AgentSession{}).
		Owns(&corev1.Pod{}).
		// Only their metadata: the controller never reads a runner
		// ConfigMap back, and their content (the prompt among it) need
		// not be decoded and held in memory.
		Owns(&corev1.ConfigMap{}, builder.OnlyMetadata).
		WithOptions(opts).
		Complete(r)
}

// scope is what one reconcile works on.
type scope struct {
	session *aeriev1alpha1.AgentSession
	// before is the session as read, to diff the status against.
	before *aeriev1alpha1.AgentSession
	now    metav1.Time
	// pod is the current attempt's pod; nil when it does not exist.
	pod *corev1.Pod
	// observed is what pod shows and what the reconcile did: with the
	// session, the input of computeStatus.
	observed observation
	// approvals are the decisions the attempt being started resumes with.
	approvals []runconfig.Approval
	// executors are the session's executor pods, of every attempt.
	executors []*corev1.Pod
	// preparing is the attempt whose executor pods are being made ready,
	// before its runner pod is created; 0 when none.
	preparing int32
}

// see makes pod (nil: none) the current attempt's pod and records what it
// shows.
func (sc *scope) see(pod *corev1.Pod) {
	sc.pod = pod
	sc.observed.pod = observePod(pod, sc.session.Spec.Cancel)
	sc.observed.podMissing = pod == nil
}

// Reconcile brings one AgentSession a step closer to its end: guards first
// (finished, cancel requested, deadline passed), then the run itself. The
// phases act and record what they did in the scope; the status is computed
// from that once, at the end, and written once, with events only on
// transitions.
func (r *AgentSessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	s := &aeriev1alpha1.AgentSession{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, s)
	}
	if controllerutil.AddFinalizer(s, Finalizer) {
		// The session goes on in this pass, from the object the update
		// returned: returning for another pass would put it back in the
		// queue behind every other new session, and a burst of sessions
		// would get all their finalizers before the first got its pod.
		// A conflict means the cache was behind; the newer version's
		// event brings the session back.
		if err := r.Client.Update(ctx, s); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	sc := &scope{session: s, before: s.DeepCopy(), now: metav1.NewTime(r.now())}
	if err := r.observe(ctx, sc); err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err != nil {
			// An error requeues with backoff; a result beside it is ignored.
			res = ctrl.Result{}
			return
		}
		if err = r.sweepExecutors(ctx, sc); err != nil {
			res = ctrl.Result{}
			return
		}
		if len(s.Spec.Executors) > 0 {
			sc.observed.executors = sc.executorStatuses()
		}
		s.Status = computeStatus(s, sc.now, sc.observed)
		// A conflict means the session was read from a cache that had
		// not seen the last write yet: what was decided from it is
		// dropped (children have fixed names, so nothing was created
		// twice) and the reconcile runs again on the newer version.
		if err = r.writeStatus(ctx, sc); apierrors.IsConflict(err) {
			// A conflict is a retry on error, what the rate limiter is
			// for, but not an error worth logging as one.
			res, err = ctrl.Result{Requeue: true}, nil //nolint:staticcheck // see above
		}
	}()

	switch {
	case s.Status.Phase.Finished():
		return r.reconcileFinished(ctx, sc)
	case s.Spec.Cancel:
		return r.reconcileCancel(ctx, sc)
	case pastDeadline(s, sc.now.Time):
		return r.reconcileDeadline(ctx, sc)
	}
	return r.reconcileRun(ctx, sc)
}

func (r *AgentSessionReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// observe records the current attempt's pod in the scope, what it shows,
// and the session's executor pods.
func (r *AgentSessionReconciler) observe(ctx context.Context, sc *scope) error {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(sc.session.Namespace),
		client.MatchingLabels{LabelSessionUID: string(sc.session.UID)}); err != nil {
		return fmt.Errorf("list runner pods: %w", err)
	}
	var runners []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case !metav1.IsControlledBy(p, sc.session):
		case isExecutorPod(p):
			sc.executors = append(sc.executors, p)
		default:
			runners = append(runners, p)
		}
	}
	pod, err := r.currentPod(ctx, sc.session, runners)
	if err != nil {
		return err
	}
	sc.see(pod)
	return nil
}

// currentPod finds the pod of the session's current attempt, or nil: by
// its attempt label among the session's runner pods in the cache, then
// (when the cache has not seen it yet) by its name from the API. A pod of
// a later attempt than the status records (a status write that was lost)
// becomes the current one, and the status records it.
func (r *AgentSessionReconciler) currentPod(
	ctx context.Context, s *aeriev1alpha1.AgentSession, pods []*corev1.Pod,
) (*corev1.Pod, error) {
	var current *corev1.Pod
	for _, p := range pods {
		n, err := strconv.Atoi(p.Labels[LabelAttempt])
		if err != nil || n < 1 {
			continue
		}
		if int32(n) > s.Status.Attempts {
			s.Status.Attempts, s.Status.PodName = int32(n), p.Name
			if s.Status.StartTime == nil {
				s.Status.StartTime = &p.CreationTimestamp
			}
		}
		if int32(n) == s.Status.Attempts {
			current = p
		}
	}
	if current != nil || s.Status.Attempts == 0 {
		return current, nil
	}
	var p corev1.Pod
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: childName(s.Name, s.Status.Attempts)}, &p)
	switch {
	case err == nil && metav1.IsControlledBy(&p, s):
		return &p, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get runner pod: %w", err)
	}
	return nil, nil
}

// reconcileRun starts the first attempt, follows the current one, and
// starts the next when a pod is lost and attempts are left.
func (r *AgentSessionReconciler) reconcileRun(ctx context.Context, sc *scope) (ctrl.Result, error) {
	s := sc.session
	if s.Status.Attempts == 0 {
		return r.startAttempt(ctx, sc, 1, "")
	}
	switch p := sc.observed.pod; p.State {
	case podFinished:
		return ctrl.Result{}, nil
	case podAwaiting:
		return r.reconcileAwaiting(ctx, sc, p.Report.Approval)
	case podLost:
		if n := s.Status.Attempts; retries(s)+1 < maxAttempts(s) {
			return r.startAttempt(ctx, sc, n+1, p.Message)
		}
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: until(deadline(s), sc.now.Time)}, nil
}

// reconcileAwaiting waits for a decision on the call the current attempt
// paused on, or for approvalTimeout, then starts the next attempt with the
// decisions in its runner config; it does not count as a retry.
func (r *AgentSessionReconciler) reconcileAwaiting(
	ctx context.Context, sc *scope, a *runconfig.PendingApproval,
) (ctrl.Result, error) {
	s := sc.session
	since := sc.now.Time
	if pa := s.Status.PendingApproval; pa != nil && pa.CallID == a.CallID {
		since = pa.Since.Time
	}
	ds, timedOut, ok := resumeDecisions(s, a.CallID, since, sc.now.Time)
	if !ok {
		next := min(until(approvalDeadline(s, since), sc.now.Time), until(deadline(s), sc.now.Time))
		return ctrl.Result{RequeueAfter: next}, nil
	}
	sc.approvals = ds
	res, err := r.startAttempt(ctx, sc, s.Status.Attempts+1, "")
	if err == nil && sc.observed.started {
		sc.observed.resumed = aeriev1alpha1.ReasonApprovalDecided
		if timedOut {
			sc.observed.resumed = aeriev1alpha1.ReasonApprovalTimedOut
		}
		s.Status.ApprovalResumes++
	}
	return res, err
}

// startAttempt resolves and creates attempt n's ConfigMap and pod. lost
// says why the previous attempt's pod was lost, for a retry.
func (r *AgentSessionReconciler) startAttempt(
	ctx context.Context, sc *scope, n int32, lost string,
) (ctrl.Result, error) {
	s := sc.session
	res := &resolver{
		reader:  r.Reader,
		apply:   applyConfigMap(r.Client),
		own:     ownConfigMap(r.Client),
		cfg:     r.Config,
		present: r.secretKeys,
		now:     sc.now.Time,
	}
	a, err := res.resolve(ctx, s, n, sc.now.Time)
	if isReferenceError(err) {
		sc.observed.rejected = err
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	a.Approvals = sc.approvals
	if len(s.Spec.Executors) > 0 {
		ips, waiting, err := r.prepareExecutors(ctx, sc, a)
		if err != nil {
			return ctrl.Result{}, err
		}
		if waiting != "" {
			// The executor pods' updates wake the reconcile; the
			// requeue is a backstop.
			sc.preparing, sc.observed.preparing = n, waiting
			if s.Status.StartTime == nil {
				// maxDuration counts from here: executors that never
				// get an address time the session out.
				s.Status.StartTime = &sc.now
			}
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
		a.Executors = ips
	}
	cm, err := desiredConfigMap(s, a)
	if err != nil {
		// The spec passed the CRD's validation but not the runner's.
		sc.observed.rejected = err
		return ctrl.Result{}, nil
	}
	// Created once: the ConfigMap is immutable, and a second rendering
	// would differ (the time left), so an existing one stands.
	if err := r.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create runner config %s: %w", cm.Name, err)
	}
	pod := desiredPod(r.Config, s, a)
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create runner pod %s: %w", pod.Name, err)
	}

	st := &s.Status
	if st.StartTime == nil {
		st.StartTime = &sc.now
	}
	st.Attempts, st.PodName, st.SessionID = n, pod.Name, a.SessionID
	sc.see(pod)
	sc.observed.started, sc.observed.lost = true, lost
	return ctrl.Result{RequeueAfter: until(deadline(s), sc.now.Time)}, nil
}

// reconcileCancel stops the current pod with its grace period, so the
// runner tears every process group down and records the cancel; the
// session finishes once the pod has ended.
func (r *AgentSessionReconciler) reconcileCancel(ctx context.Context, sc *scope) (ctrl.Result, error) {
	if st := sc.observed.pod.State; st == podFinished || st == podLost {
		return ctrl.Result{}, nil
	}
	if sc.pod.DeletionTimestamp.IsZero() {
		err := r.Client.Delete(ctx, sc.pod, client.Preconditions{UID: &sc.pod.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete runner pod %s: %w", sc.pod.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

// reconcileDeadline stops the pod of a session whose maxDuration passed
// without the pod reporting it (a pod that never started, a kubelet that
// never stopped it); the session ends timed out.
func (r *AgentSessionReconciler) reconcileDeadline(ctx context.Context, sc *scope) (ctrl.Result, error) {
	if sc.observed.pod.State == podFinished {
		return ctrl.Result{}, nil
	}
	if sc.pod != nil && sc.pod.DeletionTimestamp.IsZero() {
		err := r.Client.Delete(ctx, sc.pod, client.Preconditions{UID: &sc.pod.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete runner pod %s: %w", sc.pod.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

// reconcileFinished deletes a finished session when its TTL has passed.
func (r *AgentSessionReconciler) reconcileFinished(ctx context.Context, sc *scope) (ctrl.Result, error) {
	s := sc.session
	if s.Spec.TTLSecondsAfterFinished == nil || s.Status.CompletionTime == nil {
		return ctrl.Result{}, nil
	}
	expiry := s.Status.CompletionTime.Add(time.Duration(*s.Spec.TTLSecondsAfterFinished) * time.Second)
	if sc.now.Time.Before(expiry) {
		return ctrl.Result{RequeueAfter: expiry.Sub(sc.now.Time)}, nil
	}
	err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID},
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("delete expired session: %w", err)
	}
	log.FromContext(ctx).Info("deleted the session after its TTL",
		"ttlSecondsAfterFinished", *s.Spec.TTLSecondsAfterFinished)
	return ctrl.Result{}, nil
}

// finalize stops the session's pods with their grace period and lets the
// session go once none is running any more.
func (r *AgentSessionReconciler) finalize(ctx context.Context, s *aeriev1alpha1.AgentSession) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s, Finalizer) {
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.InNamespace(s.Namespace),
		client.MatchingLabels{LabelSessionUID: string(s.UID)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list runner pods: %w", err)
	}
	waiting := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, s) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		waiting++
		if p.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("delete runner pod %s: %w", p.Name, err)
			}
		}
	}
	if waiting > 0 {
		// The pods' deletion wakes the reconcile; the requeue is a
		// backstop for a pod whose end the cache misses.
		return ctrl.Result{RequeueAfter: r.Config.TerminationGrace}, nil
	}
	controllerutil.RemoveFinalizer(s, Finalizer)
	if err := r.Client.Update(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// writeStatus writes the status once if it changed, then reports the
// transitions as events and metrics.
func (r *AgentSessionReconciler) writeStatus(ctx context.Context, sc *scope) error {
	s := sc.session
	if equality.Semantic.DeepEqual(sc.before.Status, s.Status) {
		return nil
	}
	// Optimistic locking: a status computed from a stale read must not
	// overwrite a newer one.
	patch := client.MergeFromWithOptions(sc.before, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, s, patch); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if r.Recorder != nil {
		var related runtime.Object
		if sc.pod != nil {
			related = sc.pod
		}
		for _, e := range transitions(&sc.before.Status, &s.Status) {
			r.Recorder.Eventf(s, related, e.kind, e.reason, e.action, "%s", e.note)
		}
	}
	if !sc.before.Status.Phase.Finished() && s.Status.Phase.Finished() {
		r.Metrics.finished(s)
	}
	return nil
}

// until is the time from now to t, for a requeue; zero when t is far off
// or past, so that only real deadlines schedule a wake-up.
func until(t, now time.Time) time.Duration {
	d := t.Sub(now)
	if d <= 0 || d > 7*24*time.Hour+time.Hour {
		return 0
	}
	return d + time.Second
}
