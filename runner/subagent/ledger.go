package subagent

import (
	"context"
	"iter"
	"sync"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Ledger counts what a session tree has used — tokens, requests (turns),
// and what transcript.Usage adds later, such as cost — and holds the root's
// budget against it. Every loop of the tree charges it (see Model) and
// stops on it (see Stop). Its methods are safe for concurrent use.
type Ledger struct {
	budget []agent.StopCondition

	mu        sync.Mutex
	usage     transcript.Usage
	turns     int
	subagents int
}

// NewLedger returns the ledger of a root whose stored cumulative usage is
// start (zero for a new session), with the root's budget: conditions on
// the tree's totals, checked by Stop.
func NewLedger(start transcript.Usage, budget []agent.StopCondition) *Ledger {
	return &Ledger{usage: start, budget: budget}
}

// Charge adds the usage of one response.
func (l *Ledger) Charge(u provider.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.usage.InputTokens += u.InputTokens
	l.usage.OutputTokens += u.OutputTokens
	l.usage.CacheReadTokens += u.CacheReadTokens
	l.usage.CacheWriteTokens += u.CacheWriteTokens
	l.usage.Requests++
	l.turns++
}

// ChargeTool adds the tokens a tool's own model calls used (a mixture of
// agents): they count toward the token budget, not as requests or turns.
func (l *Ledger) ChargeTool(u transcript.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.usage.InputTokens += u.InputTokens
	l.usage.OutputTokens += u.OutputTokens
	l.usage.CacheReadTokens += u.CacheReadTokens
	l.usage.CacheWriteTokens += u.CacheWriteTokens
}

// Totals are a ledger's counts.
type Totals struct {
	// Usage is the tree's cumulative usage: the root's stored usage and
	// every response charged since.
	Usage transcript.Usage
	// Turns counts the model requests of the tree in this run.
	Turns int
	// Subagents counts the children spawned in this run.
	Subagents int
}

// Totals returns the counts so far.
func (l *Ledger) Totals() Totals {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Totals{Usage: l.usage, Turns: l.turns, Subagents: l.subagents}
}

func (l *Ledger) countSubagent() {
	l.mu.Lock()
	l.subagents++
	l.mu.Unlock()
}

// Stop is the stop condition every loop of the tree checks before each
// request: the root's budget, applied to the tree's totals whatever the
// loop's own status.
func (l *Ledger) Stop() agent.StopCondition {
	return func(agent.Status) (transcript.Outcome, string, bool) {
		t := l.Totals()
		s := agent.Status{Turns: t.Turns, Usage: t.Usage}
		for _, stop := range l.budget {
			if out, reason, ok := stop(s); ok {
				if t.Subagents > 0 {
					reason += " (counted across the session and its subagents)"
				}
				return out, reason, true
			}
		}
		return "", "", false
	}
}

// Model wraps m so that the usage of each of its responses is charged to
// the ledger as the response ends, before the loop asks for the next.
func (l *Ledger) Model(m agent.Model) agent.Model { return charging{m: m, l: l} }

type charging struct {
	m agent.Model
	l *Ledger
}

func (c charging) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	return func(yield func(provider.Part, error) bool) {
		for part, err := range c.m.Stream(ctx, req) {
			if err == nil && part.Type == provider.PartFinish {
				c.l.Charge(part.Usage)
			}
			if !yield(part, err) {
				return
			}
		}
	}
}
