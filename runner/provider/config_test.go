package provider_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/provider"
)

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
