package provider_test

import (
	"testing"

	"github.com/aerie-run/aerie/runner/provider"
)

func TestProviderContextWindow(t *testing.T) {
	for _, tc := range []struct {
		model    string
		override int64
		want     int64
	}{
		{"claude-sonnet-4-5", 0, 200_000},
		{"claude-sonnet-4-5-20250929", 0, 200_000}, // dated snapshot
		{"claude-haiku-4-5-20251001", 0, 200_000},
		{"claude-opus-4-6", 0, 1_000_000},
		{"claude-opus-5-5", 0, 1_000_000},
		{"anthropic/claude-sonnet-4-6", 0, 1_000_000}, // routing prefix (LiteLLM, OpenRouter)
		{"Claude-Sonnet-4-5", 0, 200_000},             // case
		{"gpt-5", 0, 400_000},
		{"gpt-5-2025-08-07", 0, 400_000},
		{"openai/gpt-5-mini", 0, 400_000},
		{"gpt-4.1", 0, 1_047_576},
		{"gpt-5.4", 0, 1_050_000},
		{"o3", 0, 200_000},

		// Unknown: 0.
		{"gpt-5-chat-latest", 0, 0}, // not matched by prefix: its window differs from gpt-5's
		{"claude-sonnet-4-5-extra", 0, 0},
		{"llama3.1:8b", 0, 0},
		{"", 0, 0},

		// The spec's override wins, known model or not.
		{"llama3.1:8b", 131_072, 131_072},
		{"claude-sonnet-4-5", 1_000_000, 1_000_000},
		{"gpt-5", -1, 400_000}, // not an override
	} {
		t.Run(tc.model, func(t *testing.T) {
			t.Parallel()
			if got := provider.ContextWindow(tc.model, tc.override); got != tc.want {
				t.Errorf("ContextWindow(%q, %d) = %d, want %d", tc.model, tc.override, got, tc.want)
			}
		})
	}
}
