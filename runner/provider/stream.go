package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// ErrStreamIdle matches (with errors.Is) the error of an attempt whose
// streamed answer sent nothing for Config.StreamIdleTimeout: a server or a
// network path that stalled with the connection open, which would
// otherwise hold the call until its whole Timeout ran out.
var ErrStreamIdle = errors.New("the model's stream went idle")

// ErrAnswerTooLarge matches (with errors.Is) the error of a call whose
// answer grew past Config.MaxAnswerBytes. It is not retried: the same
// request would most likely get the same answer.
var ErrAnswerTooLarge = errors.New("the model's answer is too large")

// IdleTimeout is an SDK middleware that fails a response whose body sends
// nothing for timeout while it is being read: the read then returns an
// error that matches ErrStreamIdle and names the timeout, and the
// attempt's connection is closed. Only the time a read waits counts, so a
// caller that is slow to read (a full pipe to the terminal) is not taken
// for a stalled server. A zero timeout returns a middleware that does
// nothing.
//
// Both SDKs take it as their option.Middleware. The SDKs' retries happen
// before the body is read, so a stalled stream is not retried by them; see
// Guard for what is.
func IdleTimeout(
	timeout time.Duration,
) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		if timeout <= 0 {
			return next(req)
		}
		// Cancelling the request's context is what unblocks a read that
		// waits on the connection; closing the body would wait for it.
		ctx, cancel := context.WithCancelCause(req.Context())
		res, err := next(req.WithContext(ctx))
		if err != nil || res == nil || res.Body == nil {
			cancel(nil)
			return res, err
		}
		res.Body = newIdleBody(res.Body, timeout, cancel)
		return res, nil
	}
}

// idleBody is a response body whose reads fail once one has waited for
// timeout.
type idleBody struct {
	io.ReadCloser
	timer  *time.Timer
	cancel context.CancelCauseFunc
	// timeout is the idle timeout, and err the error of a read that ran
	// past it once idle is set.
	timeout time.Duration
	err     error
	idle    atomic.Bool
}

func newIdleBody(body io.ReadCloser, timeout time.Duration, cancel context.CancelCauseFunc) *idleBody {
	b := &idleBody{
		ReadCloser: body, cancel: cancel, timeout: timeout,
		err: fmt.Errorf("nothing received for %s (the stream idle timeout, [model] stream_idle_timeout_secs): %w",
			timeout, ErrStreamIdle),
	}
	b.timer = time.AfterFunc(timeout, func() {
		b.idle.Store(true)
		b.cancel(b.err)
	})
	b.timer.Stop()
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.idle.Load() {
		return 0, b.err
	}
	b.timer.Reset(b.timeout)
	n, err := b.ReadCloser.Read(p)
	if !b.timer.Stop() && b.idle.Load() {
		return n, b.err
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// Guard is what the providers of the real APIs do around every streamed
// call, whatever the API: one deadline for the whole call, the retry of an
// attempt that went idle before it delivered anything, and the cap on the
// answer's size.
type Guard struct {
	name      string
	timeout   time.Duration
	retries   int
	maxAnswer int
	log       *slog.Logger
	model     string
}

// Guard returns the Guard of the calls of provider name under c.
func (c Config) Guard(name string) Guard {
	return Guard{
		name: name, timeout: c.CallTimeout(), retries: c.Retries(), maxAnswer: c.AnswerCap(),
		log: c.Log(), model: c.Model,
	}
}

// Stream returns the parts attempt streams, guarded:
//
//   - every attempt runs under one deadline, Config.Timeout from now, so
//     that the timeout bounds the call, retries included; when it runs
//     out, the error says so;
//   - an attempt that fails with ErrStreamIdle before it delivered a part
//     is made again, up to Config.MaxRetries times, as a connection error
//     is: nothing of it reached the caller. One that fails after parts were
//     delivered ends the call, because they cannot be taken back;
//   - once the answer's text, reasoning and tool call arguments together
//     pass Config.MaxAnswerBytes, the stream is cut (its connection closed)
//     and the call fails with an error that matches ErrAnswerTooLarge and
//     names the cap.
//
// attempt is one request, streamed as Provider.Stream says; it names its
// errors after the call.
func (g Guard) Stream(
	ctx context.Context, attempt func(context.Context) iter.Seq2[Part, error],
) iter.Seq2[Part, error] {
	return func(yield func(Part, error) bool) {
		callCtx, cancel := context.WithTimeoutCause(ctx, g.timeout,
			fmt.Errorf("no complete answer within the %s timeout: %w", g.timeout, context.DeadlineExceeded))
		defer cancel()
		size := 0
		for try := 0; ; try++ {
			delivered, err := g.attempt(callCtx, attempt, &size, yield)
			if err == nil {
				return
			}
			if delivered || try >= g.retries || !errors.Is(err, ErrStreamIdle) || callCtx.Err() != nil {
				yield(Part{}, err)
				return
			}
			g.log.Info("model stream went idle before the answer began; retrying",
				"provider", g.name, "model", g.model, "attempt", try+1, "error", err)
		}
	}
}

// attempt streams one attempt to yield, adding the size of what it
// delivers to size. It reports whether it delivered a part, and returns
// the attempt's error: nil when it ended or yield stopped it.
func (g Guard) attempt(
	ctx context.Context, attempt func(context.Context) iter.Seq2[Part, error], size *int, yield func(Part, error) bool,
) (delivered bool, err error) {
	for p, err := range attempt(ctx) {
		if err != nil {
			return delivered, err
		}
		*size += len(p.Text) + len(p.Signature)
		if g.maxAnswer > 0 && *size > g.maxAnswer {
			return true, fmt.Errorf("%s: the answer passed %d bytes, the cap on one answer ([model] max_answer_bytes): %w",
				g.name, g.maxAnswer, ErrAnswerTooLarge)
		}
		delivered = true
		if !yield(p, nil) {
			return true, nil
		}
	}
	return delivered, nil
}
