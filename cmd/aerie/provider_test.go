package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/provider"
)

func TestNewProvider(t *testing.T) {
	script := filepath.Join(t.TempDir(), "demo.yaml")
	if err := os.WriteFile(script, []byte("turns:\n  - text: hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cfg      provider.Config
		wantName string // of the provider, when newProvider succeeds
		wantType string
		wantErr  []string // substrings of the error
	}{
		{name: "anthropic", cfg: provider.Config{Provider: "anthropic", Model: "claude-sonnet-4-5", APIKey: "k"},
			wantName: "anthropic", wantType: "*anthropic.Messages"},
		{name: "openai defaults to responses", cfg: provider.Config{Provider: "openai", Model: "gpt-5", APIKey: "k"},
			wantName: "openai", wantType: "*openai.Responses"},
		{name: "openai chat completions", cfg: provider.Config{Provider: "openai", API: "chat-completions", Model: "gpt-5", APIKey: "k"},
			wantName: "openai", wantType: "*openai.Chat"},
		{name: "compatible defaults to chat completions", cfg: provider.Config{Provider: "openai-compatible", Model: "llama3", BaseURL: "http://localhost:11434/v1"},
			wantName: "openai-compatible", wantType: "*openai.Chat"},
		{name: "scripted", cfg: provider.Config{Provider: "scripted", ScriptPath: script},
			wantName: "scripted", wantType: "*provider.Scripted"},

		{name: "empty provider", cfg: provider.Config{},
			wantErr: []string{"Config.Provider is empty", "anthropic, openai, openai-compatible, scripted"}},
		{name: "unknown provider", cfg: provider.Config{Provider: "gemini"},
			wantErr: []string{`Config.Provider "gemini"`, "anthropic, openai, openai-compatible, scripted"}},
		{name: "anthropic without key", cfg: provider.Config{Provider: "anthropic", Model: "claude-sonnet-4-5"},
			wantErr: []string{"anthropic", "Config.APIKey is empty"}},
		{name: "openai without key", cfg: provider.Config{Provider: "openai", Model: "gpt-5"},
			wantErr: []string{"openai", "Config.APIKey is empty"}},
		{name: "scripted without script", cfg: provider.Config{Provider: "scripted"},
			wantErr: []string{"scripted", "Config.ScriptPath is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := newProvider(tc.cfg)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("newProvider succeeded, want an error")
				}
				if p != nil {
					t.Errorf("newProvider returned %#v with its error", p)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
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

// TestWarmRequestEncodesWhatIsSent: every provider warmProvider warms can
// encode a request without sending it, and what it encodes for the warm
// request is the body the fake server receives for the same request (less
// "stream", which the SDKs add on sending), so the warm request goes
// through the encoders a real one does.
func TestWarmRequestEncodesWhatIsSent(t *testing.T) {
	for _, cfg := range []provider.Config{
		{Provider: provider.NameAnthropic},
		{Provider: provider.NameOpenAI, API: provider.APIResponses},
		{Provider: provider.NameOpenAICompatible, API: provider.APIChatCompletions},
	} {
		t.Run(cfg.Provider+"/"+cfg.API, func(t *testing.T) {
			t.Parallel()
			ms := testenv.StartModelServer(t, testenv.Turn{Text: "ok"})
			cfg.Model, cfg.APIKey, cfg.BaseURL = "m", "k", ms.URL()
			if cfg.Provider != provider.NameAnthropic {
				cfg.BaseURL = ms.OpenAIURL()
			}
			p, err := newProvider(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range p.Stream(t.Context(), warmRequest()) {
				if err != nil {
					t.Fatal(err)
				}
			}
			e, ok := p.(encoder)
			if !ok {
				t.Fatalf("%T cannot encode a request without sending it", p)
			}
			encoded, err := e.Encode(warmRequest())
			if err != nil {
				t.Fatal(err)
			}
			var sent, warm map[string]any
			if err := json.Unmarshal(ms.Requests()[0].Body, &sent); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(encoded, &warm); err != nil {
				t.Fatalf("Encode made %s: %v", encoded, err)
			}
			delete(sent, "stream")
			delete(warm, "stream")
			if diff := cmp.Diff(sent, warm); diff != "" {
				t.Errorf("encoded body differs from the sent one (-sent +encoded):\n%s", diff)
			}
			if _, ok := warm["tools"]; !ok {
				t.Errorf("the warm request has no tools: %s", encoded)
			}
		})
	}
}
