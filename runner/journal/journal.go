// Package journal persists a session's entries in order, in the background,
// so that the agent loop never waits for the database except at turn
// barriers.
//
// One Writer serves one active session. Append allocates the entry's
// sequence number and queues it, without blocking on storage. Queued entries
// are written in order, everything queued so far as one batch (one
// transaction), one batch at a time: by the writer's goroutine, which lets a
// new batch gather for a moment (Options.Linger), or by a Barrier that finds
// the goroutine idle. Barrier waits until everything appended before it is
// durable, which the agent does before each tool call starts (write-ahead:
// a crash cannot lose a call that may have run) and when a run ends; Sync
// waits for the entries
// up to a sequence number and has the rest written at once in the
// background, which the agent does when a turn completes, for the turn
// before; Close drains the queue and stops the writer, which is how both a
// session switch and a shutdown hand over or end journal ownership:
//
//	w := journal.New(ctx, st, tenant, snap.Session.ID, snap.LastSeq+1, journal.Options{})
//	seq := w.Append(transcript.UserMessage{...})
//	...
//	w.Append(store.ToolCall{...})
//	if err := w.Barrier(ctx); err != nil { ... } // before the call runs
//	...
//	if err := w.Sync(ctx, lastSeqOfPreviousTurn); err != nil { ... } // end of turn
//	...
//	if err := w.Barrier(ctx); err != nil { ... } // end of run
//	...
//	err := w.Close(ctx) // switch away or shut down
//
// Errors that may pass (a lost connection, a PostgreSQL restart or
// failover, a serialization failure or deadlock, a busy SQLite file) are
// retried with exponential backoff for a bounded time, two minutes by
// default: a database away for a minute costs the session a pause, not its
// run. Meanwhile the agent waits at its next barrier, so no tool call starts
// that the journal has not recorded. Every attempt ends within the window,
// one on a connection that stalls included, so the writer fails when the
// window ends and not later. Retries never reorder or duplicate
// entries: a batch is retried whole before anything after it is written, and
// the store skips entries it already has, so a batch that was committed but
// whose acknowledgement was lost is not written twice. Any other error, or
// retries running out, fails the writer: it keeps allocating sequence numbers
// but skips every later entry, so the live agent can go on, and it reports
// the failure through Err, Barrier, Close, the OnFailure callback and the
// log. A process crash loses whatever was still queued.
package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

// Store is what the journal needs from storage; the session store (store.DB)
// provides it. Append must be idempotent per (session, sequence number), and
// an error worth retrying must have a method Transient() bool that returns
// true, as the store's errors matching store.ErrTransient do.
type Store interface {
	Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error
}

// Options tune a Writer. The zero value is ready to use.
type Options struct {
	// MaxBatch caps the entries written in one transaction. Default 4096.
	MaxBatch int
	// RetryFor bounds the time one batch is retried after transient errors
	// before the writer fails, from its first attempt: no attempt runs past
	// it. Default DefaultRetryFor.
	RetryFor time.Duration
	// AttemptTimeout bounds one write attempt; an attempt that times out is
	// retried like a transient error. Default 15s.
	AttemptTimeout time.Duration
	// Linger is how long the writer lets entries gather after the first
	// one arrives at an empty queue, unless a barrier or a full batch comes
	// first. Default 1ms; negative writes at once.
	Linger time.Duration
	// OnFailure, if set, is called once, from the writer's goroutine, when
	// the writer fails. It must not block.
	OnFailure func(error)
	// Logger receives retries and failures. Default slog.Default().
	Logger *slog.Logger
}

// Backoff between attempts of a batch: doubling from minBackoff up to
// maxBackoff, with jitter so that runners that lost the same database do not
// come back in lockstep.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// DefaultRetryFor is Options.RetryFor's default: longer than a PostgreSQL
// restart or a managed database's failover (typically 20 to 60 s), so that
// these pause a session rather than fail it.
const DefaultRetryFor = 2 * time.Minute

// Writer is the journal writer of one session. Its methods are safe for
// concurrent use.
type Writer struct {
	st      Store
	tenant  string
	session uuid.UUID
	opts    Options
	log     *slog.Logger

	cancel context.CancelFunc // aborts a write in progress when Close gives up
	wake   chan struct{}      // capacity 1: there is work, or Close was called
	linger *time.Timer        // wakes the goroutine once entries have gathered
	done   chan struct{}      // closed when the goroutine has exited

	mu      sync.Mutex
	next    int64              // the sequence number Append hands out next
	queue   []transcript.Entry // appended, not yet taken by the goroutine
	durable int64              // every entry up to here is written (or skipped)
	waiters []waiter
	writing bool          // a batch is being written, by the goroutine or a barrier
	failed  failedAttempt // a barrier's failed attempt at the batch at the queue's head
	err     error         // the failure; nil while healthy
	closing bool
	stats   Stats
}

// failedAttempt is a barrier's attempt at a batch that failed and went
// back to the queue: the goroutine's retry window counts from its start.
type failedAttempt struct {
	since time.Time // zero: none
	err   error
}

type waiter struct {
	seq  int64
	done chan error // capacity 1
}

// Stats count what a writer did.
type Stats struct {
	// Batches and Entries are the batches and entries written.
	Batches, Entries int64
	// Retries counts attempts that failed transiently and were repeated.
	Retries int64
	// Skipped counts entries not written because the writer had failed or
	// was closed.
	Skipped int64
}

// New starts the writer of a session whose next entry gets sequence number
// next: 1 for a new session, Snapshot.LastSeq+1 for a resumed one. ctx
// carries values to the writer's goroutine but not its cancellation: the
// queue must still drain after the caller is cancelled, so stopping is
// Close's job, and Close must be called.
func New(ctx context.Context, st Store, tenant string, session uuid.UUID, next int64, opts Options) *Writer {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 4096
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = DefaultRetryFor
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 15 * time.Second
	}
	if opts.Linger == 0 {
		opts.Linger = time.Millisecond
	}
	opts.Linger = max(opts.Linger, 0)
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &Writer{
		st:      st,
		tenant:  tenant,
		session: session,
		opts:    opts,
		log:     log.With("session", session.String()),
		cancel:  cancel,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		next:    next,
		durable: next - 1,
	}
	w.linger = time.AfterFunc(time.Hour, w.signal)
	w.linger.Stop()
	go w.run(wctx)
	return w
}

// Append queues an entry and returns its sequence number. It never waits
// for storage. After the writer has failed, or after Close, the entry is
// skipped (and counted); the sequence number is still allocated.
func (w *Writer) Append(p transcript.Payload) int64 {
	e := transcript.Entry{Payload: p, CreatedAt: time.Now()}
	w.mu.Lock()
	defer w.mu.Unlock()
	e.Seq = w.next
	w.next++
	switch {
	case w.err != nil:
		w.stats.Skipped++
	case w.closing:
		w.stats.Skipped++
		w.log.Error("journal entry appended after close was not written", "seq", e.Seq, "kind", p.EntryKind())
	default:
		w.queue = append(w.queue, e)
		switch len(w.queue) {
		case 1:
			// Let the entries of a turn gather for a moment: the turn's
			// barrier usually comes first and writes them itself, with no
			// hand-off to the goroutine.
			w.linger.Reset(w.opts.Linger)
		case w.opts.MaxBatch:
			w.signal()
		}
	}
	return e.Seq
}

// Barrier waits until every entry appended before the call is durable, and
// returns the writer's failure if it has failed, or ctx's error.
//
// When the writer's goroutine is idle, the barrier writes the pending batch
// itself rather than wake it and wait: at the end of a turn that saves two
// goroutine hand-offs on the agent's critical path. Only one batch is ever
// being written, so the order holds. If that single attempt fails, the batch
// goes back to the head of the queue for the goroutine to retry.
func (w *Writer) Barrier(ctx context.Context) error {
	w.mu.Lock()
	target := w.next - 1
	for w.err == nil && w.durable < target && !w.writing && len(w.queue) > 0 {
		batch := w.takeLocked()
		w.mu.Unlock()
		started := time.Now()
		retry, err := w.attempt(ctx, batch, started.Add(w.opts.RetryFor))
		if err != nil && !retry && ctx.Err() == nil {
			w.finish(batch, err)
			w.mu.Lock()
			break
		}
		w.mu.Lock()
		if err != nil {
			w.queue = append(batch, w.queue...) // batch's capacity is its length: this copies
			w.writing = false
			if w.failed.since.IsZero() && ctx.Err() == nil {
				w.failed = failedAttempt{since: started, err: err}
			}
			w.signal()
			if ctx.Err() == nil {
				w.stats.Retries++
				w.log.Warn("journal write at barrier failed; the writer retries", "error", err)
			}
			break
		}
		w.writtenLocked(batch)
	}
	return w.waitLocked(ctx, target, "journal barrier")
}

// Sync waits until every entry up to seq is durable, and returns the
// writer's failure if it has failed, or ctx's error. Unlike Barrier it never
// writes in the caller, and it hands the entries queued after seq to the
// writer's goroutine at once rather than after Linger, so that they are
// written while the caller goes on.
//
// The agent's turn-complete barrier is a Sync: at the end of a turn it waits
// for the previous turn's entries, which were written while this turn ran,
// and lets this turn's be written while the next model request goes out. A
// crash loses at most the entries of the turn in progress and of the one
// before it, as the spec allows: barriers order persistence, they do not
// make the current turn's entries synchronous. (The agent's write-ahead
// Barrier before each tool call narrows that: what a crash loses of the
// turn in progress is then only what came after its last call started.)
func (w *Writer) Sync(ctx context.Context, seq int64) error {
	w.mu.Lock()
	seq = min(seq, w.next-1)
	if len(w.queue) > 0 {
		w.signal()
	}
	return w.waitLocked(ctx, seq, "journal sync")
}

// waitLocked waits, with w.mu held, which it releases, until every entry up
// to seq is durable, the writer fails or ctx ends; what names the wait in
// ctx's error.
func (w *Writer) waitLocked(ctx context.Context, seq int64, what string) error {
	switch {
	case w.err != nil:
		defer w.mu.Unlock()
		return w.err
	case w.durable >= seq:
		w.mu.Unlock()
		return nil
	}
	done := make(chan error, 1)
	w.waiters = append(w.waiters, waiter{seq: seq, done: done})
	w.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
}

// Close writes what is queued and stops the writer. If ctx ends first, the
// writer's goroutine abandons its write and the rest is lost, which fails the
// writer (a write a Barrier is making is waited for; it ends within
// AttemptTimeout). Close returns the writer's failure, if any. Closing again
// waits for the first Close.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closing = true
	w.signal()
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done():
		w.cancel()
		<-w.done
	}
	w.cancel()
	w.linger.Stop()
	return w.Err()
}

// Err returns the failure that stopped the writer, or nil.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stats returns what the writer has done so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// signal wakes the goroutine.
func (w *Writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	for {
		batch, failed, ok := w.take()
		if !ok {
			return
		}
		err := w.write(ctx, batch, failed)
		w.finish(batch, err)
	}
}

// take waits until there are queued entries and nothing is being written,
// and takes a batch, with the barrier's failed attempt at it if there was
// one. It reports false when the writer is closing and nothing is left.
func (w *Writer) take() ([]transcript.Entry, failedAttempt, bool) {
	for {
		w.mu.Lock()
		if !w.writing {
			if len(w.queue) > 0 {
				failed := w.failed
				w.failed = failedAttempt{}
				batch := w.takeLocked()
				w.mu.Unlock()
				return batch, failed, true
			}
			if w.closing {
				w.mu.Unlock()
				return nil, failedAttempt{}, false
			}
		}
		w.mu.Unlock()
		<-w.wake
	}
}

// takeLocked takes up to MaxBatch queued entries to write. w.mu must be held
// and nothing else being written.
func (w *Writer) takeLocked() []transcript.Entry {
	n := min(len(w.queue), w.opts.MaxBatch)
	batch := w.queue[:n:n]
	w.queue = w.queue[n:]
	if len(w.queue) == 0 {
		w.queue = nil // let the drained backing array go
		w.linger.Stop()
	}
	w.writing = true
	return batch
}

// writtenLocked records a batch as durable and releases the barriers it
// satisfies. w.mu must be held.
func (w *Writer) writtenLocked(batch []transcript.Entry) {
	w.writing = false
	w.stats.Batches++
	w.stats.Entries += int64(len(batch))
	w.durable = batch[len(batch)-1].Seq
	w.release()
	if len(w.queue) > 0 || w.closing {
		w.signal() // the goroutine may be waiting for this write to end
	}
}

// finish records the outcome of a batch, failing the writer if it could
// not be written.
func (w *Writer) finish(batch []transcript.Entry, err error) {
	w.mu.Lock()
	if err == nil {
		w.writtenLocked(batch)
		w.mu.Unlock()
		return
	}
	w.writing = false
	failure := fmt.Errorf("journal of session %s: %w", w.session, err)
	w.err = failure
	w.stats.Skipped += int64(len(batch) + len(w.queue))
	w.queue = nil
	w.durable = w.next - 1
	waiters := w.waiters
	w.waiters = nil
	w.mu.Unlock()

	w.log.Error("journal writer failed; later entries of the session are not stored", "error", err)
	if w.opts.OnFailure != nil {
		w.opts.OnFailure(failure)
	}
	// Released last, so that a barrier that waited for the failed batch
	// returns only once the failure has been reported.
	for _, wt := range waiters {
		wt.done <- failure
	}
}

// release completes the barriers that are satisfied. w.mu must be held.
func (w *Writer) release() {
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if wt.seq <= w.durable {
			wt.done <- nil
			continue
		}
		kept = append(kept, wt)
	}
	w.waiters = kept
}

// attempt makes one attempt at writing batch, within AttemptTimeout and
// before end, when the retry window closes. retry reports whether a failure
// is worth another attempt: a transient error, or the attempt timing out.
func (w *Writer) attempt(ctx context.Context, batch []transcript.Entry, end time.Time) (retry bool, err error) {
	deadline := time.Now().Add(w.opts.AttemptTimeout)
	if end.Before(deadline) {
		deadline = end
	}
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err = w.st.Append(actx, w.tenant, w.session, batch)
	if err == nil {
		return false, nil
	}
	timedOut := ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
	err = fmt.Errorf("write entries %d-%d: %w", batch[0].Seq, batch[len(batch)-1].Seq, err)
	return timedOut || transient(err), err
}

// transient reports whether the store says err is worth retrying.
func transient(err error) bool {
	var t interface{ Transient() bool }
	return errors.As(err, &t) && t.Transient()
}

// write stores a batch, retrying transient failures with backoff until
// RetryFor has passed since its first attempt (failed's, if a barrier made
// it), no attempt running past that. The store skips entries it already
// has, so a retry after an unacknowledged commit does not duplicate
// anything.
func (w *Writer) write(ctx context.Context, batch []transcript.Entry, failed failedAttempt) error {
	start := failed.since
	if start.IsZero() {
		start = time.Now()
	}
	delay := minBackoff
	end := start.Add(w.opts.RetryFor)
	for attempt := 1; ; attempt++ {
		if !time.Now().Before(end) {
			return fmt.Errorf("gave up after %s: %w", time.Since(start).Round(time.Millisecond), failed.err)
		}
		retry, err := w.attempt(ctx, batch, end)
		failed.err = err
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("closed before the entries were written: %w", err)
		case !retry:
			return err
		}
		wait := backoff(delay)
		if time.Since(start)+wait > w.opts.RetryFor {
			return fmt.Errorf("gave up after %d attempts in %s: %w", attempt, time.Since(start).Round(time.Millisecond), err)
		}
		w.mu.Lock()
		w.stats.Retries++
		w.mu.Unlock()
		w.log.Warn("journal write failed, retrying", "error", err, "attempt", attempt, "backoff", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("closed before the entries were written: %w", err)
		case <-t.C:
		}
		delay = min(2*delay, maxBackoff)
	}
}

// backoff returns d with ±25% jitter.
func backoff(d time.Duration) time.Duration {
	return d - d/4 + rand.N(d/2+1)
}
