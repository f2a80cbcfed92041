package provider_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/provider"
)

func TestAPIErrorContextOverflow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  provider.APIError
		want bool
	}{
		// The wordings of the APIs and servers, in a 400.
		{"anthropic", provider.APIError{StatusCode: 400, Type: "invalid_request_error", Message: "prompt is too long: 210000 tokens > 200000 maximum"}, true},
		{"anthropic with max_tokens", provider.APIError{StatusCode: 400, Type: "invalid_request_error", Message: "input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000, decrease input length or `max_tokens` and try again"}, true},
		{"openai chat", provider.APIError{StatusCode: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."}, true},
		{"openai responses", provider.APIError{StatusCode: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "Your input exceeds the context window of this model. Please adjust your input and try again."}, true},
		{"vllm", provider.APIError{StatusCode: 400, Type: "BadRequestError", Code: "400", Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."}, true},
		{"llama.cpp", provider.APIError{StatusCode: 400, Type: "exceed_context_size_error", Code: "400", Message: "the request exceeds the available context size, try increasing it"}, true},
		{"llama.cpp newer", provider.APIError{StatusCode: 400, Message: "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it"}, true},
		{"ollama", provider.APIError{StatusCode: 400, Type: "invalid_request_error", Message: "prompt too long; exceeded max context length by 5000 tokens"}, true},
		{"lm studio", provider.APIError{StatusCode: 400, Message: "The number of tokens to keep from the initial prompt is greater than the context length (n_keep: 13055>= n_ctx: 4096). Try to load the model with a larger context length, or provide a shorter input."}, true},
		{"lm studio older", provider.APIError{StatusCode: 400, Message: "Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough."}, true},
		{"lm studio n_keep", provider.APIError{StatusCode: 400, Message: "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}, true},
		{"mistral", provider.APIError{StatusCode: 400, Message: "Prompt contains 150000 tokens, too large for model with 128000 maximum context length"}, true},
		{"together", provider.APIError{StatusCode: 400, Message: "The input (150000 tokens) is longer than the model's context length (128000 tokens)."}, true},
		{"openrouter", provider.APIError{StatusCode: 400, Message: "This endpoint's maximum context length is 131072 tokens. However, you requested about 150000 tokens"}, true},
		{"gemini", provider.APIError{StatusCode: 400, Message: "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)"}, true},
		{"xai", provider.APIError{StatusCode: 400, Message: "This model's maximum prompt length is 131072 but the request contains 537812 tokens"}, true},
		{"copilot", provider.APIError{StatusCode: 400, Message: "prompt token count of 130000 exceeds the limit of 128000"}, true},
		{"upper case", provider.APIError{StatusCode: 400, Message: "PROMPT IS TOO LONG"}, true},
		{"413", provider.APIError{StatusCode: 413, Message: "prompt is too long"}, true},

		// A code or type says it whatever the status: an error event in a
		// stream comes with the stream's 200.
		{"responses stream failure", provider.APIError{StatusCode: 200, Type: "response.failed", Code: "context_length_exceeded", Message: "Your input exceeds the context window of this model."}, true},
		{"type only", provider.APIError{StatusCode: 200, Type: "exceed_context_size_error"}, true},
		{"z.ai", provider.APIError{StatusCode: 400, Code: "model_context_window_exceeded"}, true},

		// Not overflows.
		{"bad request", provider.APIError{StatusCode: 400, Type: "invalid_request_error", Message: "messages.0: the field content is required"}, false},
		{"output cap", provider.APIError{StatusCode: 400, Message: "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5"}, false},
		{"rate limit in tokens", provider.APIError{StatusCode: 429, Type: "rate_limit_error", Message: "Too many tokens, please wait before trying again."}, false},
		{"wording in a 500", provider.APIError{StatusCode: 500, Message: "prompt is too long"}, false},
		{"wording in a stream error", provider.APIError{StatusCode: 200, Message: "context length exceeded"}, false},
		{"empty", provider.APIError{StatusCode: 400}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("model request: %w", &tc.err)
			if got := errors.Is(err, provider.ErrContextOverflow); got != tc.want {
				t.Errorf("errors.Is(%v, ErrContextOverflow) = %v, want %v", err, got, tc.want)
			}
		})
	}
	if errors.Is(errors.New("prompt is too long"), provider.ErrContextOverflow) {
		t.Error("an error that is not an APIError is ErrContextOverflow")
	}
}

// FuzzAPIErrorContextOverflow checks the classifier's invariants: a
// message is matched without regard to case and wherever it stands in the
// text, and a wording alone counts only in a 400 or a 413.
func FuzzAPIErrorContextOverflow(f *testing.F) {
	f.Add(400, "invalid_request_error", "", "prompt is too long: 210000 tokens > 200000 maximum")
	f.Add(400, "invalid_request_error", "context_length_exceeded", "This model's maximum context length is 10 tokens.")
	f.Add(429, "rate_limit_error", "", "Too many tokens")
	f.Add(200, "response.failed", "context_length_exceeded", "")
	f.Add(413, "", "", "context size")
	f.Fuzz(func(t *testing.T, status int, typ, code, msg string) {
		e := &provider.APIError{StatusCode: status, Type: typ, Code: code, Message: msg}
		got := errors.Is(e, provider.ErrContextOverflow)
		byCode := errors.Is(&provider.APIError{StatusCode: 200, Type: typ, Code: code}, provider.ErrContextOverflow)
		if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge && got != byCode {
			t.Fatalf("%+v: overflow %v from its wording in a %d", e, got, status)
		}
		if !got {
			return
		}
		padded := *e
		padded.Message = "error: " + msg + " (see the docs)"
		if !errors.Is(&padded, provider.ErrContextOverflow) {
			t.Fatalf("%q is an overflow, %q is not", msg, padded.Message)
		}
		if isASCII(msg) {
			upper := *e
			upper.Message = strings.ToUpper(msg)
			if !errors.Is(&upper, provider.ErrContextOverflow) {
				t.Fatalf("%q is an overflow, %q is not", msg, upper.Message)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
