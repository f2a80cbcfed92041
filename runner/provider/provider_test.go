package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/provider"
)

const testKey = "sk-test-0123456789abcdef"

// kind is one way of reaching a model API, tested against the fake server's
// real wire formats through the real SDKs.
type kind struct {
	name   string
	config func(ms *testenv.ModelServer) provider.Config
	// checkKey checks that the API key arrived in the header the API expects.
	checkKey func(t *testing.T, h http.Header)
}

func kinds() []kind {
	bearer := func(t *testing.T, h http.Header) {
		t.Helper()
		if got, want := h.Get("Authorization"), "Bearer "+testKey; got != want {
			t.Errorf("Authorization = %q, want %q", got, want)
		}
		if got := h.Get("X-Api-Key"); got != "" {
			t.Errorf("X-Api-Key = %q, want none", got)
		}
	}
	return []kind{
		{
			name: "anthropic",
			config: func(ms *testenv.ModelServer) provider.Config {
				return provider.Config{Provider: "anthropic", Model: "claude-test", APIKey: testKey, BaseURL: ms.URL()}
			},
			checkKey: func(t *testing.T, h http.Header) {
				t.Helper()
				if got := h.Get("X-Api-Key"); got != testKey {
					t.Errorf("X-Api-Key = %q, want %q", got, testKey)
				}
				if got := h.Get("Authorization"); got != "" {
					t.Errorf("Authorization = %q, want none", got)
				}
				if got := h.Get("Anthropic-Version"); got == "" {
					t.Error("no anthropic-version header")
				}
			},
		},
		{
			name: "openai-chat",
			config: func(ms *testenv.ModelServer) provider.Config {
				return provider.Config{Provider: "openai", API: "chat-completions", Model: "gpt-test", APIKey: testKey, BaseURL: ms.OpenAIURL()}
			},
			checkKey: bearer,
		},
		{
			name: "openai-responses",
			config: func(ms *testenv.ModelServer) provider.Config {
				return provider.Config{Provider: "openai", Model: "gpt-test", APIKey: testKey, BaseURL: ms.OpenAIURL()}
			},
			checkKey: bearer,
		},
		{
			name: "openai-compatible",
			config: func(ms *testenv.ModelServer) provider.Config {
				return provider.Config{Provider: "openai-compatible", Model: "qwen-test", APIKey: testKey, BaseURL: ms.OpenAIURL()}
			},
			checkKey: bearer,
		},
	}
}

// forEachKind runs test for every kind, in parallel, each against its own
// fake server serving turns.
func forEachKind(t *testing.T, turns []testenv.Turn, test func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider)) {
	t.Helper()
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ms := testenv.StartModelServer(t, turns...)
			p, err := provider.New(k.config(ms))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			test(t, k, ms, p)
		})
	}
}

func userRequest(text string) provider.Request {
	return provider.Request{Messages: []provider.Message{provider.UserMessage(text)}}
}

// collect streams req and returns the parts and the collected response.
func collect(t *testing.T, p provider.Provider, req provider.Request) ([]provider.Part, provider.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var parts []provider.Part
	var acc provider.Accumulator
	for part, err := range p.Stream(ctx, req) {
		if err != nil {
			return parts, provider.Response{}, err
		}
		parts = append(parts, part)
		if err := acc.Add(part); err != nil {
			t.Fatalf("Accumulator.Add(%+v): %v", part, err)
		}
	}
	resp, err := acc.Response()
	return parts, resp, err
}

func countParts(parts []provider.Part, typ provider.PartType, id string) int {
	n := 0
	for _, p := range parts {
		if p.Type == typ && p.ToolCallID == id {
			n++
		}
	}
	return n
}

func TestProviderText(t *testing.T) {
	turn := testenv.Turn{
		Text:  "Hello from the fake model, in several pieces.",
		Usage: testenv.TokenUsage{InputTokens: 1200, OutputTokens: 35, CacheReadTokens: 1000, CacheWriteTokens: 150},
	}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		parts, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		want := provider.Response{
			Message:    provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text(turn.Text)}},
			Usage:      provider.Usage{InputTokens: 1200, OutputTokens: 35, CacheReadTokens: 1000, CacheWriteTokens: 150},
			StopReason: provider.StopEndTurn,
		}
		if diff := cmp.Diff(want, resp); diff != "" {
			t.Errorf("response (-want +got):\n%s", diff)
		}
		if n := countParts(parts, provider.PartTextDelta, ""); n < 2 {
			t.Errorf("%d text deltas, want the text streamed in several", n)
		}
		if last := parts[len(parts)-1]; last.Type != provider.PartFinish {
			t.Errorf("last part is %s, want finish", last.Type)
		}
		if reqs := ms.Requests(); len(reqs) != 1 {
			t.Errorf("%d requests, want 1", len(reqs))
		} else {
			k.checkKey(t, reqs[0].Header)
		}
	})
}

func TestProviderToolCalls(t *testing.T) {
	turn := testenv.Turn{
		Text: "Let me look.",
		ToolCalls: []testenv.ToolCall{
			{ID: "call_a", Name: "bash", Arguments: `{"command":"ls -la /workspace","timeout_seconds":30}`},
			{ID: "call_b", Name: "read_file", Arguments: `{"path":"README.md"}`},
		},
		Usage: testenv.TokenUsage{InputTokens: 500, OutputTokens: 60},
	}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		parts, resp, err := collect(t, p, userRequest("look around"))
		if err != nil {
			t.Fatal(err)
		}
		want := provider.Response{
			Message: provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
				provider.Text("Let me look."),
				provider.ToolCall("call_a", "bash", `{"command":"ls -la /workspace","timeout_seconds":30}`),
				provider.ToolCall("call_b", "read_file", `{"path":"README.md"}`),
			}},
			Usage:      provider.Usage{InputTokens: 500, OutputTokens: 60},
			StopReason: provider.StopToolUse,
		}
		if diff := cmp.Diff(want, resp); diff != "" {
			t.Errorf("response (-want +got):\n%s", diff)
		}
		for _, id := range []string{"call_a", "call_b"} {
			if n := countParts(parts, provider.PartToolCallDelta, id); n < 2 {
				t.Errorf("%s: %d argument deltas, want the arguments streamed in several", id, n)
			}
			if n := countParts(parts, provider.PartToolCallEnd, id); n != 1 {
				t.Errorf("%s: %d ends, want 1", id, n)
			}
		}
	})
}

func TestProviderReasoning(t *testing.T) {
	turn := testenv.Turn{Reasoning: "The user wants a greeting.", Text: "Hello."}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		_, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		reasoning := provider.Content{Type: provider.ContentReasoning, Text: turn.Reasoning}
		if k.name == "anthropic" {
			// Anthropic signs its thinking; the signature must survive to be
			// sent back.
			reasoning.Signature = "modelserver-signature-1"
		}
		want := provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{reasoning, provider.Text("Hello.")}}
		if diff := cmp.Diff(want, resp.Message); diff != "" {
			t.Errorf("message (-want +got):\n%s", diff)
		}
	})
}

func TestProviderStopReasons(t *testing.T) {
	turns := []testenv.Turn{
		{Text: "This answer is cut", StopReason: "max_tokens"},
		{Text: "I can't", StopReason: "refusal"},
		{Text: "Done."},
	}
	forEachKind(t, turns, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		for _, want := range []provider.StopReason{provider.StopMaxTokens, provider.StopRefusal, provider.StopEndTurn} {
			_, resp, err := collect(t, p, userRequest("go"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StopReason != want {
				t.Errorf("stop reason %q, want %q", resp.StopReason, want)
			}
		}
	})
}

// TestProviderRetryAfter checks that a 429 is retried after the wait the
// server asks for: the gap between the two requests the server saw is at
// least the header's value (the SDKs wait exactly that long).
func TestProviderRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
		wait   time.Duration
	}{
		{"retry-after", http.Header{"Retry-After": {"1"}}, time.Second},
		{"retry-after-ms", http.Header{"Retry-After-Ms": {"300"}}, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turn := testenv.Turn{Text: "after the wait", Faults: []testenv.Fault{{Status: http.StatusTooManyRequests, Header: tc.header}}}
			forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
				_, resp, err := collect(t, p, userRequest("hi"))
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.Message.Text(); got != "after the wait" {
					t.Errorf("text %q after the retry", got)
				}
				reqs := ms.Requests()
				if len(reqs) != 2 || !reqs[0].Fault || reqs[1].Fault {
					t.Fatalf("requests %+v, want the fault and one retry", reqs)
				}
				const epsilon = 20 * time.Millisecond // clock granularity, not scheduling
				if gap := reqs[1].Time.Sub(reqs[0].Time); gap < tc.wait-epsilon {
					t.Errorf("retried after %s, want at least %s", gap, tc.wait)
				}
			})
		})
	}
}

func TestProviderServerErrorRetried(t *testing.T) {
	turn := testenv.Turn{Text: "recovered", Faults: []testenv.Fault{{Status: http.StatusInternalServerError}, {Status: http.StatusBadGateway}}}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		_, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Message.Text(); got != "recovered" {
			t.Errorf("text %q", got)
		}
		if n := len(ms.Requests()); n != 3 {
			t.Errorf("%d requests, want 3 (two faults, then the answer)", n)
		}
	})
}

func TestProviderRetriesBounded(t *testing.T) {
	faults := make([]testenv.Fault, 3)
	for i := range faults {
		faults[i] = testenv.Fault{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After-Ms": {"10"}}}
	}
	forEachKind(t, []testenv.Turn{{Text: "never", Faults: faults}}, func(t *testing.T, k kind, ms *testenv.ModelServer, _ provider.Provider) {
		cfg := k.config(ms)
		cfg.MaxRetries = 1
		p, err := provider.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = collect(t, p, userRequest("hi"))
		var aerr *provider.APIError
		if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("error %v, want the 503", err)
		}
		if n := len(ms.Requests()); n != 2 {
			t.Errorf("%d requests, want 2 (MaxRetries 1)", n)
		}
	})
}

func TestProviderBadRequestNotRetried(t *testing.T) {
	turn := testenv.Turn{Text: "unused", Faults: []testenv.Fault{{Status: http.StatusBadRequest, Message: "messages.0: the field content is required"}}}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		_, _, err := collect(t, p, userRequest("hi"))
		if err == nil {
			t.Fatal("no error")
		}
		var aerr *provider.APIError
		if !errors.As(err, &aerr) {
			t.Fatalf("error %v (%T) is not an APIError", err, err)
		}
		if aerr.StatusCode != http.StatusBadRequest || aerr.Message != "messages.0: the field content is required" {
			t.Errorf("APIError %+v", aerr)
		}
		for _, s := range []string{"400", "messages.0: the field content is required", p.Name()} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
		if strings.Contains(err.Error(), testKey) {
			t.Errorf("error %q shows the API key", err)
		}
		if n := len(ms.Requests()); n != 1 {
			t.Errorf("%d requests, want 1: a 400 is not retried", n)
		}
	})
}

func TestProviderContextOverflow(t *testing.T) {
	turn := testenv.Turn{Faults: []testenv.Fault{{
		Status:  http.StatusBadRequest,
		Message: "prompt is too long: 210000 tokens > 200000 maximum",
		Code:    "context_length_exceeded",
	}}}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		_, _, err := collect(t, p, userRequest("a very long prompt"))
		if !errors.Is(err, provider.ErrContextOverflow) {
			t.Errorf("error %v is not ErrContextOverflow", err)
		}
	})
}

func TestProviderTimeout(t *testing.T) {
	forEachKind(t, []testenv.Turn{{Text: "too late", Delay: time.Minute}}, func(t *testing.T, k kind, ms *testenv.ModelServer, _ provider.Provider) {
		cfg := k.config(ms)
		cfg.Timeout = 200 * time.Millisecond
		p, err := provider.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = collect(t, p, userRequest("hi"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want context.DeadlineExceeded", err)
		}
		if !strings.Contains(err.Error(), "200ms timeout") {
			t.Errorf("error %q does not name the timeout", err)
		}
	})
}

func TestProviderStreamError(t *testing.T) {
	turn := testenv.Turn{Text: "partial answer", StreamError: "the model is overloaded"}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		parts, _, err := collect(t, p, userRequest("hi"))
		var aerr *provider.APIError
		if !errors.As(err, &aerr) || !strings.Contains(aerr.Message, "the model is overloaded") {
			t.Fatalf("error %v, want an APIError with the stream's message", err)
		}
		if countParts(parts, provider.PartTextDelta, "") == 0 {
			t.Error("the text before the error was not streamed")
		}
		for _, p := range parts {
			if p.Type == provider.PartFinish {
				t.Error("a finish part before the error")
			}
		}
	})
}

// TestProviderMalformedToolCall checks that a tool call the model botched
// (arguments that are not JSON, a tool that does not exist) reaches the
// caller as it is, for the agent loop to answer with an error result.
func TestProviderMalformedToolCall(t *testing.T) {
	turn := testenv.Turn{ToolCalls: []testenv.ToolCall{{ID: "call_x", Name: "no_such_tool", Arguments: `{"path": "README.md"`}}}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		_, resp, err := collect(t, p, userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		want := []provider.Content{provider.ToolCall("call_x", "no_such_tool", `{"path": "README.md"`)}
		if diff := cmp.Diff(want, resp.Message.ToolCalls()); diff != "" {
			t.Errorf("tool calls (-want +got):\n%s", diff)
		}
	})
}

// TestProviderConversation sends a second request with the first answer and
// the tool results in it, as the agent loop does.
func TestProviderConversation(t *testing.T) {
	turns := []testenv.Turn{
		{ToolCalls: []testenv.ToolCall{{Name: "bash", Arguments: `{"command":"ls"}`}}},
		{Text: "There are two files."},
	}
	forEachKind(t, turns, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		req := provider.Request{Messages: []provider.Message{provider.SystemMessage("Be brief."), provider.UserMessage("What is here?")}}
		_, first, err := collect(t, p, req)
		if err != nil {
			t.Fatal(err)
		}
		calls := first.Message.ToolCalls()
		if len(calls) != 1 || calls[0].ToolCallID != "call_1_1" {
			t.Fatalf("tool calls %+v", calls)
		}
		req.Messages = append(req.Messages, first.Message,
			provider.Message{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult(calls[0].ToolCallID, "a.go\nb.go\n", false)}})
		_, second, err := collect(t, p, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := second.Message.Text(); got != "There are two files." {
			t.Errorf("second answer %q", got)
		}
		if ms.Remaining() != 0 {
			t.Errorf("%d turns left", ms.Remaining())
		}
	})
}

// TestProviderRequestBody checks the request each API receives for one
// conversation: system prompt, user text, an assistant tool call and its
// failed result, a tool definition and an output cap.
func TestProviderRequestBody(t *testing.T) {
	schema := `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`
	req := provider.Request{
		Messages: []provider.Message{
			provider.SystemMessage("You are terse."),
			provider.UserMessage("List the files."),
			{Role: provider.RoleAssistant, Content: []provider.Content{
				{Type: provider.ContentReasoning, Text: "I should run ls.", Signature: "sig-1"},
				provider.Text("Listing."),
				provider.ToolCall("call_1", "bash", `{"command":"ls"}`),
			}},
			{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("call_1", "ls: permission denied", true)}},
		},
		Tools:           []provider.Tool{{Name: "bash", Description: "Run a command.", InputSchema: json.RawMessage(schema)}},
		MaxOutputTokens: 1000,
	}
	chatMessages := `[
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": "List the files."},
		{"role": "assistant", "content": "Listing.", "tool_calls": [
			{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "ls: permission denied"}]`
	chatTools := `[{"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": ` + schema + `}}]`
	want := map[string]string{
		"anthropic": `{
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
			"tools": [{"name": "bash", "description": "Run a command.", "input_schema": ` + schema + `}]}`,
		"openai-chat": `{
			"model": "gpt-test", "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 1000,
			"messages": ` + chatMessages + `, "tools": ` + chatTools + `}`,
		"openai-compatible": `{
			"model": "qwen-test", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 1000,
			"messages": ` + chatMessages + `, "tools": ` + chatTools + `}`,
		"openai-responses": `{
			"model": "gpt-test", "stream": true, "store": false, "max_output_tokens": 1000,
			"instructions": "You are terse.",
			"input": [
				{"role": "user", "content": "List the files."},
				{"role": "assistant", "content": "Listing."},
				{"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{\"command\":\"ls\"}"},
				{"type": "function_call_output", "call_id": "call_1", "output": "ls: permission denied"}],
			"tools": [{"type": "function", "name": "bash", "description": "Run a command.", "parameters": ` + schema + `, "strict": false}]}`,
	}
	forEachKind(t, []testenv.Turn{{Text: "ok"}}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		if _, _, err := collect(t, p, req); err != nil {
			t.Fatal(err)
		}
		var wantBody, gotBody map[string]any
		if err := json.Unmarshal([]byte(want[k.name]), &wantBody); err != nil {
			t.Fatalf("want: %v", err)
		}
		if err := ms.Requests()[0].Decode(&gotBody); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantBody, gotBody); diff != "" {
			t.Errorf("request body (-want +got):\n%s", diff)
		}
	})
}

// TestProviderIgnoresEnvironment checks that the SDKs' environment variables
// do not reach the clients: the key and endpoint are the Config's alone.
func TestProviderIgnoresEnvironment(t *testing.T) {
	for _, v := range []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"} {
		t.Setenv(v, "http://127.0.0.1:1")
	}
	for _, v := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"} {
		t.Setenv(v, "from-the-environment")
	}
	t.Setenv("OPENAI_ORG_ID", "org-from-the-environment")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			ms := testenv.StartModelServer(t, testenv.Turn{Text: "ok"})
			p, err := provider.New(k.config(ms))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := collect(t, p, userRequest("hi")); err != nil {
				t.Fatal(err)
			}
			h := ms.Requests()[0].Header
			k.checkKey(t, h)
			for _, name := range []string{"OpenAI-Organization", "X-Leak"} {
				if v := h.Get(name); v != "" {
					t.Errorf("%s: %q from the environment", name, v)
				}
			}
		})
	}
}

func TestProviderEarlyBreak(t *testing.T) {
	turn := testenv.Turn{Text: "a long answer the caller stops reading"}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
		for part, err := range p.Stream(t.Context(), userRequest("hi")) {
			if err != nil {
				t.Fatal(err)
			}
			if part.Type == provider.PartTextDelta {
				break
			}
		}
	})
}

func TestProviderInvalidRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  provider.Request
		want string
	}{
		{"no messages", provider.Request{}, "no messages"},
		{"late system message", provider.Request{Messages: []provider.Message{provider.UserMessage("hi"), provider.SystemMessage("late")}}, "messages[1]: a system message after the conversation started"},
		{"tool result from the user", provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: []provider.Content{provider.ToolResult("c", "x", false)}}}}, "messages[0].content[0]: tool_result content in a user message"},
		{"unknown role", provider.Request{Messages: []provider.Message{{Role: "robot"}}}, `unknown role "robot"`},
		{"schema not an object", provider.Request{Messages: []provider.Message{provider.UserMessage("hi")}, Tools: []provider.Tool{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}}, `tool "t": the input schema is not a JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachKind(t, nil, func(t *testing.T, k kind, ms *testenv.ModelServer, p provider.Provider) {
				_, _, err := collect(t, p, tc.req)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want one that says %q", err, tc.want)
				}
				if n := len(ms.Requests()); n != 0 {
					t.Errorf("%d requests sent for an invalid request", n)
				}
			})
		})
	}
}

// TestProviderRetryLog checks that each retried attempt is logged with what
// an operator needs (status, the server's wait), and never with the key.
func TestProviderRetryLog(t *testing.T) {
	turn := testenv.Turn{Text: "ok", Faults: []testenv.Fault{{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After-Ms": {"10"}}}}}
	forEachKind(t, []testenv.Turn{turn}, func(t *testing.T, k kind, ms *testenv.ModelServer, _ provider.Provider) {
		var logged syncBuffer
		cfg := k.config(ms)
		cfg.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
		p, err := provider.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := collect(t, p, userRequest("hi")); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
		if len(lines) != 1 {
			t.Fatalf("logged %q, want one record for the one failed attempt", lines)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]any{"status": 429.0, "retry_after_ms": "10", "attempt": "0", "model": cfg.Model, "provider": p.Name()} {
			if rec[key] != want {
				t.Errorf("%s = %v, want %v in %s", key, rec[key], want, lines[0])
			}
		}
		if strings.Contains(logged.String(), testKey) {
			t.Errorf("the log shows the key: %s", logged.String())
		}
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
