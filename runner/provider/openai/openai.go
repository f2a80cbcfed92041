// Package openai is the provider of the OpenAI APIs, streamed through the
// OpenAI SDK: the Responses API (Responses) and the Chat Completions API
// (Chat), which OpenAI-compatible servers such as vLLM, Ollama and LiteLLM
// implement. Both take the same client setup and the same errors; they
// translate provider's neutral requests into their wire formats and their
// streams back into parts.
//
// The SDK waits what retry-after-ms or retry-after (seconds or an HTTP
// date) says before a retry, up to two minutes: a longer wait ends the
// retries and returns the 429. Without them it backs off exponentially from
// half a second to at most eight, with jitter.
package openai

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/aerie-run/aerie/runner/provider"
)

// defaultBaseURL is OpenAI's endpoint, for provider openai without a
// Config.BaseURL.
const defaultBaseURL = "https://api.openai.com/v1"

// New returns the client of the wire API cfg selects: provider openai
// speaks the Responses API unless cfg.API says "chat-completions";
// provider openai-compatible speaks Chat Completions unless cfg.API says
// "responses", because Chat Completions is the API those servers implement.
func New(cfg provider.Config) (provider.Provider, error) {
	api, err := API(cfg)
	if err != nil {
		return nil, err
	}
	if api == provider.APIResponses {
		r, err := NewResponses(cfg)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	c, err := NewChat(cfg)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// API returns the wire API of an OpenAI provider: cfg.API, or the default
// of cfg.Provider.
func API(cfg provider.Config) (string, error) {
	switch cfg.API {
	case provider.APIResponses, provider.APIChatCompletions:
		return cfg.API, nil
	case "":
		if cfg.Provider == provider.NameOpenAI {
			return provider.APIResponses, nil
		}
		return provider.APIChatCompletions, nil
	}
	return "", fmt.Errorf("provider: %s: Config.API %q is not a known API; want %s or %s",
		cfg.Provider, cfg.API, provider.APIResponses, provider.APIChatCompletions)
}

// clientOptions checks cfg for an OpenAI provider and returns the SDK
// options both APIs share.
func clientOptions(cfg provider.Config) ([]option.RequestOption, error) {
	if cfg.Provider != provider.NameOpenAI && cfg.Provider != provider.NameOpenAICompatible {
		return nil, fmt.Errorf("provider: Config.Provider %q is not an OpenAI provider; want %s or %s",
			cfg.Provider, provider.NameOpenAI, provider.NameOpenAICompatible)
	}
	if err := cfg.Check(cfg.Provider, cfg.Provider == provider.NameOpenAI); err != nil {
		return nil, err
	}
	if _, err := API(cfg); err != nil {
		return nil, err
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	// The services are built without openai.NewClient, which would read
	// OPENAI_* variables from the environment of the runner.
	opts := []option.RequestOption{
		option.WithHTTPClient(cfg.Client()),
		option.WithBaseURL(base),
		// Retries are the SDK's: it retries 408, 409, 429, 5xx and connection
		// errors with exponential backoff, waiting what retry-after-ms or
		// retry-after say (up to two minutes; a longer wait ends the retries).
		option.WithMaxRetries(cfg.Retries()),
		option.WithMiddleware(provider.RetryLog(cfg.Log(), cfg.Provider, cfg.Model)),
		option.WithMiddleware(provider.IdleTimeout(cfg.IdleTimeout())),
		option.WithMiddleware(errorEnvelope),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(string(cfg.APIKey)))
	}
	return opts, nil
}

// apiError turns an SDK error into a *provider.APIError where there is one,
// and leaves every other error (connection, context) as it is.
func apiError(err error) error {
	var oerr *openai.Error
	if errors.As(err, &oerr) {
		e := &provider.APIError{
			StatusCode: oerr.StatusCode,
			Type:       oerr.Type,
			Code:       oerr.Code,
			Message:    oerr.Message,
			Err:        err,
		}
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
		e := &provider.APIError{StatusCode: http.StatusOK, Message: serr.Message, Err: err}
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

// maxErrorBody bounds the error body errorEnvelope reads; a longer one is
// passed on as it is.
const maxErrorBody = 1 << 20

// The keys of OpenAI's error shape, {"error": {"message": ...}}, that
// envelopedError looks for and writes.
const (
	errorKey   = "error"
	messageKey = "message"
)

// errorEnvelope rewrites the error bodies of OpenAI-compatible servers that
// do not nest their error in an object under "error", as OpenAI does, into
// that shape, so that the SDK reads their message: LM Studio sends
// {"error": "text"}, which the SDK fails to decode (and so loses the
// message), and vLLM before 0.8 sent {"object": "error", "message": ...,
// "type": ..., "code": ...}, of which it reads nothing. Every other body is
// passed on as it is.
func errorEnvelope(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 || res.Body == nil {
		return res, err
	}
	body, rerr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody+1))
	if rerr != nil || len(body) > maxErrorBody {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), res.Body), res.Body}
		return res, nil
	}
	_ = res.Body.Close()
	if b, ok := envelopedError(body); ok {
		body = b
		res.ContentLength = int64(len(body))
		res.Header.Del("Content-Length")
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// envelopedError returns body in OpenAI's error shape, and whether it had
// to be changed.
func envelopedError(body []byte) ([]byte, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return nil, false
	}
	var inner map[string]json.RawMessage
	if raw, ok := top[errorKey]; ok {
		var text string
		if json.Unmarshal(raw, &text) != nil {
			return nil, false // an object (OpenAI's shape), or something else
		}
		msg, _ := json.Marshal(text)
		inner = map[string]json.RawMessage{messageKey: msg}
	} else {
		if _, ok := top[messageKey]; !ok {
			return nil, false
		}
		inner = map[string]json.RawMessage{}
		for _, k := range []string{messageKey, "type", "param", "code"} {
			if v, ok := top[k]; ok {
				inner[k] = v
			}
		}
	}
	b, err := json.Marshal(map[string]any{errorKey: inner})
	return b, err == nil
}

// schemaMap is a tool's input schema as the SDK takes it, a map.
func schemaMap(t provider.Tool) (map[string]any, error) {
	obj, err := t.Schema()
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, len(obj))
	for k, v := range obj {
		m[k] = v
	}
	return m, nil
}

// joinText joins texts with blank lines, for the system prompt the
// Responses API takes as one string.
func joinText(texts []string) string { return strings.Join(texts, "\n\n") }

// newCallID makes an id for a tool call a server sent without one: the
// conversation needs it to pair the call with its result.
func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b)
}
