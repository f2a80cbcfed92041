package anthropic_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/provider/providertest"
)

// Servers that implement the API after the fact (proxies) take liberties the
// fake model server does not: these tests replay such streams verbatim.

func TestQuirks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     provider.Config
		stream  string
		want    provider.Response
		wantErr string
	}{
		{
			// A proxy replaying a non-streamed answer: the input arrives with the
			// start of the block, without deltas; a redacted thinking block.
			name: "input without deltas",
			cfg:  provider.Config{Provider: "anthropic", Model: "claude-test", APIKey: "k"},
			stream: `event: message_start
data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"opaque"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}

event: message_stop
data: {"type":"message_stop"}

`,
			want: provider.Response{
				Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
					{Type: provider.ContentReasoning, Signature: "opaque", Redacted: true},
					provider.ToolCall("toolu_1", "bash", `{"command":"ls"}`),
				}},
				Usage:      provider.Usage{InputTokens: 5, OutputTokens: 9},
				StopReason: provider.StopToolUse,
			},
		},
		{
			name: "stream cut off",
			cfg:  provider.Config{Provider: "anthropic", Model: "claude-test", APIKey: "k"},
			stream: `event: message_start
data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"half"}}

`,
			wantErr: "stream ended before the response was complete",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.BaseURL = providertest.ServeStream(t, tc.stream)
			tc.cfg.MaxRetries = -1
			p, err := anthropic.New(tc.cfg)
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
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}
