package subagent

import (
	"context"
	"slices"
	"sync"

	"github.com/google/uuid"
)

// Children are the running children of one agent, for its compaction
// gates (compaction.Children). The zero value is ready; it is safe for
// concurrent use.
type Children struct {
	mu     sync.Mutex
	active []uuid.UUID
	// idle is closed when the last running child ends; nil while none runs.
	idle chan struct{}
}

// Active returns the ids of the child sessions still running.
func (c *Children) Active() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.active)
}

// Wait returns when no child is running, or when ctx ends.
func (c *Children) Wait(ctx context.Context) {
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

func (c *Children) add(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.active) == 0 {
		c.idle = make(chan struct{})
	}
	c.active = append(c.active, id)
}

func (c *Children) done(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.active, id)
	if i < 0 {
		return
	}
	c.active = slices.Delete(c.active, i, i+1)
	if len(c.active) == 0 {
		close(c.idle)
		c.idle = nil
	}
}
