package openai

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/aerie-run/aerie/runner/provider"
)

// decoder turns the events of one API's stream, of type E, into parts.
type decoder[E any] interface {
	// decode yields the parts of one event. It returns an error the event
	// reported, which ends the stream, or false when yield asked to stop.
	decode(ev E, yield func(provider.Part, error) bool) (bool, error)
	// complete yields what is left once the stream has ended without an
	// error, the finish part included, or returns provider.ErrIncomplete
	// when the stream ended before the answer did.
	complete(yield func(provider.Part, error) bool) error
}

// streamCall is one streamed request: the provider's name, the operation
// its errors are named after, the request's own deadline and the guard of
// its attempts.
type streamCall struct {
	name    string
	op      string
	timeout time.Duration
	guard   provider.Guard
}

// streamed is the stream of a request of both APIs: the params the request
// makes, or its error, then the stream of those params, opened by open
// (see stream).
func streamed[P, E any](
	ctx context.Context, c streamCall, params func() (P, error),
	open func(context.Context, P) *ssestream.Stream[E], newDecoder func() decoder[E],
) iter.Seq2[provider.Part, error] {
	return func(yield func(provider.Part, error) bool) {
		p, err := params()
		if err != nil {
			yield(provider.Part{}, fmt.Errorf("%s: %w", c.name, err))
			return
		}
		open := func(ctx context.Context) *ssestream.Stream[E] { return open(ctx, p) }
		stream(ctx, c, open, newDecoder, yield)
	}
}

// stream is the loop both APIs share: it makes the attempts the call's
// guard asks for (see provider.Guard), each with a decoder of its own.
func stream[E any](
	ctx context.Context, c streamCall, open func(context.Context) *ssestream.Stream[E], newDecoder func() decoder[E],
	yield func(provider.Part, error) bool,
) {
	c.guard.Stream(ctx, func(ctx context.Context) iter.Seq2[provider.Part, error] {
		return func(yield func(provider.Part, error) bool) { attempt(ctx, c, open, newDecoder(), yield) }
	})(yield)
}

// attempt opens the stream under the call's deadline, hands every event to
// dec, and yields the error that ends the stream, if one does, named after
// the call.
func attempt[E any](
	ctx context.Context, c streamCall, open func(context.Context) *ssestream.Stream[E], dec decoder[E],
	yield func(provider.Part, error) bool,
) {
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	s := open(callCtx)
	defer func() { _ = s.Close() }() // it only reads the response: closing its body loses nothing

	for s.Next() {
		more, err := dec.decode(s.Current(), yield)
		if err != nil {
			yield(provider.Part{}, fmt.Errorf("%s: %s: %w", c.name, c.op, err))
			return
		}
		if !more {
			return
		}
	}
	if err := s.Err(); err != nil {
		yield(provider.Part{}, provider.CallError(callCtx, ctx, c.timeout, c.name+": "+c.op, apiError(err)))
		return
	}
	if err := dec.complete(yield); err != nil {
		yield(provider.Part{}, fmt.Errorf("%s: %s: %w", c.name, c.op, err))
	}
}
