package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// ErrContextOverflow matches (with errors.Is) an APIError that says the
// request does not fit the model's context window, so that the agent loop can
// compact the conversation and try again.
var ErrContextOverflow = errors.New("the request exceeds the model's context window")

// APIError is an error answer from a model API: an HTTP error status, or an
// error event in the middle of a stream (StatusCode is then the stream's 200).
// It wraps the SDK's own error.
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

	err error
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
func (e *APIError) Unwrap() error { return e.err }

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

// apiError turns an SDK error into an *APIError where there is one, and
// leaves every other error (connection, context) as it is.
func apiError(err error) error {
	var aerr *anthropic.Error
	if errors.As(err, &aerr) {
		return &APIError{
			StatusCode: aerr.StatusCode,
			Type:       string(aerr.Type()),
			Code:       string(aerr.ErrorCode()),
			Message:    aerr.Message,
			RequestID:  aerr.RequestID,
			err:        err,
		}
	}
	var oerr *openai.Error
	if errors.As(err, &oerr) {
		e := &APIError{StatusCode: oerr.StatusCode, Type: oerr.Type, Code: oerr.Code, Message: oerr.Message, err: err}
		if oerr.Response != nil {
			e.RequestID = oerr.Response.Header.Get("x-request-id")
		}
		return e
	}
	var serr *ssestream.StreamError
	if errors.As(err, &serr) {
		// An error event in a Chat Completions stream: {"error": {...}}.
		var event struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"` // a string, a number or null, depending on the server
			} `json:"error"`
		}
		e := &APIError{StatusCode: http.StatusOK, Message: serr.Message, err: err}
		if json.Unmarshal(serr.Event.Data, &event) == nil && event.Error.Message != "" {
			e.Message, e.Type = event.Error.Message, event.Error.Type
			if event.Error.Code != nil {
				e.Code = fmt.Sprint(event.Error.Code)
			}
		}
		return e
	}
	return err
}

// callError wraps the error of a model call with what was being done, and says
// plainly when the call's own deadline (not the caller's) ran out.
func callError(ctx, parent context.Context, timeout time.Duration, what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s: no complete answer within the %s timeout: %w", what, timeout, context.DeadlineExceeded)
		}
		if perr := parent.Err(); perr != nil {
			return fmt.Errorf("%s: %w", what, context.Cause(parent))
		}
	}
	return fmt.Errorf("%s: %w", what, apiError(err))
}
