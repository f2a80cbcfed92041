package agent

import (
	"fmt"
	"strconv"

	"github.com/aerie-run/aerie/runner/transcript"
)

// Status is what a StopCondition looks at.
type Status struct {
	// Turns counts the model requests made so far in this run.
	Turns int
	// Usage is the session's cumulative usage.
	Usage transcript.Usage
}

// StopCondition ends a run before the next model request when it returns
// true, with the outcome and a reason.
type StopCondition func(s Status) (transcript.Outcome, string, bool)

// MaxTurns stops a run after n model requests.
func MaxTurns(n int) StopCondition {
	return func(s Status) (transcript.Outcome, string, bool) {
		if s.Turns >= n {
			return transcript.OutcomeBudgetExceeded, fmt.Sprintf("the turn budget of %d is spent", n), true
		}
		return "", "", false
	}
}

// MaxSessionTurns stops a run once the session has made n model requests,
// counting those of the runs before this one (its cumulative usage): the
// budget of a session that several runs continue, such as the attempts of
// an AgentSession whose runner pod was lost.
func MaxSessionTurns(n int) StopCondition {
	return func(s Status) (transcript.Outcome, string, bool) {
		if s.Usage.Requests >= int64(n) {
			return transcript.OutcomeBudgetExceeded, fmt.Sprintf("the session's turn budget of %d is spent", n), true
		}
		return "", "", false
	}
}

// MaxTokens stops a run once the session's input and output tokens together
// reach n.
func MaxTokens(n int64) StopCondition {
	return func(s Status) (transcript.Outcome, string, bool) {
		if used := s.Usage.InputTokens + s.Usage.OutputTokens; used >= n {
			return transcript.OutcomeBudgetExceeded, fmt.Sprintf("the token budget of %d is spent (%d used)", n, used), true
		}
		return "", "", false
	}
}

// MaxCostUSD stops a run once the session's cost in US dollars reaches
// usd.
func MaxCostUSD(usd float64) StopCondition {
	return func(s Status) (transcript.Outcome, string, bool) {
		if s.Usage.CostUSD >= usd {
			budget := strconv.FormatFloat(usd, 'f', -1, 64)
			return transcript.OutcomeBudgetExceeded,
				fmt.Sprintf("the cost budget of $%s is spent ($%.4f used)", budget, s.Usage.CostUSD), true
		}
		return "", "", false
	}
}
