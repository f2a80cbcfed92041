package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ErrContextOverflow matches (with errors.Is) an APIError that says the
// request does not fit the model's context window, so that the agent loop can
// compact the conversation and try again.
var ErrContextOverflow = errors.New("the request exceeds the model's context window")

// APIError is an error answer from a model API: an HTTP error status, or an
// error event in the middle of a stream (StatusCode is then the stream's 200).
// Each provider translates its SDK's errors into it, so that callers tell a
// rate limit from a bad request without knowing the SDK.
type APIError struct {
	// StatusCode is the HTTP status of the response.
	StatusCode int
	// Type is the provider's error type, for example "rate_limit_error" or
	// "invalid_request_error".
	Type string
	// Code is the provider's machine-readable error code, when it has one (for
	// example OpenAI's "context_length_exceeded").
	Code string
	// Message is the provider's human-readable explanation.
	Message string
	// RequestID identifies the request for the provider's support.
	RequestID string
	// Err is the SDK's own error, if any.
	Err error
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	for _, s := range []string{e.Type, e.Code} {
		if s != "" {
			b.WriteString(": " + s)
		}
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	return b.String()
}

// Unwrap returns the SDK's error.
func (e *APIError) Unwrap() error { return e.Err }

// Is reports whether the error is ErrContextOverflow. Neither API has one code
// for it, so it is recognized by the codes and wordings the providers use.
func (e *APIError) Is(target error) bool {
	if target != ErrContextOverflow {
		return false
	}
	if e.Code == "context_length_exceeded" || e.Type == "context_length_exceeded" {
		return true
	}
	if e.StatusCode != http.StatusBadRequest && e.StatusCode != http.StatusRequestEntityTooLarge {
		return false
	}
	msg := strings.ToLower(e.Message)
	for _, s := range []string{"prompt is too long", "context window", "context length", "maximum context"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// CallError wraps the error of a model call with what was being done, and
// says plainly when the call's own deadline (not the caller's) ran out: ctx
// is the call's context, parent the caller's, and timeout the call's
// deadline. The provider has already translated err into an *APIError where
// it is one.
func CallError(ctx, parent context.Context, timeout time.Duration, what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s: no complete answer within the %s timeout: %w", what, timeout, context.DeadlineExceeded)
		}
		if perr := parent.Err(); perr != nil {
			return fmt.Errorf("%s: %w", what, context.Cause(parent))
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
