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

// Is reports whether the error is ErrContextOverflow. No API has one code
// for it, so it is recognized by the codes, types and wordings the
// providers and the OpenAI-compatible servers use: a code or type that says
// so whatever the status (an error event in a stream has none), a wording
// that says so in a 400 or a 413 (see overflowWording).
func (e *APIError) Is(target error) bool {
	if target != ErrContextOverflow {
		return false
	}
	if overflowCode(e.Code) || overflowCode(e.Type) {
		return true
	}
	if e.StatusCode != http.StatusBadRequest && e.StatusCode != http.StatusRequestEntityTooLarge {
		return false
	}
	return overflowWording(e.Message)
}

// overflowCode reports whether an error code or type says that the request
// exceeds the context window: OpenAI's context_length_exceeded (also sent
// by Groq, LiteLLM and others), llama.cpp's exceed_context_size_error and
// z.ai's model_context_window_exceeded.
func overflowCode(s string) bool {
	switch s {
	case "context_length_exceeded", "exceed_context_size_error", "model_context_window_exceeded":
		return true
	}
	return false
}

// overflowWording reports whether an error message says that the request
// exceeds the context window, in the words one of the APIs or servers uses
// (matched without regard to case):
//
//   - Anthropic: "prompt is too long: 210000 tokens > 200000 maximum", and
//     "input length and `max_tokens` exceed context limit: ...";
//   - OpenAI: "This model's maximum context length is N tokens. However,
//     your messages resulted in M tokens", and (Responses) "Your input
//     exceeds the context window of this model";
//   - vLLM: "This model's maximum context length is N tokens. However, you
//     requested M tokens";
//   - llama.cpp: "the request exceeds the available context size, try
//     increasing it", or "request (M tokens) exceeds the available context
//     size (N tokens)";
//   - Ollama: "prompt too long; exceeded max context length by K tokens";
//   - LM Studio: "The number of tokens to keep from the initial prompt is
//     greater than the context length (n_keep: ...)", "Trying to keep the
//     first M tokens when context the overflows. However, the model is
//     loaded with context length of only N tokens", "Cannot truncate prompt
//     with n_keep (M) >= n_ctx (N)";
//   - and others that route or serve these models: Mistral ("too large for
//     model with N maximum context length"), Together ("longer than the
//     model's context length"), OpenRouter ("This endpoint's maximum
//     context length"), Gemini's OpenAI endpoint ("The input token count
//     (M) exceeds the maximum number of tokens allowed (N)"), xAI ("This
//     model's maximum prompt length is N"), GitHub Copilot ("prompt token
//     count of M exceeds the limit of N").
//
// A wording alone is taken only from a 400 or a 413: a 429 about "too many
// tokens" is a rate limit, not an overflow.
func overflowWording(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range [...]string{
		"prompt is too long",
		"exceed context limit",
		"context window",
		"context length",
		"maximum context",
		"context size",
		"n_keep",
		"prompt too long",
		"maximum prompt length",
		"exceeds the maximum number of tokens",
		"prompt token count",
	} {
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
