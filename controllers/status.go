package controllers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// podState is where an attempt stands, as its pod shows it.
type podState int

const (
	// podPending: the pod exists but the agent is not running yet.
	podPending podState = iota
	// podRunning: the agent container is running.
	podRunning
	// podFinished: the attempt ended and the session with it; Outcome
	// says how.
	podFinished
	// podLost: the pod was lost for reasons that are not the agent's
	// (eviction, node loss, OOM kill, deletion by someone else): the
	// session may be retried.
	podLost
)

// podResult is what a runner pod says about its attempt.
type podResult struct {
	State podState
	// Outcome, Reason (a condition reason) and ExitCode are set when
	// the attempt finished.
	Outcome  aeriev1alpha1.Outcome
	Reason   string
	ExitCode *int32
	// Message explains the state for people.
	Message string
	// Report is the runner's termination message, when it left one.
	Report *runconfig.Report
}

// Pod status reasons and disruption conditions that mean the pod was taken
// away from the agent rather than ended by it.
var lostReasons = map[string]bool{
	"Evicted":                  true,
	"NodeLost":                 true,
	"NodeShutdown":             true,
	"Shutdown":                 true,
	"Terminated":               true,
	"UnexpectedAdmissionError": true,
	"Preempting":               true,
	"OutOfcpu":                 true,
	"OutOfmemory":              true,
}

// maxMessageBytes bounds a message quoted from a pod.
const maxMessageBytes = 1024

// observePod maps a runner pod to its attempt's result, without a client:
// pod is nil when the pod does not exist (any more). cancelling says that
// the session was cancelled or is being deleted, so that a runner stopped
// by a signal was stopped on purpose.
func observePod(pod *corev1.Pod, cancelling bool) podResult {
	if pod == nil {
		if cancelling {
			return podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeCancelled, Reason: aeriev1alpha1.ReasonCancelled, Message: "the session was cancelled"}
		}
		return podResult{State: podLost, Message: "the runner pod was deleted"}
	}
	agent := containerStatus(pod.Status.ContainerStatuses, ContainerAgent)
	var term *corev1.ContainerStateTerminated
	if agent != nil {
		term = agent.State.Terminated
	}

	if term != nil {
		return terminated(pod, term, cancelling)
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		// The pod ended without the agent's container ending first: it
		// was stopped from outside (or never started).
		msg := podMessage(pod, "the runner pod failed before the agent ended")
		switch {
		case cancelling:
			return podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeCancelled, Reason: aeriev1alpha1.ReasonCancelled, Message: "the session was cancelled"}
		case pod.Status.Reason == "DeadlineExceeded":
			return podResult{State: podFinished, Outcome: aeriev1alpha1.OutcomeTimedOut, Reason: aeriev1alpha1.ReasonDeadlineExceeded, Message: msg}
		}
		return podResult{State: podLost, Message: msg}
	}
	if agent != nil && agent.State.Running != nil {
		return podResult{State: podRunning, Message: "the agent is running"}
	}
	msg := "waiting for the runner pod to start"
	if agent != nil && agent.State.Waiting != nil && agent.State.Waiting.Reason != "" {
		msg = fmt.Sprintf("waiting for the agent container: %s", agent.State.Waiting.Reason)
		if m := agent.State.Waiting.Message; m != "" {
			msg += ": " + truncateMessage(m)
		}
	} else if c := podCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Message != "" {
		msg = "waiting to be scheduled: " + truncateMessage(c.Message)
	}
	return podResult{State: podPending, Message: msg}
}

// terminated maps the agent container's end to the attempt's result.
func terminated(pod *corev1.Pod, t *corev1.ContainerStateTerminated, cancelling bool) podResult {
	code := t.ExitCode
	r := podResult{State: podFinished, ExitCode: ptr.To(code)}
	if rep, err := runconfig.DecodeReport([]byte(t.Message)); err == nil {
		r.Report = &rep
		r.Message = rep.Reason
	}
	if code == runconfig.ExitCompleted {
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeCompleted, aeriev1alpha1.ReasonCompleted
		if r.Message == "" {
			r.Message = "the agent finished its task"
		}
		return r
	}
	// Taken away: the pod's own disruption, the agent's or the workspace
	// container's OOM kill. Retried whatever the agent made of it.
	if lost := lostBecause(pod, t); lost != "" {
		return podResult{State: podLost, ExitCode: ptr.To(code), Report: r.Report, Message: lost}
	}
	if pod.Status.Reason == "DeadlineExceeded" {
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeTimedOut, aeriev1alpha1.ReasonDeadlineExceeded
		r.Message = podMessage(pod, "the runner pod's active deadline passed")
		return r
	}
	switch code {
	case runconfig.ExitInterrupted, runconfig.ExitTerminated, runconfig.ExitKilled:
		if !cancelling {
			// Stopped by a signal nobody at aerie asked for: a pod
			// deleted from outside, a node drained.
			return podResult{State: podLost, ExitCode: ptr.To(code), Report: r.Report, Message: fmt.Sprintf("the runner was stopped from outside (exit code %d)", code)}
		}
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeCancelled, aeriev1alpha1.ReasonCancelled
		if r.Message == "" || r.Message == "stopped by SIGTERM" {
			r.Message = "the session was cancelled"
		}
	case runconfig.ExitBudget:
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeBudgetExceeded, aeriev1alpha1.ReasonBudgetExceeded
		if r.Report != nil && r.Report.Outcome == runconfig.OutcomeDeadlineExceeded {
			r.Outcome, r.Reason = aeriev1alpha1.OutcomeTimedOut, aeriev1alpha1.ReasonDeadlineExceeded
		}
	case runconfig.ExitModel:
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeFailed, aeriev1alpha1.ReasonAgentFailed
	default: // ExitFailure, ExitConfig and codes the runner never uses
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeError, aeriev1alpha1.ReasonRunnerError
	}
	if r.Message == "" {
		r.Message = fmt.Sprintf("the runner exited with code %d", code)
		if r.Report == nil && strings.TrimSpace(t.Message) != "" {
			// The tail of the log, which the kubelet keeps when the
			// runner wrote no report.
			r.Message += ": " + truncateMessage(t.Message)
		}
	}
	return r
}

// lostBecause says why the pod was taken away from the agent, or "".
func lostBecause(pod *corev1.Pod, agent *corev1.ContainerStateTerminated) string {
	if agent.Reason == "OOMKilled" {
		return "the agent container was OOM-killed"
	}
	if ws := containerStatus(pod.Status.InitContainerStatuses, ContainerWorkspace); ws != nil {
		for _, st := range []corev1.ContainerState{ws.State, ws.LastTerminationState} {
			if st.Terminated != nil && st.Terminated.Reason == "OOMKilled" {
				return "the workspace container was OOM-killed"
			}
		}
	}
	if lostReasons[pod.Status.Reason] {
		return podMessage(pod, "the runner pod was "+strings.ToLower(pod.Status.Reason))
	}
	if c := podCondition(pod, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
		return fmt.Sprintf("the runner pod was disrupted: %s: %s", c.Reason, truncateMessage(c.Message))
	}
	return ""
}

func containerStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// podMessage is the pod's reason and message, or fallback.
func podMessage(pod *corev1.Pod, fallback string) string {
	switch {
	case pod.Status.Message != "" && pod.Status.Reason != "":
		return pod.Status.Reason + ": " + truncateMessage(pod.Status.Message)
	case pod.Status.Message != "":
		return truncateMessage(pod.Status.Message)
	case pod.Status.Reason != "":
		return fallback + " (" + pod.Status.Reason + ")"
	}
	return fallback
}

func truncateMessage(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessageBytes {
		return s
	}
	cut := maxMessageBytes
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// usage is the status usage a report carries.
func usage(r *runconfig.Report) *aeriev1alpha1.Usage {
	if r == nil {
		return nil
	}
	u := r.Usage
	return &aeriev1alpha1.Usage{
		InputTokens:     u.InputTokens,
		OutputTokens:    u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens,
		TotalTokens:     u.InputTokens + u.OutputTokens + u.CacheReadTokens,
		Turns:           int32(min(u.Requests, int64(^uint32(0)>>1))),
		ToolCalls:       int32(min(u.ToolCalls, int64(^uint32(0)>>1))),
	}
}

// phaseOf is the phase of a session that finished with outcome.
func phaseOf(o aeriev1alpha1.Outcome) aeriev1alpha1.AgentSessionPhase {
	switch o {
	case aeriev1alpha1.OutcomeCompleted:
		return aeriev1alpha1.PhaseSucceeded
	case aeriev1alpha1.OutcomeCancelled:
		return aeriev1alpha1.PhaseCancelled
	}
	return aeriev1alpha1.PhaseFailed
}

// setCondition sets a condition for the session's current generation.
func setCondition(s *aeriev1alpha1.AgentSession, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncateMessage(message), ObservedGeneration: s.Generation,
	})
}

// finish records how the session ended: phase, result, completion time and
// conditions. usage, when known, replaces the status's.
func finish(s *aeriev1alpha1.AgentSession, now metav1.Time, outcome aeriev1alpha1.Outcome, reason, message string, exitCode *int32, rep *runconfig.Report) {
	st := &s.Status
	st.Phase = phaseOf(outcome)
	st.CompletionTime = &now
	st.Result = &aeriev1alpha1.Result{Outcome: outcome, ExitCode: exitCode, Message: truncateMessage(message)}
	if rep != nil {
		st.Result.Summary = rep.Summary
		if u := usage(rep); u != nil {
			st.Usage = u
		}
	}
	succeeded := metav1.ConditionFalse
	if outcome == aeriev1alpha1.OutcomeCompleted {
		succeeded = metav1.ConditionTrue
	}
	setCondition(s, aeriev1alpha1.ConditionSucceeded, succeeded, reason, message)
	podReady := meta.FindStatusCondition(st.Conditions, aeriev1alpha1.ConditionPodReady)
	if podReady == nil || podReady.Status != metav1.ConditionFalse {
		setCondition(s, aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, reason, "the session finished")
	}
}
