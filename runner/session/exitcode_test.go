package session

import (
	"errors"
	"syscall"
	"testing"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/runconfig"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestExitCode: each outcome has its exit status, and a completed run
// whose journal failed (the fault suite's full disk) is a storage failure,
// not a success.
func TestExitCode(t *testing.T) {
	t.Parallel()
	full := errors.New("write entries 8-10: append entries: commit: database or disk is full (13)")
	for _, tc := range []struct {
		name string
		res  agent.Result
		want int
	}{
		{"completed", agent.Result{Outcome: transcript.OutcomeCompleted}, runconfig.ExitCompleted},
		{"completed, journal failed", agent.Result{Outcome: transcript.OutcomeCompleted, JournalErr: full}, runconfig.ExitFailure},
		{"model error, journal failed", agent.Result{Outcome: transcript.OutcomeModelError, JournalErr: full}, runconfig.ExitModel},
		{"budget", agent.Result{Outcome: transcript.OutcomeBudgetExceeded}, runconfig.ExitBudget},
		{"approval", agent.Result{Outcome: transcript.OutcomeAwaitingApproval}, runconfig.ExitAwaitingApproval},
		{"SIGINT", agent.Result{Outcome: transcript.OutcomeCancelled, Err: &SignalError{Signal: syscall.SIGINT}}, runconfig.ExitInterrupted},
		{"SIGTERM", agent.Result{Outcome: transcript.OutcomeCancelled, Err: &SignalError{Signal: syscall.SIGTERM}}, runconfig.ExitTerminated},
		{"failed", agent.Result{Outcome: transcript.OutcomeFailed}, runconfig.ExitFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := ExitCode(tc.res); got != tc.want {
				t.Errorf("ExitCode = %d, want %d", got, tc.want)
			}
		})
	}
}
