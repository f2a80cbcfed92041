package controllers

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	// podAwaiting: the attempt paused on a tool call a hook asks a
	// person about (exit 5, awaiting_approval); Report.Approval names it.
	podAwaiting
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

// messageCancelled is the message of a session that ended cancelled without
// its runner saying otherwise.
const messageCancelled = "the session was cancelled"

// cancelledResult is the result of an attempt whose session was cancelled
// while its pod ended without the agent's account of it.
func cancelledResult() podResult {
	return podResult{
		State:   podFinished,
		Outcome: aeriev1alpha1.OutcomeCancelled,
		Reason:  aeriev1alpha1.ReasonCancelled,
		Message: messageCancelled,
	}
}

// observePod maps a runner pod to its attempt's result, without a client:
// pod is nil when the pod does not exist (any more). cancelling says that
// the session was cancelled or is being deleted, so that a runner stopped
// by a signal was stopped on purpose.
func observePod(pod *corev1.Pod, cancelling bool) podResult {
	if pod == nil {
		if cancelling {
			return cancelledResult()
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
			return cancelledResult()
		case pod.Status.Reason == "DeadlineExceeded":
			return podResult{
				State:   podFinished,
				Outcome: aeriev1alpha1.OutcomeTimedOut,
				Reason:  aeriev1alpha1.ReasonDeadlineExceeded,
				Message: msg,
			}
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
	} else if c := podCondition(pod, corev1.PodScheduled); c != nil &&
		c.Status == corev1.ConditionFalse && c.Message != "" {
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
	if code == runconfig.ExitAwaitingApproval && r.Report != nil && r.Report.Approval != nil {
		return podResult{State: podAwaiting, ExitCode: ptr.To(code), Report: r.Report,
			Message: approvalMessage(r.Report.Approval)}
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
			return podResult{
				State:    podLost,
				ExitCode: ptr.To(code),
				Report:   r.Report,
				Message:  fmt.Sprintf("the runner was stopped from outside (exit code %d)", code),
			}
		}
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeCancelled, aeriev1alpha1.ReasonCancelled
		if r.Message == "" || r.Message == "stopped by SIGTERM" {
			r.Message = messageCancelled
		}
	case runconfig.ExitBudget:
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeBudgetExceeded, aeriev1alpha1.ReasonBudgetExceeded
		if r.Report != nil && r.Report.Outcome == runconfig.OutcomeDeadlineExceeded {
			r.Outcome, r.Reason = aeriev1alpha1.OutcomeTimedOut, aeriev1alpha1.ReasonDeadlineExceeded
		}
	case runconfig.ExitModel:
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeFailed, aeriev1alpha1.ReasonAgentFailed
	case runconfig.ExitResultInvalid:
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeResultInvalid, aeriev1alpha1.ReasonResultInvalid
	default: // ExitFailure, ExitConfig and codes the runner never uses
		r.Outcome, r.Reason = aeriev1alpha1.OutcomeError, aeriev1alpha1.ReasonRunnerError
		if r.Report != nil && r.Report.Outcome == runconfig.OutcomePushFailed {
			r.Outcome, r.Reason = aeriev1alpha1.OutcomePushFailed, aeriev1alpha1.ReasonPushFailed
		}
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
	if oomKilled(agent) {
		return "the agent container was OOM-killed"
	}
	if ws := containerStatus(pod.Status.InitContainerStatuses, ContainerWorkspace); ws != nil {
		for _, st := range []corev1.ContainerState{ws.State, ws.LastTerminationState} {
			if oomKilled(st.Terminated) {
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

// oomKilled says whether the kernel's OOM killer ended the container: its
// reason says OOMKilled and its main process died of the SIGKILL. The
// reason alone means less: containerd gives it to a container in which
// any process was OOM-killed (a tool, say), even one that later ended
// cleanly.
func oomKilled(t *corev1.ContainerStateTerminated) bool {
	return t != nil && t.Reason == "OOMKilled" && t.ExitCode == 128+int32(syscall.SIGKILL)
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
		Compactions:     int32(min(u.Compactions, int64(^uint32(0)>>1))),
		Subagents:       int32(min(u.Subagents, int64(^uint32(0)>>1))),
		ByAgentType:     byAgentType(r.AgentTypes),
		CostUSD:         costString(u.CostUSD),
	}
}

// byAgentType is the status's usage by agent type: the report's, which
// the runner caps at runconfig.MaxAgentTypes entries (more are dropped
// here, as the schema allows no more).
func byAgentType(types []runconfig.AgentTypeUsage) []aeriev1alpha1.AgentTypeUsage {
	var out []aeriev1alpha1.AgentTypeUsage
	seen := map[string]bool{}
	for _, t := range types {
		name := runconfig.Shorten(t.Name, 63)
		if len(out) == runconfig.MaxAgentTypes || name == "" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, aeriev1alpha1.AgentTypeUsage{
			Name: name, Subagents: clamp32(t.Subagents), Turns: clamp32(t.Requests),
			InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, CacheReadTokens: t.CacheReadTokens,
		})
	}
	return out
}

func clamp32(n int64) int32 { return int32(max(0, min(n, int64(^uint32(0)>>1)))) }

// costString writes a cost in US dollars as a decimal, to the millionth
// of a dollar; empty when there is none.
func costString(usd float64) string {
	if !(usd > 0) || math.IsInf(usd, 0) {
		return ""
	}
	return strconv.FormatFloat(math.Round(usd*1e6)/1e6, 'f', -1, 64)
}

// maxStructuredBytes bounds the structured result kept in the status; a
// report, under 4 KiB, never carries more.
const maxStructuredBytes = 16 << 10

// structured is where the status shows the report's structured result:
// the value when the report carried it, else the reference to the store's
// entry.
func structured(r *runconfig.Report) (*runtime.RawExtension, *aeriev1alpha1.StructuredResultRef) {
	res := r.Result
	if res == nil {
		return nil, nil
	}
	if len(res.Value) > 0 && len(res.Value) <= maxStructuredBytes && json.Valid(res.Value) {
		return &runtime.RawExtension{Raw: slices.Clone(res.Value)}, nil
	}
	if res.Seq <= 0 || r.SessionID == "" {
		return nil, nil
	}
	return nil, &aeriev1alpha1.StructuredResultRef{SessionID: r.SessionID, Seq: res.Seq}
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

// observation is what a reconcile found of the current attempt and did
// about it. With the session (its spec, and the attempts, pod name, session
// id and start time the reconcile recorded) it is all that computeStatus
// reads.
type observation struct {
	// pod is what the current attempt's pod shows; podMissing says that no
	// pod of the current attempt was found.
	pod        podResult
	podMissing bool
	// started says that the reconcile created the current attempt's
	// children; lost is why the previous attempt's pod was lost, when the
	// attempt is a retry.
	started bool
	lost    string
	// resumed is the reason (ApprovalDecided, ApprovalTimedOut) the
	// attempt started resumes a session paused on a call, or "".
	resumed string
	// rejected is why the session cannot run: a reference that does not
	// resolve, a spec the runner would refuse.
	rejected error
	// preparing says what the attempt being started waits for before its
	// runner pod can be created (its executor pods' addresses), or "".
	preparing string
	// executors are the live attempt's executors; nil leaves the status's
	// as they are.
	executors []aeriev1alpha1.ExecutorStatus
}

// computeStatus is the session's status after a reconcile at now: phase,
// conditions, result and usage, from the session and what the reconcile
// observed, without a client or a clock. Its cases follow Reconcile's
// guards: a finished session stays as it ended; then the attempt's own
// end, a cancel, the deadline, and the run.
func computeStatus(s *aeriev1alpha1.AgentSession, now metav1.Time, o observation) aeriev1alpha1.AgentSessionStatus {
	u := &statusUpdate{st: *s.Status.DeepCopy(), generation: s.Generation, now: now}
	st, p := &u.st, o.pod
	st.ObservedGeneration = s.Generation
	switch {
	case st.Phase.Finished():
		// Nothing that happens after the end changes how it ended.
	case o.rejected != nil:
		u.set(aeriev1alpha1.ConditionAccepted, metav1.ConditionFalse, aeriev1alpha1.ReasonInvalidReference,
			o.rejected.Error())
		u.finish(podResult{Outcome: aeriev1alpha1.OutcomeError, Reason: aeriev1alpha1.ReasonInvalidReference,
			Message: o.rejected.Error()})
	case o.preparing != "":
		u.preparing(o.preparing)
	case o.started && o.resumed != "":
		u.resumed(o.resumed, p)
	case o.started:
		u.started(maxAttempts(s), p, o.lost)
	case p.State == podFinished:
		// The runner's account of its end wins over a cancel or a
		// deadline that came after it.
		u.finish(p)
	case s.Spec.Cancel && p.State == podLost:
		u.finish(podResult{Outcome: aeriev1alpha1.OutcomeCancelled, Reason: aeriev1alpha1.ReasonCancelled,
			Message: messageCancelled, ExitCode: p.ExitCode, Report: p.Report})
	case s.Spec.Cancel:
		u.set(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonCancelled,
			"cancelling: waiting for the runner pod "+st.PodName+" to tear down")
	case pastDeadline(s, now.Time):
		u.finish(podResult{Outcome: aeriev1alpha1.OutcomeTimedOut, Reason: aeriev1alpha1.ReasonDeadlineExceeded,
			Message: deadlineMessage(s, o)})
	case p.State == podAwaiting:
		u.awaiting(p)
	case p.State == podPending:
		st.Phase = aeriev1alpha1.PhasePending
		u.set(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, p.Message)
		c := meta.FindStatusCondition(st.Conditions, aeriev1alpha1.ConditionSucceeded)
		if c == nil || c.Reason != aeriev1alpha1.ReasonRetrying {
			u.set(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonPending, p.Message)
		}
	case p.State == podRunning:
		st.Phase = aeriev1alpha1.PhaseRunning
		u.set(aeriev1alpha1.ConditionPodReady, metav1.ConditionTrue, aeriev1alpha1.ReasonRunning, p.Message)
		u.set(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonRunning,
			"the agent is working on its task")
	default:
		// Lost, and no attempt was started to replace it: the retries
		// are spent.
		u.finish(podResult{Outcome: aeriev1alpha1.OutcomeError, Reason: aeriev1alpha1.ReasonRetriesExhausted,
			Message:  fmt.Sprintf("the runner pod was lost in each of %d attempts; the last time: %s", st.Attempts, p.Message),
			ExitCode: p.ExitCode, Report: p.Report})
	}
	if o.executors != nil && !s.Status.Phase.Finished() {
		u.st.Executors = o.executors
	}
	return u.st
}

// preparing is an attempt that waits for its executor pods before its
// runner pod is created.
func (u *statusUpdate) preparing(waiting string) {
	u.st.Phase = aeriev1alpha1.PhasePending
	u.set(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, waiting)
	c := meta.FindStatusCondition(u.st.Conditions, aeriev1alpha1.ConditionSucceeded)
	if c == nil || c.Reason != aeriev1alpha1.ReasonRetrying {
		u.set(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonPending, waiting)
	}
}

// deadline is when the session has run out of time whatever its pod says:
// its maxDuration from the first pod, plus the time the runner and then the
// kubelet get to report that themselves.
func deadline(s *aeriev1alpha1.AgentSession) time.Time {
	if s.Status.StartTime == nil || s.Spec.Budget == nil || s.Spec.Budget.MaxDuration == nil {
		return time.Time{}.AddDate(10000, 0, 0)
	}
	return s.Status.StartTime.Add(s.Spec.Budget.MaxDuration.Duration + 2*deadlineSlack)
}

// pastDeadline says whether the session's deadline has passed at now.
func pastDeadline(s *aeriev1alpha1.AgentSession, now time.Time) bool {
	return deadline(s).Before(now)
}

// deadlineMessage says that the session's time ran out, and what kept the
// runner from starting, when it never did.
func deadlineMessage(s *aeriev1alpha1.AgentSession, o observation) string {
	msg := fmt.Sprintf("the session's maxDuration of %s passed", s.Spec.Budget.MaxDuration.Duration)
	switch c := meta.FindStatusCondition(s.Status.Conditions, aeriev1alpha1.ConditionPodReady); {
	case o.pod.State == podPending:
		msg += " before the runner started: " + o.pod.Message
	case o.podMissing && c != nil && c.Reason == aeriev1alpha1.ReasonPending && c.Message != "":
		// The cache lost sight of the pod; what was last seen of it stands.
		msg += " before the runner started: " + c.Message
	}
	return msg
}

// statusUpdate is a status being computed for a generation of a session,
// at a time.
type statusUpdate struct {
	st         aeriev1alpha1.AgentSessionStatus
	generation int64
	now        metav1.Time
}

// set sets a condition; its transition time is now when its status changes.
func (u *statusUpdate) set(typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&u.st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncateMessage(message),
		ObservedGeneration: u.generation, LastTransitionTime: u.now,
	})
}

// started records that attempt st.Attempts was created: the first, whose
// pod p shows what the pod's own first event will (so that the next
// reconcile has nothing to write), or a retry after a pod was lost.
func (u *statusUpdate) started(maxAttempts int32, p podResult, lost string) {
	st := &u.st
	st.Phase = aeriev1alpha1.PhasePending
	u.set(aeriev1alpha1.ConditionAccepted, metav1.ConditionTrue, aeriev1alpha1.ReasonAccepted,
		"references resolved and the runner configuration rendered")
	if st.Attempts <= 1 {
		u.set(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, p.Message)
		u.set(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonPending, p.Message)
		return
	}
	u.set(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPodLost, lost)
	u.set(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonRetrying,
		fmt.Sprintf("attempt %d of %d resumes session %s in pod %s: %s",
			st.Attempts, maxAttempts, st.SessionID, st.PodName, lost))
}

// resumed records that the attempt started resumes the call the session
// was paused on, decided as reason says.
func (u *statusUpdate) resumed(reason string, p podResult) {
	st := &u.st
	msg := "a decision in spec.approvals"
	if reason == aeriev1alpha1.ReasonApprovalTimedOut {
		msg = "approvalTimeout passed; the call is denied (" + messageApprovalTimedOut + ")"
	}
	if pa := st.PendingApproval; pa != nil {
		msg = "call " + pa.CallID + ": " + msg
	}
	st.PendingApproval = nil
	st.Phase = aeriev1alpha1.PhasePending
	u.set(aeriev1alpha1.ConditionAwaitingApproval, metav1.ConditionFalse, reason,
		fmt.Sprintf("attempt %d resumes the session after %s", st.Attempts, msg))
	u.set(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonPending, p.Message)
	u.set(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonPending, p.Message)
}

// awaiting records that the attempt paused on the call p's report names:
// phase, condition and status.pendingApproval, whose time stays that of
// the first reconcile that saw the pause.
func (u *statusUpdate) awaiting(p podResult) {
	st := &u.st
	a := p.Report.Approval
	st.Phase = aeriev1alpha1.PhaseAwaitingApproval
	since := u.now
	if st.PendingApproval != nil && st.PendingApproval.CallID == a.CallID {
		since = st.PendingApproval.Since
	}
	st.PendingApproval = &aeriev1alpha1.PendingApproval{
		CallID: a.CallID, Tool: a.Tool, Preview: a.Preview, Reason: a.Reason, Since: since,
	}
	st.Usage = usage(p.Report)
	u.set(aeriev1alpha1.ConditionAwaitingApproval, metav1.ConditionTrue, aeriev1alpha1.ReasonApprovalRequested, p.Message)
	u.set(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, aeriev1alpha1.ReasonApprovalRequested,
		"the runner pod ended; the session waits for a decision in spec.approvals")
	u.set(aeriev1alpha1.ConditionSucceeded, metav1.ConditionUnknown, aeriev1alpha1.ReasonApprovalRequested, p.Message)
}

// approvalMessage names a paused call for people: its id, tool, the start
// of its arguments and the hooks' reason.
func approvalMessage(a *runconfig.PendingApproval) string {
	msg := fmt.Sprintf("call %s of tool %s", a.CallID, a.Tool)
	if a.AgentID != "" {
		msg += " in subagent " + a.AgentID
	}
	msg += " awaits approval"
	if a.Preview != "" {
		msg += ": " + a.Preview
	}
	if a.Reason != "" {
		msg += " (hook: " + a.Reason + ")"
	}
	return msg
}

// finish records how the session ended, as r says: phase, result,
// completion time and conditions. The report's usage, when there is one,
// replaces the status's.
func (u *statusUpdate) finish(r podResult) {
	st := &u.st
	st.Phase = phaseOf(r.Outcome)
	st.CompletionTime = &u.now
	st.Result = &aeriev1alpha1.Result{Outcome: r.Outcome, ExitCode: r.ExitCode, Message: truncateMessage(r.Message)}
	if r.Report != nil {
		st.Result.Summary = r.Report.Summary
		st.Usage = usage(r.Report)
		st.Result.Structured, st.Result.StructuredRef = structured(r.Report)
		u.pushed(r.Report.Push)
	}
	succeeded := metav1.ConditionFalse
	if r.Outcome == aeriev1alpha1.OutcomeCompleted {
		succeeded = metav1.ConditionTrue
	}
	u.set(aeriev1alpha1.ConditionSucceeded, succeeded, r.Reason, r.Message)
	podReady := meta.FindStatusCondition(st.Conditions, aeriev1alpha1.ConditionPodReady)
	if podReady == nil || podReady.Status != metav1.ConditionFalse {
		u.set(aeriev1alpha1.ConditionPodReady, metav1.ConditionFalse, r.Reason, "the session finished")
	}
}

// pushed records the delivery of spec.workspace.git.push: the commit and
// branch in the result and the Pushed condition.
func (u *statusUpdate) pushed(p *runconfig.PushReport) {
	if p == nil {
		return
	}
	u.st.Result.Branch = p.Branch
	u.st.Result.Commit = p.Commit
	status, reason := metav1.ConditionTrue, aeriev1alpha1.ReasonPushed
	switch {
	case p.Error != "":
		status, reason = metav1.ConditionFalse, aeriev1alpha1.ReasonPushFailed
	case p.NothingToPush:
		reason = aeriev1alpha1.ReasonNothingToPush
	}
	u.set(aeriev1alpha1.ConditionPushed, status, reason, truncateMessage(p.Message()))
}

// event is a Kubernetes event to record.
type event struct {
	kind, reason, action, note string
}

// transitions are the events a status change calls for: a pod created, the
// agent running, a retry, the end. A reconcile that changes nothing of
// these records nothing.
func transitions(before, after *aeriev1alpha1.AgentSessionStatus) []event {
	var out []event
	if after.Attempts > before.Attempts {
		if after.Attempts == 1 {
			out = append(out, event{corev1.EventTypeNormal, "Created", "CreatePod", "created runner pod " + after.PodName})
		} else {
			c := meta.FindStatusCondition(after.Conditions, aeriev1alpha1.ConditionSucceeded)
			note := "created runner pod " + after.PodName
			if c != nil {
				note = c.Message
			}
			out = append(out, event{corev1.EventTypeWarning, aeriev1alpha1.ReasonRetrying, "CreatePod", note})
		}
	}
	if after.Phase == aeriev1alpha1.PhaseRunning && before.Phase != aeriev1alpha1.PhaseRunning {
		out = append(out, event{corev1.EventTypeNormal, aeriev1alpha1.ReasonRunning, "Run",
			"the agent is running in pod " + after.PodName})
	}
	if after.Phase.Finished() && !before.Phase.Finished() {
		c := meta.FindStatusCondition(after.Conditions, aeriev1alpha1.ConditionSucceeded)
		kind := corev1.EventTypeWarning
		if after.Phase == aeriev1alpha1.PhaseSucceeded {
			kind = corev1.EventTypeNormal
		}
		reason, note := string(after.Phase), ""
		if c != nil {
			reason, note = c.Reason, c.Message
		}
		out = append(out, event{kind, reason, "Finish", note})
	}
	return out
}
