package openai_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/openai"
	"github.com/aerie-run/aerie/runner/provider/providertest"
)

// The request bodies of providertest.BodyRequest's conversation.
const (
	chatMessages = `[
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": "List the files."},
		{"role": "assistant", "content": "Listing.", "tool_calls": [
			{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "ls: permission denied"}]`
	chatTools = `[{"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": ` + providertest.BodySchema + `}}]`
)

func kinds() []providertest.Kind {
	bearer := func(t *testing.T, h http.Header) {
		t.Helper()
		if got, want := h.Get("Authorization"), "Bearer "+providertest.Key; got != want {
			t.Errorf("Authorization = %q, want %q", got, want)
		}
		if got := h.Get("X-Api-Key"); got != "" {
			t.Errorf("X-Api-Key = %q, want none", got)
		}
	}
	return []providertest.Kind{
		{
			Name: "openai-chat",
			New:  openai.New,
			Config: func(ms *testenv.ModelServer) provider.Config {
				return provider.Config{Provider: "openai", API: "chat-completions", Model: "gpt-test", APIKey: providertest.Key, BaseURL: ms.OpenAIURL()}
			},
			CheckKey: bearer,
			Servers:  []testenv.CompatibleServer{testenv.ServerVLLM, testenv.ServerVLLMLegacy, testenv.ServerLlamaCpp, testenv.ServerOllama, testenv.ServerLMStudio},
			RequestBody: `{
				"model": "gpt-test", "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 1000,
				"messages": ` + chatMessages + `, "tools": ` + chatTools + `}`,
		},
		{
			Name: "openai-responses",
			New:  openai.New,
			Config: func(ms *testenv.ModelServer) provider.Config {
				return provider.Config{Provider: "openai", Model: "gpt-test", APIKey: providertest.Key, BaseURL: ms.OpenAIURL()}
			},
			CheckKey: bearer,
			RequestBody: `{
				"model": "gpt-test", "stream": true, "store": false, "max_output_tokens": 1000,
				"instructions": "You are terse.",
				"input": [
					{"role": "user", "content": "List the files."},
					{"role": "assistant", "content": "Listing."},
					{"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{\"command\":\"ls\"}"},
					{"type": "function_call_output", "call_id": "call_1", "output": "ls: permission denied"}],
				"tools": [{"type": "function", "name": "bash", "description": "Run a command.", "parameters": ` + providertest.BodySchema + `, "strict": false}]}`,
		},
		{
			Name: "openai-compatible",
			New:  openai.New,
			Config: func(ms *testenv.ModelServer) provider.Config {
				return provider.Config{Provider: "openai-compatible", Model: "qwen-test", APIKey: providertest.Key, BaseURL: ms.OpenAIURL()}
			},
			CheckKey: bearer,
			RequestBody: `{
				"model": "qwen-test", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 1000,
				"messages": ` + chatMessages + `, "tools": ` + chatTools + `}`,
		},
	}
}

func TestProvider(t *testing.T) {
	providertest.Run(t, kinds()...)
}

// TestNew checks the wire API each configuration selects, and the errors
// of configurations that select none.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      provider.Config
		wantName string // of the provider, when New succeeds
		wantType string
		wantErr  []string // substrings of the error
	}{
		{name: "openai defaults to responses", cfg: provider.Config{Provider: "openai", Model: "gpt-5", APIKey: "k"},
			wantName: "openai", wantType: "*openai.Responses"},
		{name: "openai chat completions", cfg: provider.Config{Provider: "openai", API: "chat-completions", Model: "gpt-5", APIKey: "k"},
			wantName: "openai", wantType: "*openai.Chat"},
		{name: "compatible defaults to chat completions", cfg: provider.Config{Provider: "openai-compatible", Model: "llama3", BaseURL: "http://localhost:11434/v1"},
			wantName: "openai-compatible", wantType: "*openai.Chat"},
		{name: "compatible responses", cfg: provider.Config{Provider: "openai-compatible", API: "responses", Model: "m", BaseURL: "https://litellm.internal/v1"},
			wantName: "openai-compatible", wantType: "*openai.Responses"},

		{name: "missing key and model", cfg: provider.Config{Provider: "openai"},
			wantErr: []string{"openai", "Config.Model is empty", "Config.APIKey is empty"}},
		{name: "compatible without base URL", cfg: provider.Config{Provider: "openai-compatible", Model: "m"},
			wantErr: []string{"openai-compatible", "Config.BaseURL is empty"}},
		{name: "bad scheme", cfg: provider.Config{Provider: "openai-compatible", Model: "m", BaseURL: "ftp://host/v1"},
			wantErr: []string{`Config.BaseURL "ftp://host/v1"`, "http or https"}},
		{name: "credentials in URL", cfg: provider.Config{Provider: "openai-compatible", Model: "m", BaseURL: "https://user:hunter2@host/v1"},
			wantErr: []string{"must not contain credentials"}},
		{name: "unknown API", cfg: provider.Config{Provider: "openai", API: "completions", Model: "m", APIKey: "k"},
			wantErr: []string{`Config.API "completions"`, "responses or chat-completions"}},
		{name: "not an OpenAI provider", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k"},
			wantErr: []string{`Config.Provider "anthropic" is not an OpenAI provider`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := openai.New(tc.cfg)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("New succeeded, want an error")
				}
				if p != nil {
					t.Errorf("New returned %#v with its error", p)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error %q shows a password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name() != tc.wantName {
				t.Errorf("Name() = %q, want %q", p.Name(), tc.wantName)
			}
			if got := fmt.Sprintf("%T", p); got != tc.wantType {
				t.Errorf("type %s, want %s", got, tc.wantType)
			}
		})
	}
}
