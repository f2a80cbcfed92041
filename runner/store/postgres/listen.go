package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// sessionsChannel is the channel every change of a session row notifies,
// with the session's id (migration 0005).
const sessionsChannel = "aerie_sessions"

// Listen holds one connection of the pool LISTENing on the sessions'
// channel and calls changed with the id of each session that changed (rows
// committed), and with uuid.Nil once listening has begun (what changed
// before then was not told). It returns when ctx ends or the connection
// fails.
func (b *backend) Listen(ctx context.Context, changed func(uuid.UUID)) error {
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", pgError(err))
	}
	// A connection that LISTENs goes back to no one else: it is taken out
	// of the pool, and closed when done.
	conn := pc.Hijack()
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+sessionsChannel); err != nil {
		return fmt.Errorf("listen: %w", pgError(err))
	}
	changed(uuid.Nil)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("listen: %w", pgError(err))
		}
		if id, err := uuid.Parse(n.Payload); err == nil {
			changed(id)
		}
	}
}
