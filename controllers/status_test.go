package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// podWith builds a runner pod in phase with the agent container in state.
func podWith(phase corev1.PodPhase, agent corev1.ContainerState, change ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{Status: corev1.PodStatus{
		Phase:             phase,
		ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerAgent, State: agent}},
	}}
	for _, c := range change {
		c(p)
	}
	return p
}

func exited(code int32, message string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: message, Reason: "Error"}}
}

func report(t *testing.T, r runconfig.Report) string {
	t.Helper()
	b, err := runconfig.EncodeReport(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestObservePod(t *testing.T) {
	t.Parallel()
	done := runconfig.Report{Outcome: runconfig.OutcomeCompleted, SessionID: testUID, Summary: "Fixed.", Usage: runconfig.Usage{InputTokens: 100, OutputTokens: 20, Requests: 2, ToolCalls: 3}}
	budget := runconfig.Report{Outcome: runconfig.OutcomeBudgetExceeded, ExitCode: 4, Reason: "the turn budget of 2 is spent"}
	deadline := runconfig.Report{Outcome: runconfig.OutcomeDeadlineExceeded, ExitCode: 4, Reason: "the time budget of 1m is spent"}
	cancelled := runconfig.Report{Outcome: runconfig.OutcomeCancelled, ExitCode: 143, Reason: "stopped by SIGTERM"}
	invalid := runconfig.Report{Outcome: runconfig.OutcomeResultInvalid, ExitCode: 6, Reason: "the schema rejected 3 submissions of the result"}
	evicted := func(p *corev1.Pod) {
		p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
	}

	tests := []struct {
		name       string
		pod        *corev1.Pod
		cancelling bool
		want       podResult
	}{
		{"deleted", nil, false, podResult{State: podLost, Message: "the runner pod was deleted"}},
		{"deleted while cancelling", nil, true, podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeCancelled, Reason: aeriev1alpha1.ReasonCancelled, Message: "the session was cancelled"}},
		{"unscheduled", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/3 nodes are available"}}}}, false,
			podResult{State: podPending, Message: "waiting to be scheduled: 0/3 nodes are available"}},
		{"image pull", podWith(corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "back-off pulling image"}}), false,
			podResult{State: podPending, Message: "waiting for the agent container: ImagePullBackOff: back-off pulling image"}},
		{"running", podWith(corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}), false, podResult{State: podRunning, Message: "the agent is running"}},
		{"completed", podWith(corev1.PodSucceeded, exited(0, report(t, done))), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeCompleted, Reason: aeriev1alpha1.ReasonCompleted, ExitCode: ptr.To(int32(0)), Message: "the agent finished its task", Report: &done}},
		{"budget", podWith(corev1.PodFailed, exited(4, report(t, budget))), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeBudgetExceeded, Reason: aeriev1alpha1.ReasonBudgetExceeded, ExitCode: ptr.To(int32(4)), Message: budget.Reason, Report: &budget}},
		{"time budget", podWith(corev1.PodFailed, exited(4, report(t, deadline))), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeTimedOut, Reason: aeriev1alpha1.ReasonDeadlineExceeded, ExitCode: ptr.To(int32(4)), Message: deadline.Reason, Report: &deadline}},
		{"result invalid", podWith(corev1.PodFailed, exited(6, report(t, invalid))), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeResultInvalid, Reason: aeriev1alpha1.ReasonResultInvalid, ExitCode: ptr.To(int32(6)), Message: invalid.Reason, Report: &invalid}},
		{"model error", podWith(corev1.PodFailed, exited(3, "")), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeFailed, Reason: aeriev1alpha1.ReasonAgentFailed, ExitCode: ptr.To(int32(3)), Message: "the runner exited with code 3"}},
		{"config error with log tail", podWith(corev1.PodFailed, exited(2, "aerie: runner config: model.provider")), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeError, Reason: aeriev1alpha1.ReasonRunnerError, ExitCode: ptr.To(int32(2)), Message: "the runner exited with code 2: aerie: runner config: model.provider"}},
		{"crash", podWith(corev1.PodFailed, exited(2, "")), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeError, Reason: aeriev1alpha1.ReasonRunnerError, ExitCode: ptr.To(int32(2)), Message: "the runner exited with code 2"}},
		{"cancelled", podWith(corev1.PodFailed, exited(143, report(t, cancelled))), true,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeCancelled, Reason: aeriev1alpha1.ReasonCancelled, ExitCode: ptr.To(int32(143)), Message: "the session was cancelled", Report: &cancelled}},
		{"killed after grace while cancelling", podWith(corev1.PodFailed, exited(137, "")), true,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeCancelled, Reason: aeriev1alpha1.ReasonCancelled, ExitCode: ptr.To(int32(137)), Message: "the session was cancelled"}},
		{"stopped from outside", podWith(corev1.PodFailed, exited(143, report(t, cancelled))), false,
			podResult{State: podLost, ExitCode: ptr.To(int32(143)), Message: "the runner was stopped from outside (exit code 143)", Report: &cancelled}},
		{"evicted before starting", podWith(corev1.PodFailed, corev1.ContainerState{}, evicted), false,
			podResult{State: podLost, Message: "Evicted: The node was low on resource: memory."}},
		{"evicted while running", podWith(corev1.PodFailed, exited(143, report(t, cancelled)), evicted), false,
			podResult{State: podLost, ExitCode: ptr.To(int32(143)), Message: "Evicted: The node was low on resource: memory.", Report: &cancelled}},
		{"evicted after completing", podWith(corev1.PodFailed, exited(0, report(t, done)), evicted), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeCompleted, Reason: aeriev1alpha1.ReasonCompleted, ExitCode: ptr.To(int32(0)), Message: "the agent finished its task", Report: &done}},
		{"agent OOM", podWith(corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}), false,
			podResult{State: podLost, ExitCode: ptr.To(int32(137)), Message: "the agent container was OOM-killed"}},
		{"workspace OOM", podWith(corev1.PodFailed, exited(1, ""), func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: ContainerWorkspace, LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
		}), false, podResult{State: podLost, ExitCode: ptr.To(int32(1)), Message: "the workspace container was OOM-killed"}},
		// containerd marks a container OOMKilled when any process in it
		// was (a tool): a sidecar that then ended cleanly, and an agent
		// that failed on its own, were not taken away.
		{"a tool OOM-killed in the workspace", podWith(corev1.PodFailed, exited(1, ""), func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: ContainerWorkspace, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "OOMKilled"}}}}
		}), false, podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeError, Reason: aeriev1alpha1.ReasonRunnerError, ExitCode: ptr.To(int32(1)), Message: "the runner exited with code 1"}},
		{"a child OOM-killed in the agent container", podWith(corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "OOMKilled"}}), false,
			podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeError, Reason: aeriev1alpha1.ReasonRunnerError, ExitCode: ptr.To(int32(1)), Message: "the runner exited with code 1"}},
		{"node disruption", podWith(corev1.PodFailed, exited(137, ""), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint"}}
		}), false, podResult{State: podLost, ExitCode: ptr.To(int32(137)), Message: "the runner pod was disrupted: DeletionByTaintManager: Taint manager: deleting due to NoExecute taint"}},
		{"active deadline", podWith(corev1.PodFailed, exited(137, ""), func(p *corev1.Pod) {
			p.Status.Reason, p.Status.Message = "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
		}), false, podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeTimedOut, Reason: aeriev1alpha1.ReasonDeadlineExceeded, ExitCode: ptr.To(int32(137)), Message: "DeadlineExceeded: Pod was active on the node longer than the specified deadline"}},
		{"failed without a trace", podWith(corev1.PodFailed, corev1.ContainerState{}), false,
			podResult{State: podLost, Message: "the runner pod failed before the agent ended"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := observePod(tt.pod, tt.cancelling)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(podResult{})); diff != "" {
				t.Errorf("observePod() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestComputeStatus walks a session through the ways it can go, one
// reconcile a row: the status before, what the reconcile observed, the
// status after.
func TestComputeStatus(t *testing.T) {
	t.Parallel()
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	now := metav1.NewTime(then.Add(5 * time.Minute))
	const gen = 2
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	accepted := cond(aeriev1alpha1.ConditionAccepted, metav1.ConditionTrue, aeriev1alpha1.ReasonAccepted, "references resolved and the runner configuration rendered")
	// at is a session's status at attempt n, with what startAttempt and
	// observe record besides the phase and conditions.
	at := func(phase aeriev1alpha1.AgentSessionPhase, n int32, conds ...metav1.Condition) aeriev1alpha1.AgentSessionStatus {
		return aeriev1alpha1.AgentSessionStatus{
			Phase: phase, Attempts: n, PodName: childName("fix-tests", n), SessionID: testUID,
			StartTime: &then, ObservedGeneration: gen, Conditions: conds,
		}
	}
	ended := func(st aeriev1alpha1.AgentSessionStatus, r aeriev1alpha1.Result, u *aeriev1alpha1.Usage) aeriev1alpha1.AgentSessionStatus {
		st.CompletionTime, st.Result, st.Usage = &now, &r, u
		return st
	}
	const (
		waiting   = "waiting for the runner pod to start"
		creating  = "waiting for the agent container: ContainerCreating"
		scheduled = "waiting to be scheduled: 0/3 nodes are available: 3 Insufficient memory."
		evicted   = "Evicted: The node was low on resource: memory."
	)
	pending := at(aeriev1alpha1.PhasePending, 1, accepted,
		cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, waiting),
		cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonPending, waiting))
	running := at(aeriev1alpha1.PhaseRunning, 1, accepted,
		cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionTrue, aeriev1alpha1.ReasonRunning, "the agent is running"),
		cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonRunning, "the agent is working on its task"))
	retrying := at(aeriev1alpha1.PhasePending, 2, accepted,
		cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPodLost, evicted),
		cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonRetrying, "attempt 2 of 3 resumes session "+testUID+" in pod fix-tests-2: "+evicted))
	rep := &runconfig.Report{Outcome: runconfig.OutcomeCompleted, Summary: "Fixed.", Usage: runconfig.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, Requests: 2, ToolCalls: 3}}
	completed := podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeCompleted, Reason: aeriev1alpha1.ReasonCompleted, ExitCode: ptr.To(int32(0)), Message: "done", Report: rep}
	cancel := func(s *aeriev1alpha1.AgentSession) { s.Spec.Cancel = true }
	tenMinutes := func(s *aeriev1alpha1.AgentSession) {
		s.Spec.Budget = &aeriev1alpha1.Budget{MaxDuration: &metav1.Duration{Duration: 10 * time.Minute}}
	}
	// overdue: started long enough ago for ten minutes and the slack to have passed.
	overdue := func(st aeriev1alpha1.AgentSessionStatus) aeriev1alpha1.AgentSessionStatus {
		st.StartTime = &metav1.Time{Time: now.Add(-10*time.Minute - 2*deadlineSlack - time.Second)}
		return st
	}
	timedOut := func(before aeriev1alpha1.AgentSessionStatus, podReady metav1.Condition, msg string) aeriev1alpha1.AgentSessionStatus {
		return ended(at(aeriev1alpha1.PhaseFailed, before.Attempts, accepted, podReady,
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionFalse, aeriev1alpha1.ReasonDeadlineExceeded, msg)),
			aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeTimedOut, Message: msg}, nil)
	}

	tests := []struct {
		name   string
		spec   func(*aeriev1alpha1.AgentSession)
		before aeriev1alpha1.AgentSessionStatus
		obs    observation
		want   aeriev1alpha1.AgentSessionStatus
	}{{
		name:   "first attempt started",
		before: aeriev1alpha1.AgentSessionStatus{Attempts: 1, PodName: "fix-tests-1", SessionID: testUID, StartTime: &then},
		obs:    observation{pod: podResult{State: podPending, Message: waiting}, started: true},
		want:   pending,
	}, {
		name:   "pending",
		before: pending,
		obs:    observation{pod: podResult{State: podPending, Message: creating}},
		want: at(aeriev1alpha1.PhasePending, 1, accepted,
			cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, creating),
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonPending, creating)),
	}, {
		name:   "running",
		before: pending,
		obs:    observation{pod: podResult{State: podRunning, Message: "the agent is running"}},
		want:   running,
	}, {
		name:   "completed",
		before: running,
		obs:    observation{pod: completed},
		want: ended(at(aeriev1alpha1.PhaseSucceeded, 1, accepted,
			cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonCompleted, "the session finished"),
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionTrue, aeriev1alpha1.ReasonCompleted, "done")),
			aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeCompleted, Summary: "Fixed.", ExitCode: ptr.To(int32(0)), Message: "done"},
			&aeriev1alpha1.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, TotalTokens: 125, Turns: 2, ToolCalls: 3}),
	}, {
		name:   "failed before it ran keeps why the pod was not ready",
		before: pending,
		obs:    observation{pod: podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeError, Reason: aeriev1alpha1.ReasonRunnerError, ExitCode: ptr.To(int32(2)), Message: "config: model.name: missing"}},
		want: ended(at(aeriev1alpha1.PhaseFailed, 1, accepted,
			cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, waiting),
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionFalse, aeriev1alpha1.ReasonRunnerError, "config: model.name: missing")),
			aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeError, ExitCode: ptr.To(int32(2)), Message: "config: model.name: missing"}, nil),
	}, {
		name: "retry started",
		before: func() aeriev1alpha1.AgentSessionStatus {
			st := running
			st.Attempts, st.PodName = 2, "fix-tests-2"
			return st
		}(),
		obs:  observation{pod: podResult{State: podPending, Message: waiting}, started: true, lost: evicted},
		want: retrying,
	}, {
		name:   "pending after a retry stays retrying",
		before: retrying,
		obs:    observation{pod: podResult{State: podPending, Message: scheduled}},
		want: at(aeriev1alpha1.PhasePending, 2, accepted,
			cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, scheduled),
			retrying.Conditions[2]),
	}, {
		name: "retries exhausted",
		before: func() aeriev1alpha1.AgentSessionStatus {
			st := running
			st.Attempts, st.PodName = 3, "fix-tests-3"
			return st
		}(),
		obs: observation{pod: podResult{State: podLost, ExitCode: ptr.To(int32(137)), Message: evicted}},
		want: ended(at(aeriev1alpha1.PhaseFailed, 3, accepted,
			cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonRetriesExhausted, "the session finished"),
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionFalse, aeriev1alpha1.ReasonRetriesExhausted, "the runner pod was lost in each of 3 attempts; the last time: "+evicted)),
			aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeError, ExitCode: ptr.To(int32(137)), Message: "the runner pod was lost in each of 3 attempts; the last time: " + evicted}, nil),
	}, {
		name: "rejected",
		obs:  observation{pod: podResult{State: podLost, Message: "the runner pod was deleted"}, podMissing: true, rejected: errors.New(`ConfigMap "prompts" has no key "task"`)},
		want: aeriev1alpha1.AgentSessionStatus{
			Phase: aeriev1alpha1.PhaseFailed, ObservedGeneration: gen, CompletionTime: &now,
			Result: &aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeError, Message: `ConfigMap "prompts" has no key "task"`},
			Conditions: []metav1.Condition{
				cond(aeriev1alpha1.ConditionAccepted, metav1.ConditionFalse, aeriev1alpha1.ReasonInvalidReference, `ConfigMap "prompts" has no key "task"`),
				cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionFalse, aeriev1alpha1.ReasonInvalidReference, `ConfigMap "prompts" has no key "task"`),
				cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonInvalidReference, "the session finished"),
			},
		},
	}, {
		name:   "cancelling",
		spec:   cancel,
		before: running,
		obs:    observation{pod: podResult{State: podRunning, Message: "the agent is running"}},
		want: at(aeriev1alpha1.PhaseRunning, 1, accepted, running.Conditions[1],
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonCancelled, "cancelling: waiting for the runner pod fix-tests-1 to tear down")),
	}, {
		name:   "cancelled",
		spec:   cancel,
		before: running,
		obs:    observation{pod: observePod(nil, true), podMissing: true},
		want: ended(at(aeriev1alpha1.PhaseCancelled, 1, accepted,
			cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonCancelled, "the session finished"),
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionFalse, aeriev1alpha1.ReasonCancelled, "the session was cancelled")),
			aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeCancelled, Message: "the session was cancelled"}, nil),
	}, {
		name:   "cancelled while the pod was taken away",
		spec:   cancel,
		before: running,
		obs:    observation{pod: podResult{State: podLost, ExitCode: ptr.To(int32(137)), Message: "the agent container was OOM-killed"}},
		want: ended(at(aeriev1alpha1.PhaseCancelled, 1, accepted,
			cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonCancelled, "the session finished"),
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionFalse, aeriev1alpha1.ReasonCancelled, "the session was cancelled")),
			aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeCancelled, ExitCode: ptr.To(int32(137)), Message: "the session was cancelled"}, nil),
	}, {
		name:   "deadline before the runner started",
		spec:   tenMinutes,
		before: overdue(pending),
		obs:    observation{pod: podResult{State: podPending, Message: scheduled}},
		want: overdue(timedOut(pending, pending.Conditions[1],
			"the session's maxDuration of 10m0s passed before the runner started: "+scheduled)),
	}, {
		name: "deadline with the pod out of the cache's sight",
		spec: tenMinutes,
		before: func() aeriev1alpha1.AgentSessionStatus {
			st := overdue(pending)
			st.Conditions = []metav1.Condition{accepted, cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, creating), pending.Conditions[2]}
			return st
		}(),
		obs: observation{pod: podResult{State: podLost, Message: "the runner pod was deleted"}, podMissing: true},
		want: overdue(timedOut(pending, cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, creating),
			"the session's maxDuration of 10m0s passed before the runner started: "+creating)),
	}, {
		name:   "deadline while running",
		spec:   tenMinutes,
		before: overdue(running),
		obs:    observation{pod: podResult{State: podRunning, Message: "the agent is running"}},
		want: overdue(timedOut(running, cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonDeadlineExceeded, "the session finished"),
			"the session's maxDuration of 10m0s passed")),
	}, {
		name:   "the runner's own end wins over the deadline",
		spec:   tenMinutes,
		before: overdue(running),
		obs:    observation{pod: completed},
		want: overdue(ended(at(aeriev1alpha1.PhaseSucceeded, 1, accepted,
			cond(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonCompleted, "the session finished"),
			cond(aeriev1alpha1.ConditionSucceeded, metav1.ConditionTrue, aeriev1alpha1.ReasonCompleted, "done")),
			aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeCompleted, Summary: "Fixed.", ExitCode: ptr.To(int32(0)), Message: "done"},
			&aeriev1alpha1.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, TotalTokens: 125, Turns: 2, ToolCalls: 3})),
	}, {
		name: "finished stays finished",
		spec: cancel,
		before: func() aeriev1alpha1.AgentSessionStatus {
			st := ended(running, aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeFailed}, nil)
			st.Phase, st.ObservedGeneration = aeriev1alpha1.PhaseFailed, 1
			return st
		}(),
		obs: observation{pod: podResult{State: podRunning, Message: "the agent is running"}, started: true},
		want: func() aeriev1alpha1.AgentSessionStatus {
			st := ended(running, aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeFailed}, nil)
			st.Phase = aeriev1alpha1.PhaseFailed
			return st
		}(),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := minimalSession()
			s.Generation = gen
			if tt.spec != nil {
				tt.spec(s)
			}
			s.Status = *tt.before.DeepCopy()
			got := computeStatus(s, now, tt.obs)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"),
				cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type })); diff != "" {
				t.Errorf("computeStatus() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.before, s.Status); diff != "" {
				t.Errorf("computeStatus() changed the session it was given (-before +after):\n%s", diff)
			}
		})
	}
}

// TestComputeStatusTransitionTime: a condition's transition time is the
// reconcile's when its status changes, and stays when only its reason or
// message does.
func TestComputeStatusTransitionTime(t *testing.T) {
	t.Parallel()
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Minute))
	s := minimalSession()
	s.Status = aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhasePending, Attempts: 1, PodName: "fix-tests-1", Conditions: []metav1.Condition{
		{Type: aeriev1alpha1.ConditionPodReady, Status: metav1.ConditionFalse, Reason: aeriev1alpha1.ReasonPending, LastTransitionTime: then},
		{Type: aeriev1alpha1.ConditionSucceeded, Status: metav1.ConditionUnknown, Reason: aeriev1alpha1.ReasonPending, LastTransitionTime: then},
	}}
	got := computeStatus(s, now, observation{pod: podResult{State: podRunning, Message: "the agent is running"}})
	for typ, want := range map[string]metav1.Time{aeriev1alpha1.ConditionPodReady: now, aeriev1alpha1.ConditionSucceeded: then} {
		if c := meta.FindStatusCondition(got.Conditions, typ); c == nil || !c.LastTransitionTime.Equal(&want) {
			t.Errorf("%s = %+v, want its transition time at %s", typ, c, want)
		}
	}
}

// TestComputeStatusOutcomes: every outcome a runner reports ends the
// session in its phase, with a False Succeeded condition unless it
// completed, and messages bounded.
func TestComputeStatusOutcomes(t *testing.T) {
	t.Parallel()
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for outcome, phase := range map[aeriev1alpha1.Outcome]aeriev1alpha1.AgentSessionPhase{
		aeriev1alpha1.OutcomeCompleted: aeriev1alpha1.PhaseSucceeded, aeriev1alpha1.OutcomeFailed: aeriev1alpha1.PhaseFailed,
		aeriev1alpha1.OutcomeCancelled: aeriev1alpha1.PhaseCancelled, aeriev1alpha1.OutcomeBudgetExceeded: aeriev1alpha1.PhaseFailed,
		aeriev1alpha1.OutcomeError: aeriev1alpha1.PhaseFailed, aeriev1alpha1.OutcomeTimedOut: aeriev1alpha1.PhaseFailed,
		aeriev1alpha1.OutcomeResultInvalid: aeriev1alpha1.PhaseFailed, aeriev1alpha1.OutcomePushFailed: aeriev1alpha1.PhaseFailed,
	} {
		s := minimalSession()
		s.Status = aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}
		st := computeStatus(s, now, observation{pod: podResult{State: podFinished, Outcome: outcome, Reason: "R", Message: strings.Repeat("m", 5000)}})
		c := meta.FindStatusCondition(st.Conditions, aeriev1alpha1.ConditionSucceeded)
		want := metav1.ConditionFalse
		if outcome == aeriev1alpha1.OutcomeCompleted {
			want = metav1.ConditionTrue
		}
		if st.Phase != phase || c == nil || c.Status != want || len(c.Message) > maxMessageBytes+3 || len(st.Result.Message) > maxMessageBytes+3 || st.Usage != nil {
			t.Errorf("outcome %s: phase %s, Succeeded %+v, result message %d bytes, usage %v", outcome, st.Phase, c, len(st.Result.Message), st.Usage)
		}
	}
}

// TestComputeStatusStructured: a report's structured result is in the
// status when the report carried it, else its reference to the store.
func TestComputeStatusStructured(t *testing.T) {
	t.Parallel()
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	tests := []struct {
		name    string
		result  *runconfig.Result
		wantRaw string
		wantRef *aeriev1alpha1.StructuredResultRef
	}{
		{"none", nil, "", nil},
		{"carried", &runconfig.Result{Value: []byte(`{"ok":true}`), Seq: 9}, `{"ok":true}`, nil},
		{"too large for the report", &runconfig.Result{Seq: 9}, "", &aeriev1alpha1.StructuredResultRef{SessionID: testUID, Seq: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := minimalSession()
			s.Status = aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}
			rep := &runconfig.Report{Outcome: runconfig.OutcomeCompleted, SessionID: testUID, Result: tt.result}
			st := computeStatus(s, now, observation{pod: podResult{
				State: podFinished, Outcome: aeriev1alpha1.OutcomeCompleted, Reason: aeriev1alpha1.ReasonCompleted, Report: rep,
			}})
			var raw string
			if st.Result.Structured != nil {
				raw = string(st.Result.Structured.Raw)
			}
			if raw != tt.wantRaw {
				t.Errorf("structured = %q, want %q", raw, tt.wantRaw)
			}
			if diff := cmp.Diff(tt.wantRef, st.Result.StructuredRef); diff != "" {
				t.Errorf("structuredRef (-want +got):\n%s", diff)
			}
		})
	}
}

// TestComputeStatusPushed: the delivery of spec.workspace.git.push is the
// result's commit and branch and the Pushed condition; a failed push is
// outcome PushFailed.
func TestComputeStatusPushed(t *testing.T) {
	t.Parallel()
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	commit := "0123456789abcdef0123456789abcdef01234567"
	failed := &runconfig.PushReport{Branch: "aerie/x", Error: "git push: exit status 1: ! [remote rejected] frozen"}
	tests := []struct {
		name         string
		code         int32
		push         *runconfig.PushReport
		outcome      aeriev1alpha1.Outcome
		status       metav1.ConditionStatus
		reason, want string
	}{
		{"pushed", 0, &runconfig.PushReport{Branch: "aerie/x", Commit: commit}, aeriev1alpha1.OutcomeCompleted,
			metav1.ConditionTrue, aeriev1alpha1.ReasonPushed, "pushed commit " + commit + " to branch aerie/x"},
		{"nothing", 0, &runconfig.PushReport{Branch: "aerie/x", NothingToPush: true}, aeriev1alpha1.OutcomeCompleted,
			metav1.ConditionTrue, aeriev1alpha1.ReasonNothingToPush, "nothing to push to branch aerie/x"},
		{"failed", 1, failed, aeriev1alpha1.OutcomePushFailed,
			metav1.ConditionFalse, aeriev1alpha1.ReasonPushFailed, "push to branch aerie/x failed: git push"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rep := runconfig.Report{Outcome: runconfig.OutcomeCompleted, ExitCode: int(tt.code), Push: tt.push}
			if tt.push.Error != "" {
				rep.Outcome, rep.Reason = runconfig.OutcomePushFailed, tt.push.Message()
			}
			phase := corev1.PodSucceeded
			if tt.code != 0 {
				phase = corev1.PodFailed
			}
			r := observePod(podWith(phase, exited(tt.code, report(t, rep))), false)
			s := minimalSession()
			s.Status = aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}
			st := computeStatus(s, now, observation{pod: r})
			c := meta.FindStatusCondition(st.Conditions, aeriev1alpha1.ConditionPushed)
			if st.Result.Outcome != tt.outcome || c == nil || c.Status != tt.status || c.Reason != tt.reason ||
				!strings.HasPrefix(c.Message, tt.want) || st.Result.Branch != "aerie/x" || st.Result.Commit != tt.push.Commit {
				t.Errorf("outcome %s, Pushed %+v, result %+v", st.Result.Outcome, c, st.Result)
			}
		})
	}
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	cond := func(reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: aeriev1alpha1.ConditionSucceeded, Reason: reason, Message: msg}}
	}
	tests := []struct {
		name          string
		before, after aeriev1alpha1.AgentSessionStatus
		want          []string
	}{
		{"nothing changed", aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}, aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}, nil},
		{"created", aeriev1alpha1.AgentSessionStatus{}, aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhasePending, Attempts: 1, PodName: "s-1"}, []string{"Normal Created created runner pod s-1"}},
		{"running", aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhasePending, Attempts: 1, PodName: "s-1"}, aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1, PodName: "s-1"}, []string{"Normal Running the agent is running in pod s-1"}},
		{"retry", aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}, aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhasePending, Attempts: 2, Conditions: cond(aeriev1alpha1.ReasonRetrying, "attempt 2 of 3")}, []string{"Warning Retrying attempt 2 of 3"}},
		{"succeeded", aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}, aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseSucceeded, Attempts: 1, Conditions: cond(aeriev1alpha1.ReasonCompleted, "done")}, []string{"Normal Completed done"}},
		{"failed", aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}, aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseFailed, Attempts: 1, Conditions: cond(aeriev1alpha1.ReasonBudgetExceeded, "spent")}, []string{"Warning BudgetExceeded spent"}},
		{"still finished", aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseFailed}, aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseFailed, ObservedGeneration: 2}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, e := range transitions(&tt.before, &tt.after) {
				got = append(got, e.kind+" "+e.reason+" "+e.note)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("transitions() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAwaitingApproval: a runner that exits 5 with the paused call in its
// report puts the session in phase AwaitingApproval, condition
// AwaitingApproval=True naming the tool, the preview and the hook's reason,
// and status.pendingApproval, whose time stays that of the first sighting.
func TestAwaitingApproval(t *testing.T) {
	t.Parallel()
	msg := report(t, runconfig.Report{
		Outcome: runconfig.OutcomeAwaitingApproval, ExitCode: runconfig.ExitAwaitingApproval,
		Approval: &runconfig.PendingApproval{CallID: "call-7", Tool: "bash", Preview: `{"command":"git push"}`, Reason: "pushes leave the pod"},
	})
	pod := podWith(corev1.PodFailed, exited(runconfig.ExitAwaitingApproval, msg))
	p := observePod(pod, false)
	if p.State != podAwaiting {
		t.Fatalf("state %v, want podAwaiting", p.State)
	}
	first := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := minimalSession()
	s.Status = aeriev1alpha1.AgentSessionStatus{Phase: aeriev1alpha1.PhaseRunning, Attempts: 1}
	st := computeStatus(s, first, observation{pod: p})
	c := meta.FindStatusCondition(st.Conditions, aeriev1alpha1.ConditionAwaitingApproval)
	if st.Phase != aeriev1alpha1.PhaseAwaitingApproval || c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("phase %s, AwaitingApproval %+v", st.Phase, c)
	}
	for _, want := range []string{"call-7", "bash", "git push", "pushes leave the pod"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not name %q", c.Message, want)
		}
	}
	if st.Result != nil || st.CompletionTime != nil {
		t.Errorf("a paused session is not finished: result %+v", st.Result)
	}
	s.Status = st
	later := metav1.NewTime(first.Add(time.Hour))
	st = computeStatus(s, later, observation{pod: p})
	if pa := st.PendingApproval; pa == nil || pa.CallID != "call-7" || !pa.Since.Equal(&first) {
		t.Errorf("pendingApproval %+v, want call-7 since %v", pa, first)
	}
}

// TestApprovalMessage: the condition names the paused call, and the
// subagent whose call it is when it is not the session's own.
func TestApprovalMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a    runconfig.PendingApproval
		want string
	}{
		{runconfig.PendingApproval{CallID: "c1", Tool: "bash"}, "call c1 of tool bash awaits approval"},
		{
			runconfig.PendingApproval{CallID: "c1", Tool: "bash", Preview: "ls", Reason: "ask", AgentID: "0b7e"},
			"call c1 of tool bash in subagent 0b7e awaits approval: ls (hook: ask)",
		},
	} {
		if got := approvalMessage(&tc.a); got != tc.want {
			t.Errorf("approvalMessage(%+v) = %q, want %q", tc.a, got, tc.want)
		}
	}
}
