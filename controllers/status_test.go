package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

func TestFinish(t *testing.T) {
	t.Parallel()
	s := minimalSession()
	s.Generation = 3
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rep := &runconfig.Report{Outcome: runconfig.OutcomeCompleted, Summary: "Fixed.", Usage: runconfig.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, Requests: 2, ToolCalls: 3}}
	setCondition(s, aeriev1alpha1.ConditionPodReady, metav1.ConditionTrue, aeriev1alpha1.ReasonRunning, "")
	finish(s, now, aeriev1alpha1.OutcomeCompleted, aeriev1alpha1.ReasonCompleted, "done", ptr.To(int32(0)), rep)

	if s.Status.Phase != aeriev1alpha1.PhaseSucceeded || !s.Status.CompletionTime.Equal(&now) {
		t.Errorf("phase %s, completion %v", s.Status.Phase, s.Status.CompletionTime)
	}
	if diff := cmp.Diff(&aeriev1alpha1.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5, TotalTokens: 125, Turns: 2, ToolCalls: 3}, s.Status.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&aeriev1alpha1.Result{Outcome: aeriev1alpha1.OutcomeCompleted, Summary: "Fixed.", ExitCode: ptr.To(int32(0)), Message: "done"}, s.Status.Result); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	for typ, want := range map[string]metav1.ConditionStatus{aeriev1alpha1.ConditionSucceeded: metav1.ConditionTrue, aeriev1alpha1.ConditionPodReady: metav1.ConditionFalse} {
		c := meta.FindStatusCondition(s.Status.Conditions, typ)
		if c == nil || c.Status != want || c.ObservedGeneration != 3 {
			t.Errorf("condition %s = %+v, want status %s for generation 3", typ, c, want)
		}
	}

	for outcome, phase := range map[aeriev1alpha1.Outcome]aeriev1alpha1.AgentSessionPhase{
		aeriev1alpha1.OutcomeCancelled: aeriev1alpha1.PhaseCancelled, aeriev1alpha1.OutcomeBudgetExceeded: aeriev1alpha1.PhaseFailed,
		aeriev1alpha1.OutcomeError: aeriev1alpha1.PhaseFailed, aeriev1alpha1.OutcomeTimedOut: aeriev1alpha1.PhaseFailed,
	} {
		s := minimalSession()
		finish(s, now, outcome, "R", strings.Repeat("m", 5000), nil, nil)
		c := meta.FindStatusCondition(s.Status.Conditions, aeriev1alpha1.ConditionSucceeded)
		if s.Status.Phase != phase || c.Status != metav1.ConditionFalse || len(c.Message) > maxMessageBytes+3 || s.Status.Usage != nil {
			t.Errorf("finish(%s): phase %s, Succeeded %s, message %d bytes", outcome, s.Status.Phase, c.Status, len(c.Message))
		}
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
