package provider_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/provider"
)

func TestProviderNew(t *testing.T) {
	script := filepath.Join(t.TempDir(), "demo.yaml")
	if err := os.WriteFile(script, []byte("turns:\n  - text: hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cfg      provider.Config
		wantName string // of the provider, when New succeeds
		wantType string
		wantErr  []string // substrings of the error
	}{
		{name: "anthropic", cfg: provider.Config{Provider: "anthropic", Model: "claude-sonnet-4-5", APIKey: "k"},
			wantName: "anthropic", wantType: "*provider.Anthropic"},
		{name: "openai defaults to responses", cfg: provider.Config{Provider: "openai", Model: "gpt-5", APIKey: "k"},
			wantName: "openai", wantType: "*provider.OpenAIResponses"},
		{name: "openai chat completions", cfg: provider.Config{Provider: "openai", API: "chat-completions", Model: "gpt-5", APIKey: "k"},
			wantName: "openai", wantType: "*provider.OpenAIChat"},
		{name: "compatible defaults to chat completions", cfg: provider.Config{Provider: "openai-compatible", Model: "llama3", BaseURL: "http://localhost:11434/v1"},
			wantName: "openai-compatible", wantType: "*provider.OpenAIChat"},
		{name: "compatible responses", cfg: provider.Config{Provider: "openai-compatible", API: "responses", Model: "m", BaseURL: "https://litellm.internal/v1"},
			wantName: "openai-compatible", wantType: "*provider.OpenAIResponses"},
		{name: "scripted", cfg: provider.Config{Provider: "scripted", ScriptPath: script},
			wantName: "scripted", wantType: "*provider.Scripted"},

		{name: "empty provider", cfg: provider.Config{},
			wantErr: []string{"Config.Provider is empty", "anthropic, openai, openai-compatible, scripted"}},
		{name: "unknown provider", cfg: provider.Config{Provider: "gemini"},
			wantErr: []string{`Config.Provider "gemini"`, "anthropic, openai, openai-compatible, scripted"}},
		{name: "missing key", cfg: provider.Config{Provider: "anthropic", Model: "claude-sonnet-4-5"},
			wantErr: []string{"anthropic", "Config.APIKey is empty"}},
		{name: "missing key and model", cfg: provider.Config{Provider: "openai"},
			wantErr: []string{"openai", "Config.Model is empty", "Config.APIKey is empty"}},
		{name: "compatible without base URL", cfg: provider.Config{Provider: "openai-compatible", Model: "m"},
			wantErr: []string{"openai-compatible", "Config.BaseURL is empty"}},
		{name: "bad scheme", cfg: provider.Config{Provider: "openai-compatible", Model: "m", BaseURL: "ftp://host/v1"},
			wantErr: []string{`Config.BaseURL "ftp://host/v1"`, "http or https"}},
		{name: "no host", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k", BaseURL: "http:///v1"},
			wantErr: []string{"Config.BaseURL", "with a host"}},
		{name: "unparsable URL", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k", BaseURL: "http://a b/"},
			wantErr: []string{"Config.BaseURL"}},
		{name: "credentials in URL", cfg: provider.Config{Provider: "openai-compatible", Model: "m", BaseURL: "https://user:hunter2@host/v1"},
			wantErr: []string{"must not contain credentials"}},
		{name: "unknown API", cfg: provider.Config{Provider: "openai", API: "completions", Model: "m", APIKey: "k"},
			wantErr: []string{`Config.API "completions"`, "responses or chat-completions"}},
		{name: "API for anthropic", cfg: provider.Config{Provider: "anthropic", API: "responses", Model: "m", APIKey: "k"},
			wantErr: []string{`Config.API "responses"`}},
		{name: "negative output cap", cfg: provider.Config{Provider: "anthropic", Model: "m", APIKey: "k", MaxOutputTokens: -1},
			wantErr: []string{"Config.MaxOutputTokens -1 is negative"}},
		{name: "scripted without script", cfg: provider.Config{Provider: "scripted"},
			wantErr: []string{"scripted", "Config.ScriptPath is empty"}},
		{name: "scripted with key", cfg: provider.Config{Provider: "scripted", ScriptPath: script, APIKey: "k"},
			wantErr: []string{"takes no key"}},
		{name: "scripted missing file", cfg: provider.Config{Provider: "scripted", ScriptPath: filepath.Join(t.TempDir(), "nope.yaml")},
			wantErr: []string{"nope.yaml", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := provider.New(tc.cfg)
			if tc.wantErr != nil {
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

// TestProviderSecret checks that no way of printing a Config shows its key.
func TestProviderSecret(t *testing.T) {
	const key = "sk-very-secret"
	cfg := provider.Config{Provider: "anthropic", Model: "m", APIKey: key}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "config", cfg, "key", cfg.APIKey)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"%v":   fmt.Sprintf("%v", cfg),
		"%+v":  fmt.Sprintf("%+v", cfg),
		"%#v":  fmt.Sprintf("%#v", cfg),
		"%s":   fmt.Sprintf("%s", cfg.APIKey),
		"%q":   fmt.Sprintf("%q", cfg.APIKey),
		"%x":   fmt.Sprintf("%x", cfg.APIKey),
		"slog": logged.String(),
		"json": string(js),
	} {
		if strings.Contains(s, key) || strings.Contains(s, fmt.Sprintf("%x", key)) {
			t.Errorf("%s shows the key: %s", name, s)
		}
		if !strings.Contains(s, "[redacted]") {
			t.Errorf("%s does not say the key is redacted: %s", name, s)
		}
	}
	if string(cfg.APIKey) != key {
		t.Error("string(Secret) does not return the key")
	}
	if got := fmt.Sprint(provider.Secret("")); got != "" {
		t.Errorf("empty secret prints %q, want nothing", got)
	}
}
