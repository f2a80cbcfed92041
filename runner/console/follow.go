package console

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Listener is a Store that tells of the sessions that changed as they
// commit: runner/store's DB over PostgreSQL (LISTEN/NOTIFY). Over one that
// does not (SQLite), live transcripts poll.
type Listener interface {
	Listen(ctx context.Context, changed func(uuid.UUID)) error
}

// relisten is how long the hub waits to listen again after the listening
// connection failed.
const relisten = time.Second

// hub holds the console's one listening connection, started by the first
// viewer of a live session, and wakes the viewers of each session that
// changed.
type hub struct {
	l      Listener
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	started bool
	subs    map[uuid.UUID]map[chan struct{}]struct{}
	done    chan struct{}
}

func newHub(l Listener, log *slog.Logger) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{l: l, log: log, ctx: ctx, cancel: cancel, subs: map[uuid.UUID]map[chan struct{}]struct{}{},
		done: make(chan struct{})}
}

// subscribe returns a channel that receives when session id changes (or
// when what changed may have been missed), and the function that ends the
// subscription.
func (h *hub) subscribe(id uuid.UUID) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started {
		h.started = true
		go h.run()
	}
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	h.subs[id][ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
	}
}

// wake tells the viewers of id, or every viewer for uuid.Nil, to read the
// session again.
func (h *hub) wake(id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sid, chs := range h.subs {
		if id != uuid.Nil && sid != id {
			continue
		}
		for ch := range chs {
			select {
			case ch <- struct{}{}:
			default: // a wake is pending already
			}
		}
	}
}

// run listens until the hub is closed, again after a failure; while it
// is not listening the viewers poll.
func (h *hub) run() {
	defer close(h.done)
	for {
		err := h.l.Listen(h.ctx, h.wake)
		switch {
		case h.ctx.Err() != nil:
			return
		case errors.Is(err, errors.ErrUnsupported):
			return // the store tells nothing: the viewers poll
		}
		h.log.Warn("listen for changed sessions; the live transcripts poll meanwhile", "error", err)
		h.wake(uuid.Nil) // a change may have gone untold
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(relisten):
		}
	}
}

// close stops listening and waits for it.
func (h *hub) close() {
	h.cancel()
	h.mu.Lock()
	started := h.started
	h.started = true // no listening starts any more
	h.mu.Unlock()
	if started {
		<-h.done
	}
}
