package openai_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/openai"
	"github.com/aerie-run/aerie/runner/provider/providertest"
)

// Servers that implement an API after the fact (Ollama, vLLM, proxies) take
// liberties the fake model server does not: these tests replay such streams
// verbatim.

func TestQuirks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     provider.Config
		stream  string
		want    provider.Response
		wantErr string
	}{
		{
			// Ollama: the whole call in one chunk, no id, finish reason "stop", no usage.
			name: "chat call without id",
			cfg:  provider.Config{Provider: "openai-compatible", Model: "llama3"},
			stream: `data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},"finish_reason":null}]}

data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: provider.Response{
				Message:    provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.ToolCall("<generated>", "bash", `{"command":"ls"}`)}},
				StopReason: provider.StopToolUse,
			},
		},
		{
			// vLLM and DeepSeek: reasoning in reasoning_content, Ollama in reasoning.
			name: "chat reasoning fields",
			cfg:  provider.Config{Provider: "openai-compatible", Model: "qwen3"},
			stream: `data: {"id":"1","choices":[{"index":0,"delta":{"reasoning_content":"think "},"finish_reason":null}]}

data: {"id":"1","choices":[{"index":0,"delta":{"reasoning":"more"},"finish_reason":null}]}

data: {"id":"1","choices":[{"index":0,"delta":{"content":"answer"},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: provider.Response{
				Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
					{Type: provider.ContentReasoning, Text: "think more"}, provider.Text("answer"),
				}},
				StopReason: provider.StopEndTurn,
			},
		},
		{
			name:    "chat stream cut off",
			cfg:     provider.Config{Provider: "openai-compatible", Model: "m"},
			stream:  "data: {\"id\":\"1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"},\"finish_reason\":null}]}\n\n",
			wantErr: "openai-compatible: stream chat completion: stream ended before the response was complete",
		},
		{
			// Items announced only when done, with no deltas.
			name: "responses without deltas",
			cfg:  provider.Config{Provider: "openai-compatible", API: "responses", Model: "m"},
			stream: `event: response.output_item.done
data: {"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Here.","annotations":[]}]}}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_9","name":"bash","arguments":"{}"}}

event: response.completed
data: {"type":"response.completed","response":{"id":"r","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}}

`,
			want: provider.Response{
				Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
					provider.Text("Here."), provider.ToolCall("call_9", "bash", "{}"),
				}},
				Usage:      provider.Usage{InputTokens: 3, OutputTokens: 4},
				StopReason: provider.StopToolUse,
			},
		},
		{
			name: "responses failed",
			cfg:  provider.Config{Provider: "openai-compatible", API: "responses", Model: "m"},
			stream: `event: response.failed
data: {"type":"response.failed","response":{"id":"r","status":"failed","output":[],"error":{"code":"server_error","message":"the model crashed"}}}

`,
			wantErr: "server_error: the model crashed",
		},
		{
			name: "responses stream cut off",
			cfg:  provider.Config{Provider: "openai-compatible", API: "responses", Model: "m"},
			stream: `event: response.output_text.delta
data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"half"}

`,
			wantErr: "openai-compatible: stream response: stream ended before the response was complete",
		},
		{
			name: "responses arguments without their call",
			cfg:  provider.Config{Provider: "openai-compatible", API: "responses", Model: "m"},
			stream: `event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{}"}

`,
			wantErr: `openai-compatible: stream response: arguments for function call item "fc_1" that never started`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.BaseURL = providertest.ServeStream(t, tc.stream)
			tc.cfg.MaxRetries = -1
			p, err := openai.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := provider.Collect(p.Stream(t.Context(), provider.Request{Messages: []provider.Message{provider.UserMessage("hi")}}))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A generated id is random; check its form, then compare the rest.
			for i, c := range got.Message.Content {
				if i < len(tc.want.Message.Content) && tc.want.Message.Content[i].ToolCallID == "<generated>" {
					if !strings.HasPrefix(c.ToolCallID, "call_") || len(c.ToolCallID) < 10 {
						t.Errorf("generated id %q", c.ToolCallID)
					}
					got.Message.Content[i].ToolCallID = "<generated>"
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}
