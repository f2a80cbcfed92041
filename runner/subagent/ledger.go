package subagent

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"sync"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/extensions"
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
	// types holds the children's counts by agent type; the tree's
	// max_total bounds how many there are.
	types map[string]*AgentType
}

// AgentType is what the children of one agent type (persona) used.
type AgentType struct {
	// Name is the persona's name; a child spawned without agent_type has
	// the default persona's.
	Name string
	// Subagents counts the children of the type spawned in this run.
	Subagents int
	// Turns counts their model requests.
	Turns int
	// Usage is their tokens: input, output and cache, and requests.
	Usage transcript.Usage
}

// OtherAgentTypes is the name that agent types past a cap are folded into.
const OtherAgentTypes = "_other"

// TypeName is the name an agent type is counted under: the persona's, or
// the default persona's for none.
func TypeName(agentType string) string {
	if agentType == "" {
		return extensions.DefaultPersona
	}
	return agentType
}

// typeOf returns the counts of agentType, made on first use; l.mu is held.
func (l *Ledger) typeOf(agentType string) *AgentType {
	name := TypeName(agentType)
	if l.types == nil {
		l.types = map[string]*AgentType{}
	}
	t, ok := l.types[name]
	if !ok {
		t = &AgentType{Name: name}
		l.types[name] = t
	}
	return t
}

// NewLedger returns the ledger of a root whose stored cumulative usage is
// start (zero for a new session), with the root's budget: conditions on
// the tree's totals, checked by Stop.
func NewLedger(start transcript.Usage, budget []agent.StopCondition) *Ledger {
	return &Ledger{usage: start, budget: budget}
}

// Charge adds the usage of one response of the root.
func (l *Ledger) Charge(u provider.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	addResponse(&l.usage, u)
	l.turns++
}

// ChargeChild adds the usage of one response of a child of agentType: to
// the tree's totals and to its type's.
func (l *Ledger) ChargeChild(agentType string, u provider.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	addResponse(&l.usage, u)
	l.turns++
	t := l.typeOf(agentType)
	addResponse(&t.Usage, u)
	t.Turns++
}

func addResponse(to *transcript.Usage, u provider.Usage) {
	addTokens(to, u)
	to.Requests++
}

func addTokens(to *transcript.Usage, u provider.Usage) {
	to.InputTokens += u.InputTokens
	to.OutputTokens += u.OutputTokens
	to.CacheReadTokens += u.CacheReadTokens
	to.CacheWriteTokens += u.CacheWriteTokens
	to.CostUSD += u.CostUSD
}

// ChargeTool adds what model calls outside the loops' requests used — a
// tool's own (a mixture of agents), a compaction's summaries (see
// ToolModel): their tokens and cost count toward the budget, they are no
// requests or turns.
func (l *Ledger) ChargeTool(u provider.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	addTokens(&l.usage, u)
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
	// AgentTypes are the children's counts by agent type, by name.
	AgentTypes []AgentType
}

// Totals returns the counts so far.
func (l *Ledger) Totals() Totals {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := Totals{Usage: l.usage, Turns: l.turns, Subagents: l.subagents}
	for _, at := range l.types {
		t.AgentTypes = append(t.AgentTypes, *at)
	}
	slices.SortFunc(t.AgentTypes, func(a, b AgentType) int { return cmp.Compare(a.Name, b.Name) })
	return t
}

func (l *Ledger) countSubagent(agentType string) {
	l.mu.Lock()
	l.subagents++
	l.typeOf(agentType).Subagents++
	l.mu.Unlock()
}

// CapAgentTypes returns types with at most n entries: when there are more,
// the n-1 that used the most tokens (by name on a tie) and the rest folded
// into one named OtherAgentTypes. The result is sorted by name, the
// folded entry last.
func CapAgentTypes(types []AgentType, n int) []AgentType {
	if len(types) <= n {
		return types
	}
	if n <= 0 {
		return nil
	}
	byUse := slices.Clone(types)
	slices.SortFunc(byUse, func(a, b AgentType) int {
		if c := cmp.Compare(tokens(b.Usage), tokens(a.Usage)); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	kept := byUse[:n-1]
	slices.SortFunc(kept, func(a, b AgentType) int { return cmp.Compare(a.Name, b.Name) })
	other := AgentType{Name: OtherAgentTypes}
	for _, t := range byUse[n-1:] {
		other.Subagents += t.Subagents
		other.Turns += t.Turns
		other.Usage.InputTokens += t.Usage.InputTokens
		other.Usage.OutputTokens += t.Usage.OutputTokens
		other.Usage.CacheReadTokens += t.Usage.CacheReadTokens
		other.Usage.CacheWriteTokens += t.Usage.CacheWriteTokens
		other.Usage.Requests += t.Usage.Requests
	}
	return append(kept, other)
}

func tokens(u transcript.Usage) int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Stop is the stop condition every loop of the tree checks before each
// request: the root's budget, applied to the tree's totals whatever the
// loop's own status. Its turns are the tree's requests from the start
// usage on, as its tokens are: a resumed tree's budget counts what the
// stored tree used, as the tokens it spent count toward a token budget.
func (l *Ledger) Stop() agent.StopCondition {
	return func(agent.Status) (transcript.Outcome, string, bool) {
		t := l.Totals()
		s := agent.Status{Turns: int(t.Usage.Requests), Usage: t.Usage}
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

// Model wraps the root's model m so that the usage of each of its
// responses is charged to the ledger as the response ends, before the loop
// asks for the next.
func (l *Ledger) Model(m agent.Model) agent.Model { return charging{m: m, charge: l.Charge} }

// ChildModel is Model for a child of agentType: its responses are charged
// to the tree and to the agent type.
func (l *Ledger) ChildModel(agentType string, m agent.Model) agent.Model {
	return charging{m: m, charge: func(u provider.Usage) { l.ChargeChild(agentType, u) }}
}

// ToolModel is Model for the calls of a model outside the loops' requests,
// such as the compaction summarizer: each response is charged as
// ChargeTool charges it.
func (l *Ledger) ToolModel(m agent.Model) agent.Model { return charging{m: m, charge: l.ChargeTool} }

type charging struct {
	m      agent.Model
	charge func(provider.Usage)
}

func (c charging) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	return func(yield func(provider.Part, error) bool) {
		for part, err := range c.m.Stream(ctx, req) {
			if err == nil && part.Type == provider.PartFinish {
				c.charge(part.Usage)
			}
			if !yield(part, err) {
				return
			}
		}
	}
}
