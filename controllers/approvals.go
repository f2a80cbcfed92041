package controllers

import (
	"time"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// messageApprovalTimedOut is the reason of the denial approvalTimeout gives.
const messageApprovalTimedOut = "approval timed out"

// defaultApprovalTimeout is spec.approvalTimeout's default, for sessions
// stored before the field existed.
const defaultApprovalTimeout = 24 * time.Hour

// approvalDeadline is when the call paused since since is denied.
func approvalDeadline(s *aeriev1alpha1.AgentSession, since time.Time) time.Time {
	d := defaultApprovalTimeout
	if t := s.Spec.ApprovalTimeout; t != nil && t.Duration > 0 {
		d = t.Duration
	}
	return since.Add(d)
}

// decisionFor is spec.approvals' decision on call, if any.
func decisionFor(s *aeriev1alpha1.AgentSession, call string) (aeriev1alpha1.ApprovalDecision, bool) {
	for _, a := range s.Spec.Approvals {
		if a.CallID == call {
			return a, true
		}
	}
	return aeriev1alpha1.ApprovalDecision{}, false
}

// resumeDecisions are the decisions the attempt resuming a session paused
// on call at since gets, at now: spec.approvals, and a denial when nobody
// decided call before approvalTimeout passed. ok is false while call
// still waits.
func resumeDecisions(
	s *aeriev1alpha1.AgentSession, call string, since, now time.Time,
) (ds []runconfig.Approval, timedOut, ok bool) {
	for _, a := range s.Spec.Approvals {
		ds = append(ds, runconfig.Approval{
			CallID: a.CallID, Allowed: a.Decision == aeriev1alpha1.DecisionAllow,
			Reason: a.Reason, By: "spec.approvals",
		})
	}
	if _, decided := decisionFor(s, call); decided {
		return ds, false, true
	}
	if now.Before(approvalDeadline(s, since)) {
		return nil, false, false
	}
	return append(ds, runconfig.Approval{CallID: call, Reason: messageApprovalTimedOut, By: "approvalTimeout"}), true, true
}
