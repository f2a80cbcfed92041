package anthropic_test

import (
	"net/http"
	"slices"
	"strconv"
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
			"system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
			"messages": [
				{"role": "user", "content": [{"type": "text", "text": "List the files."}]},
				{"role": "assistant", "content": [
					{"type": "thinking", "thinking": "I should run ls.", "signature": "sig-1"},
					{"type": "text", "text": "Listing."},
					{"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}}]},
				{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "is_error": true,
					"cache_control": {"type": "ephemeral"},
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

// TestCacheBreakpoints checks where the requests put their cache
// breakpoints, on the wire: one on the system prompt's last block, which
// keeps the tools and the system prompt cached, and one on the last block
// of the conversation that can carry one (thinking cannot), which moves
// with the conversation; none elsewhere, and never more than the API's
// four.
func TestCacheBreakpoints(t *testing.T) {
	t.Parallel()
	conv := []provider.Message{
		provider.SystemMessage("You are terse."),
		provider.SystemMessage("Work in /src."),
		provider.UserMessage("List the files."),
		{Role: provider.RoleAssistant, Content: []provider.Content{provider.ToolCall("call_1", "bash", `{"command":"ls"}`)}},
		{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("call_1", "a.go", false)}},
	}
	thinking := provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
		provider.Text("Listed."),
		{Type: provider.ContentReasoning, Text: "done", Signature: "sig"},
	}}
	tools := []provider.Tool{{Name: "bash", Description: "Run a command."}, {Name: "read", Description: "Read a file."}}
	for _, tc := range []struct {
		name string
		conv []provider.Message
		want string // the path of the rolling breakpoint's block
	}{
		{name: "tool result", conv: conv, want: "messages.2.content.0"},
		{name: "prompt", conv: append(conv[:len(conv):len(conv)], provider.UserMessage("Now build.")), want: "messages.2.content.1"},
		{name: "thinking last", conv: append(conv[:len(conv):len(conv)], thinking), want: "messages.3.content.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ms := testenv.StartModelServer(t, testenv.Turn{Text: "ok"})
			p, err := anthropic.New(kind().Config(ms))
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range p.Stream(t.Context(), provider.Request{Messages: tc.conv, Tools: tools}) {
				if err != nil {
					t.Fatal(err)
				}
			}
			var body any
			if err := ms.Requests()[0].Decode(&body); err != nil {
				t.Fatal(err)
			}
			var got []string
			breakpoints(body, "", &got)
			want := []string{tc.want, "system.1"}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("cache breakpoints at %q, want %q", got, want)
			}
		})
	}
}

// breakpoints appends the paths of the objects in v that carry a
// cache_control of type ephemeral, in the order of their keys.
func breakpoints(v any, path string, out *[]string) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch v := v.(type) {
	case map[string]any:
		if cc, ok := v["cache_control"].(map[string]any); ok && cc["type"] == "ephemeral" {
			*out = append(*out, path)
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			breakpoints(v[k], join(k), out)
		}
	case []any:
		for i, e := range v {
			breakpoints(e, join(strconv.Itoa(i)), out)
		}
	}
}
