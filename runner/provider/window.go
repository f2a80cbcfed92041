package provider

import (
	"regexp"
	"strings"
	"sync"
)

// ContextWindow returns the context window of model in tokens: override when
// it is positive (the AgentSession's spec.model.contextWindow), else the
// window aerie knows for the model, else 0, which means unknown.
//
// Model names are matched exactly, after dropping a routing prefix
// ("anthropic/claude-opus-4-6", as LiteLLM and OpenRouter spell them) and a
// date suffix ("claude-sonnet-4-5-20250929", "gpt-5-2025-08-07"). Names are
// not matched by prefix, because variants of one family differ: gpt-5 has
// 400K tokens, gpt-5-chat-latest 128K.
func ContextWindow(model string, override int64) int64 {
	if override > 0 {
		return override
	}
	for _, name := range ModelKeys(model) {
		if w := knownContextWindow(name); w > 0 {
			return w
		}
	}
	return 0
}

// ModelKeys are the names aerie's tables of models (context windows,
// prices) look model up by, in order: lowercased without a routing prefix
// ("anthropic/claude-opus-4-6"), then also without a date suffix
// ("claude-sonnet-4-5-20250929").
func ModelKeys(model string) []string {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if undated := dateSuffix().ReplaceAllString(name, ""); undated != name {
		return []string{name, undated}
	}
	return []string{name}
}

var dateSuffix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2})$`) })

// knownContextWindow is the table of models whose window the providers'
// documentation states. Anthropic models listed at 200K offer 1M only behind a
// beta header, which aerie does not send. A model missing here has its window
// from spec.model.contextWindow.
func knownContextWindow(name string) int64 {
	switch name {
	// Anthropic.
	case "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5", "claude-fable-5-1",
		"claude-opus-5", "claude-sonnet-5",
		"claude-opus-4-8", "claude-opus-4-7", "claude-opus-4-6", "claude-sonnet-4-6":
		return 1_000_000
	case "claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5",
		"claude-opus-4-1", "claude-opus-4-0", "claude-opus-4", "claude-sonnet-4-0", "claude-sonnet-4":
		return 200_000
	// OpenAI.
	case "gpt-5.4":
		return 1_050_000
	case "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano":
		return 1_047_576
	case "gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-5.1", "gpt-5.4-mini":
		return 400_000
	case "o3", "o4-mini":
		return 200_000
	case "gpt-4o", "gpt-4o-mini":
		return 128_000
	}
	return 0
}
