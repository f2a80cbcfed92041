package subagent

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
)

// The limits' defaults, the spec's.
const (
	DefaultMaxConcurrent = 8
	DefaultMaxDepth      = 3
	DefaultMaxTotal      = 64
)

// Limits bound a session tree: the [subagents] table of config.toml.
type Limits struct {
	// MaxConcurrent is how many children of the tree may run at once
	// (max_concurrent); a spawn past it is refused.
	MaxConcurrent int
	// MaxDepth is how deep the tree may grow (max_depth): the root is at
	// depth 0, its children at 1; an agent at MaxDepth cannot spawn.
	MaxDepth int
	// MaxTotal is how many children the tree may spawn in all
	// (max_total), over the whole run.
	MaxTotal int
}

// DefaultLimits returns the spec's limits.
func DefaultLimits() Limits {
	return Limits{MaxConcurrent: DefaultMaxConcurrent, MaxDepth: DefaultMaxDepth, MaxTotal: DefaultMaxTotal}
}

// Validate reports a limit that cannot be used, naming its key.
func (l Limits) Validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{{"max_concurrent", l.MaxConcurrent}, {"max_depth", l.MaxDepth}, {"max_total", l.MaxTotal}} {
		if f.v < 0 {
			return fmt.Errorf("subagents.%s %d: want 0 (no subagents) or more", f.key, f.v)
		}
	}
	return nil
}

// ErrLimit is what a refusal for a limit wraps.
var ErrLimit = errors.New("subagent limit reached")

// LimitError is a spawn refused for a limit: its message names the limit
// and its value, for the model.
type LimitError struct {
	// Limit is the key: max_concurrent, max_depth or max_total.
	Limit string
	Value int
	// Detail says what reached it.
	Detail string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s %d reached: %s ([subagents] %s in config.toml)", e.Limit, e.Value, e.Detail, e.Limit)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// Tree is the state a session tree shares: its limits, its ledger and the
// children running and spawned. Its methods are safe for concurrent use.
type Tree struct {
	limits Limits
	ledger *Ledger
	// types are the agent types besides personas that spawn_agent
	// describes; set before the tree's first tool is made.
	types []Type

	mu      sync.Mutex
	running int
	total   int
	// spawned are the children spawned, stored ones included: a child
	// resumed is not spawned again.
	spawned map[uuid.UUID]bool
}

// NewTree returns the tree of a root session whose stored descendants are
// stored (none for a new session): they count toward max_total, and a
// resumed one does not count twice.
func NewTree(limits Limits, ledger *Ledger, stored ...uuid.UUID) *Tree {
	t := &Tree{limits: limits, ledger: ledger, spawned: map[uuid.UUID]bool{}}
	for _, id := range stored {
		if !t.spawned[id] {
			t.spawned[id] = true
			t.total++
		}
	}
	return t
}

// Type is an agent type spawn_agent names in its description, such as a
// plugin's agent: the model learns from it which exist and when to use
// them.
type Type struct {
	Name        string
	Description string
}

// WithTypes makes types the agent types the tree's spawn_agent describes;
// it is called once, before the tree's tools are made.
func (t *Tree) WithTypes(types ...Type) *Tree {
	t.types = types
	return t
}

// Ledger is the tree's ledger.
func (t *Tree) Ledger() *Ledger { return t.ledger }

// Spawned is how many children the tree has spawned.
func (t *Tree) Spawned() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// admit reserves a place for the child id, of agentType, of an agent at
// depth, or refuses it for the first limit it would pass; a child the tree
// has spawned before (a resumed one) is not counted toward max_total again.
// release gives the place back when the child has ended.
func (t *Tree) admit(depth int, id uuid.UUID, agentType string) (release func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	again := t.spawned[id]
	switch {
	case depth+1 > t.limits.MaxDepth:
		return nil, &LimitError{Limit: "max_depth", Value: t.limits.MaxDepth,
			Detail: fmt.Sprintf("an agent at depth %d cannot spawn another; do the task yourself", depth)}
	case !again && t.total >= t.limits.MaxTotal:
		return nil, &LimitError{Limit: "max_total", Value: t.limits.MaxTotal,
			Detail: fmt.Sprintf("this session tree has spawned %d subagents; do the task yourself", t.total)}
	case t.running >= t.limits.MaxConcurrent:
		return nil, &LimitError{Limit: "max_concurrent", Value: t.limits.MaxConcurrent,
			Detail: fmt.Sprintf("%d subagents are running; spawn it after one has finished, or do the task yourself", t.running)}
	}
	t.running++
	if !again {
		t.spawned[id] = true
		t.total++
	}
	t.ledger.countSubagent(agentType)
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			t.running--
			t.mu.Unlock()
		})
	}, nil
}
