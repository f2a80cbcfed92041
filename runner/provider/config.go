package provider

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Provider names, as Config.Provider and the AgentSession's spec.model.provider
// spell them.
const (
	NameAnthropic        = "anthropic"
	NameOpenAI           = "openai"
	NameOpenAICompatible = "openai-compatible"
	NameScripted         = "scripted"
)

// OpenAI wire APIs, as Config.API spells them.
const (
	// APIResponses is the OpenAI Responses API (POST /responses), the default
	// for provider openai.
	APIResponses = "responses"
	// APIChatCompletions is the Chat Completions API (POST /chat/completions),
	// the default for provider openai-compatible because it is the API those
	// servers implement.
	APIChatCompletions = "chat-completions"
)

// Defaults for the zero values of Config.
const (
	// DefaultMaxRetries is how often a failed attempt (429, 408, 409, 5xx,
	// connection error) is retried. Agent sessions run unattended for a long
	// time, so they ride out more rate limiting than the SDKs' default of two.
	DefaultMaxRetries = 4
	// DefaultTimeout bounds one model call: connecting, every retry and its
	// wait, and reading the whole streamed answer. It is generous because an
	// answer of tens of thousands of tokens takes minutes to stream.
	DefaultTimeout = 20 * time.Minute

	// DefaultStreamIdleTimeout is how long a streamed answer may send
	// nothing before its attempt fails. It is Codex's default
	// (stream_idle_timeout_ms): servers that take long to start answering
	// (a local model reading a long prompt) send the headers, then nothing
	// for a while; the APIs send keep-alive events far more often.
	DefaultStreamIdleTimeout = 5 * time.Minute
	// DefaultMaxAnswerBytes caps one answer: its text, reasoning and tool
	// call arguments together. It is far above what an output token cap
	// lets a model write (128,000 tokens are about half a megabyte), so
	// only a server that misbehaves reaches it, and it keeps such a
	// server from running the runner out of memory.
	DefaultMaxAnswerBytes = 32 << 20

	// responseHeaderTimeout fails an attempt whose server accepted the request
	// but sends no response headers, so that it is retried instead of using up
	// the whole call's Timeout. Streaming servers answer with headers at once;
	// a local server loading a model may take minutes.
	responseHeaderTimeout = 5 * time.Minute
)

// Config configures a Provider. It mirrors the AgentSession's spec.model.
type Config struct {
	// Provider is the model API: anthropic, openai, openai-compatible or
	// scripted.
	Provider string
	// API selects the wire API of the OpenAI providers: "responses" or
	// "chat-completions". Empty means responses for openai and
	// chat-completions for openai-compatible. It must be empty for the other
	// providers.
	API string
	// Model is the model name the provider knows, for example
	// "claude-sonnet-4-5" or "gpt-5". For the scripted provider it is only a
	// label.
	Model string
	// APIKey authenticates to the provider: required for anthropic and openai,
	// optional for openai-compatible (a local server may need none). It is sent
	// as x-api-key to Anthropic and as "Authorization: Bearer" to OpenAI.
	APIKey Secret
	// BaseURL replaces the provider's endpoint: the URL the API's paths are
	// appended to. For Anthropic that is the root (https://api.anthropic.com);
	// for the OpenAI APIs it includes the version (https://api.openai.com/v1,
	// http://localhost:11434/v1). Required for openai-compatible.
	BaseURL string
	// ScriptPath is the script file the scripted provider replays.
	ScriptPath string
	// MaxOutputTokens caps each response unless the Request sets its own cap.
	// Zero means the provider's default.
	MaxOutputTokens int64
	// MaxRetries is how many times a failed attempt is retried. Zero means
	// DefaultMaxRetries; a negative value disables retries.
	MaxRetries int
	// Timeout bounds each model call, retries included. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// StreamIdleTimeout fails an attempt whose streamed answer sends nothing,
	// not a byte, for this long (see ErrStreamIdle). Zero means
	// DefaultStreamIdleTimeout; a negative value disables it.
	StreamIdleTimeout time.Duration
	// MaxAnswerBytes caps one answer's text, reasoning and tool call
	// arguments together (see ErrAnswerTooLarge). Zero means
	// DefaultMaxAnswerBytes; a negative value disables the cap. Like
	// StreamIdleTimeout, it bounds the providers of the real APIs; the
	// scripted provider replays its file as it is.
	MaxAnswerBytes int
	// HTTPClient sends the requests; nil means a client with a response-header
	// timeout. Tests and proxies set it.
	HTTPClient *http.Client `json:"-"`
	// Logger receives one record per failed attempt (status, attempt, the
	// server's retry-after), so rate limiting shows in the logs. Nil discards.
	Logger *slog.Logger
}

// Retries is how many times a failed attempt is retried: MaxRetries, with
// its default.
func (c Config) Retries() int {
	return orDefault(c.MaxRetries, DefaultMaxRetries)
}

// CallTimeout bounds each model call: Timeout, with its default.
func (c Config) CallTimeout() time.Duration {
	if c.Timeout == 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// IdleTimeout is how long a streamed answer may send nothing:
// StreamIdleTimeout, with its default; zero when it is disabled.
func (c Config) IdleTimeout() time.Duration {
	return orDefault(c.StreamIdleTimeout, DefaultStreamIdleTimeout)
}

// AnswerCap is the cap on one answer's size in bytes: MaxAnswerBytes, with
// its default; zero when it is disabled.
func (c Config) AnswerCap() int {
	return orDefault(c.MaxAnswerBytes, DefaultMaxAnswerBytes)
}

// orDefault reads a setting where zero means its default and a negative
// value turns it off (zero).
func orDefault[T int | time.Duration](v, def T) T {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return def
	}
	return v
}

// Client is the HTTP client that sends the requests: HTTPClient, or one
// with a response-header timeout.
func (c Config) Client() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = responseHeaderTimeout
		return &http.Client{Transport: t}
	}
	return &http.Client{}
}

// Log is the logger of failed attempts: Logger, or one that discards.
func (c Config) Log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// Check validates the fields every provider that calls an API shares, for
// the provider name (whose API needs a key if keyRequired). It names the
// field at fault, because the error reaches a person who wrote a session
// spec.
func (c Config) Check(name string, keyRequired bool) error {
	var errs []error
	if c.Model == "" {
		errs = append(errs, errors.New("Config.Model is empty; name the model, for example claude-sonnet-4-5 or gpt-5"))
	}
	if keyRequired && c.APIKey == "" {
		errs = append(errs, fmt.Errorf("Config.APIKey is empty; the %s API needs an API key", name))
	}
	if c.BaseURL != "" || name == NameOpenAICompatible {
		if err := checkBaseURL(c.BaseURL); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxOutputTokens < 0 {
		errs = append(errs, fmt.Errorf("Config.MaxOutputTokens %d is negative", c.MaxOutputTokens))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Config.Timeout %s is negative", c.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("provider: %s: %w", name, err)
	}
	return nil
}

func checkBaseURL(raw string) error {
	if raw == "" {
		return errors.New("Config.BaseURL is empty; an OpenAI-compatible server has no default endpoint")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("Config.BaseURL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("Config.BaseURL %q: want an http or https URL with a host", raw)
	}
	if u.User != nil {
		// A key in the URL would end up in errors and logs.
		return fmt.Errorf("Config.BaseURL %q: must not contain credentials; use Config.APIKey", u.Redacted())
	}
	return nil
}

// Secret is a credential. It never formats as its value, so that printing or
// logging a Config cannot leak it; only string(s) reads it.
type Secret string

const redacted = "[redacted]"

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// Format applies to every verb, so that %x or %q cannot print the value either.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(s.GoString()))
		return
	}
	_, _ = f.Write([]byte(s.String()))
}

// LogValue keeps log/slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoders (JSON, YAML, slog's JSON handler) from printing
// the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// RetryLog is an SDK middleware that logs the failed attempts the SDKs retry
// (429, 408, 409, 5xx, connection errors), below their retry loops so that
// each attempt is seen: rate limiting and outages show in the logs even when
// a retry succeeds. The caller sees the error of the last attempt, so this is
// information, not an error report. It logs the status and the server's
// retry-after, never headers or bodies, which could carry the key.
//
// Both SDKs take it as their option.Middleware, and both number the attempt
// in the X-Stainless-Retry-Count header.
func RetryLog(
	log *slog.Logger, provider, model string,
) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		res, err := next(req)
		attrs := []any{"provider", provider, "model", model, "attempt", req.Header.Get("X-Stainless-Retry-Count")}
		switch {
		case err != nil:
			if req.Context().Err() == nil {
				log.Info("model request attempt failed", append(attrs, "error", err)...)
			}
		case retryable(res):
			attrs = append(attrs, "status", res.StatusCode)
			for _, h := range []string{"retry-after-ms", "retry-after"} {
				if v := res.Header.Get(h); v != "" {
					attrs = append(attrs, strings.ReplaceAll(h, "-", "_"), v)
				}
			}
			log.Info("model request attempt failed", attrs...)
		}
		return res, err
	}
}

// retryable reports whether the SDKs retry a response: the statuses they
// retry, unless the server says otherwise with x-should-retry.
func retryable(res *http.Response) bool {
	switch res.Header.Get("X-Should-Retry") {
	case "true":
		return true
	case "false":
		return false
	}
	switch res.StatusCode {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return res.StatusCode >= 500
}
