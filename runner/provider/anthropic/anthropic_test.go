package anthropic_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/provider/providertest"
)

func kind() providertest.Kind {
	return providertest.Kind{
		Name: "anthropic",
		New:  func(cfg provider.Config) (provider.Provider, error) { return anthropic.New(cfg) },
		Config: func(ms *testenv.ModelServer) provider.Config {
			return provider.Config{Provider: "anthropic", Model: "claude-test", APIKey: providertest.Key, BaseURL: ms.URL()}
		},
		CheckKey: func(t *testing.T, h http.Header) {
			t.Helper()
			if got := h.Get("X-Api-Key"); got != providertest.Key {
				t.Errorf("X-Api-Key = %q, want %q", got, providertest.Key)
			}
			if got := h.Get("Authorization"); got != "" {
				t.Errorf("Authorization = %q, want none", got)
			}
			if got := h.Get("Anthropic-Version"); got == "" {
				t.Error("no anthropic-version header")
			}
		},
		// Anthropic signs its thinking, and accepts it back only signed.
		ReasoningSignature: "modelserver-signature-1",
		RequestBody: `{
			"model": "claude-test", "max_tokens": 1000, "stream": true,
			"cache_control": {"type": "ephemeral"},
			"system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
			"messages": [
				{"role": "user", "content": [{"type": "text", "text": "List the files."}]},
				{"role": "assistant", "content": [
					{"type": "thinking", "thinking": "I should run ls.", "signature": "sig-1"},
					{"type": "text", "text": "Listing."},
					{"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}}]},
				{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "is_error": true,
					"content": [{"type": "text", "text": "ls: permission denied"}]}]}],
			"tools": [{"name": "bash", "description": "Run a command.", "input_schema": ` + providertest.BodySchema + `}]}`,
	}
}

func TestProvider(t *testing.T) {
	providertest.Run(t, kind())
}

func TestNew(t *testing.T) {
	if _, err := anthropic.New(provider.Config{Provider: "anthropic", Model: "claude-sonnet-4-5", APIKey: "k"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cfg     provider.Config
		wantErr []string // substrings of the error
	}{
		{name: "missing key", cfg: provider.Config{Provider: "anthropic", Model: "claude-sonnet-4-5"},
			wantErr: []string{"anthropic", "Config.APIKey is empty"}},
		{name: "missing key and model", cfg: provider.Config{Provider: "anthropic"},
			wantErr: []string{"anthropic", "Config.Model is empty", "Config.APIKey is empty"}},
		{name: "no host", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k", BaseURL: "http:///v1"},
			wantErr: []string{"Config.BaseURL", "with a host"}},
		{name: "unparsable URL", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k", BaseURL: "http://a b/"},
			wantErr: []string{"Config.BaseURL"}},
		{name: "credentials in URL", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k", BaseURL: "https://user:hunter2@host"},
			wantErr: []string{"must not contain credentials"}},
		{name: "API for anthropic", cfg: provider.Config{Provider: "anthropic", API: "responses", Model: "m", APIKey: "k"},
			wantErr: []string{`Config.API "responses"`}},
		{name: "negative output cap", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k", MaxOutputTokens: -1},
			wantErr: []string{"Config.MaxOutputTokens -1 is negative"}},
		{name: "negative timeout", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k", Timeout: -1},
			wantErr: []string{"Config.Timeout -1ns is negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := anthropic.New(tc.cfg)
			if err == nil {
				t.Fatalf("New succeeded, want an error")
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows a password", err)
			}
		})
	}
}
