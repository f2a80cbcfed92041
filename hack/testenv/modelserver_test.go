package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// The fake server's wire formats are checked against the SDKs' own parsers
// and accumulators: if the real clients read a turn back exactly, the format
// is right where it matters.

var modelTestTurn = Turn{
	Reasoning: "The user wants the files listed.",
	Text:      "Listing the files — in pieces.",
	ToolCalls: []ToolCall{{ID: "call_ls", Name: "bash", Arguments: `{"command":"ls -la"}`}},
	Usage:     TokenUsage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 10},
}

func anthropicTestClient(ms *ModelServer) *anthropic.Client {
	c := anthropic.NewClient(
		anthropicoption.WithoutEnvironmentDefaults(),
		anthropicoption.WithBaseURL(ms.URL()),
		anthropicoption.WithHeader("x-api-key", "test-key"),
		anthropicoption.WithMaxRetries(0),
	)
	return &c
}

func openAITestClient(ms *ModelServer) *openai.Client {
	c := openai.NewClient(
		openaioption.WithBaseURL(ms.OpenAIURL()),
		openaioption.WithAPIKey("test-key"),
		openaioption.WithMaxRetries(0),
	)
	return &c
}

func modelTestContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var anthropicTestParams = anthropic.MessageNewParams{
	Model:     "claude-test",
	MaxTokens: 100,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
}

func checkAnthropicMessage(t *testing.T, msg anthropic.Message) {
	t.Helper()
	type block struct{ Type, Text, Thinking, Signature, ID, Name, Input string }
	var got []block
	for _, c := range msg.Content {
		got = append(got, block{Type: c.Type, Text: c.Text, Thinking: c.Thinking, Signature: c.Signature, ID: c.ID, Name: c.Name, Input: string(c.Input)})
	}
	want := []block{
		{Type: "thinking", Thinking: modelTestTurn.Reasoning, Signature: "modelserver-signature-1"},
		{Type: "text", Text: modelTestTurn.Text},
		{Type: "tool_use", ID: "call_ls", Name: "bash", Input: `{"command":"ls -la"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("stop reason %q", msg.StopReason)
	}
	u := msg.Usage
	if u.InputTokens != 60 || u.CacheReadInputTokens != 30 || u.CacheCreationInputTokens != 10 || u.OutputTokens != 20 {
		t.Errorf("usage %s, want cached tokens apart from 60 input tokens", u.RawJSON())
	}
}

func TestModelServerAnthropic(t *testing.T) {
	t.Parallel()
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, modelTestTurn)
		stream := anthropicTestClient(ms).Messages.NewStreaming(modelTestContext(t), anthropicTestParams)
		defer stream.Close()
		var msg anthropic.Message
		var deltas int
		for stream.Next() {
			ev := stream.Current()
			if ev.Type == "content_block_delta" {
				deltas++
			}
			// The SDK's accumulator checks block indexes and event order.
			if err := msg.Accumulate(ev); err != nil {
				t.Fatalf("accumulate %s: %v", ev.Type, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		checkAnthropicMessage(t, msg)
		if deltas < 7 {
			t.Errorf("%d deltas; want the reasoning, text and arguments in several each", deltas)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, modelTestTurn)
		msg, err := anthropicTestClient(ms).Messages.New(modelTestContext(t), anthropicTestParams)
		if err != nil {
			t.Fatal(err)
		}
		checkAnthropicMessage(t, *msg)
	})
	t.Run("stream error", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, Turn{Text: "partial", StreamError: "overloaded"})
		stream := anthropicTestClient(ms).Messages.NewStreaming(modelTestContext(t), anthropicTestParams)
		defer stream.Close()
		for stream.Next() {
		}
		var aerr *anthropic.Error
		if !errors.As(stream.Err(), &aerr) || aerr.Type() != "overloaded_error" || aerr.Message != "overloaded" {
			t.Errorf("error %v, want the stream's overloaded_error", stream.Err())
		}
	})
	t.Run("fault", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, Turn{Text: "ok", Faults: []Fault{{Status: 429, Header: http.Header{"Retry-After": {"7"}}}}})
		var res *http.Response
		_, err := anthropicTestClient(ms).Messages.New(modelTestContext(t), anthropicTestParams, anthropicoption.WithResponseInto(&res))
		var aerr *anthropic.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != 429 || aerr.Type() != "rate_limit_error" || aerr.RequestID != "req_modelserver_1" {
			t.Fatalf("error %v, want a 429 rate_limit_error", err)
		}
		if got := res.Header.Get("Retry-After"); got != "7" {
			t.Errorf("Retry-After %q", got)
		}
	})
}

var chatTestParams = openai.ChatCompletionNewParams{
	Model:    "gpt-test",
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
}

func checkChatMessage(t *testing.T, c openai.ChatCompletion) {
	t.Helper()
	if len(c.Choices) != 1 {
		t.Fatalf("%d choices", len(c.Choices))
	}
	m := c.Choices[0].Message
	if m.Content != modelTestTurn.Text {
		t.Errorf("content %q", m.Content)
	}
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_ls" || m.ToolCalls[0].Function.Name != "bash" || m.ToolCalls[0].Function.Arguments != `{"command":"ls -la"}` {
		t.Errorf("tool calls %+v", m.ToolCalls)
	}
	if got := c.Choices[0].FinishReason; got != "tool_calls" {
		t.Errorf("finish reason %q", got)
	}
}

func TestModelServerChatCompletions(t *testing.T) {
	t.Parallel()
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, modelTestTurn, modelTestTurn)
		client := openAITestClient(ms)
		for _, includeUsage := range []bool{true, false} {
			params := chatTestParams
			if includeUsage {
				params.StreamOptions.IncludeUsage = openai.Bool(true)
			}
			stream := client.Chat.Completions.NewStreaming(modelTestContext(t), params)
			var acc openai.ChatCompletionAccumulator
			var reasoning strings.Builder
			var usage openai.CompletionUsage // of the last chunk: the SDK's accumulator drops cache writes
			for stream.Next() {
				ch := stream.Current()
				if ch.JSON.Usage.Valid() {
					usage = ch.Usage
				}
				if !acc.AddChunk(ch) {
					t.Fatalf("the SDK's accumulator rejected chunk %s", ch.RawJSON())
				}
				if len(ch.Choices) > 0 {
					if f, ok := ch.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
						var s string
						_ = json.Unmarshal([]byte(f.Raw()), &s)
						reasoning.WriteString(s)
					}
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if err := stream.Close(); err != nil {
				t.Fatal(err)
			}
			checkChatMessage(t, acc.ChatCompletion)
			if reasoning.String() != modelTestTurn.Reasoning {
				t.Errorf("reasoning_content %q", reasoning.String())
			}
			u := usage
			if includeUsage && (u.PromptTokens != 100 || u.CompletionTokens != 20 || u.PromptTokensDetails.CachedTokens != 30 || u.PromptTokensDetails.CacheWriteTokens != 10) {
				t.Errorf("usage %s", u.RawJSON())
			}
			if !includeUsage && u.PromptTokens != 0 {
				t.Errorf("usage %s sent without include_usage", u.RawJSON())
			}
			if includeUsage && acc.Usage.PromptTokens != 100 {
				t.Errorf("accumulated prompt tokens %d", acc.Usage.PromptTokens)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, modelTestTurn)
		c, err := openAITestClient(ms).Chat.Completions.New(modelTestContext(t), chatTestParams)
		if err != nil {
			t.Fatal(err)
		}
		checkChatMessage(t, *c)
		if c.Usage.PromptTokens != 100 || c.Usage.PromptTokensDetails.CachedTokens != 30 {
			t.Errorf("usage %s", c.Usage.RawJSON())
		}
	})
	t.Run("fault", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, Turn{Faults: []Fault{{Status: 400, Message: "too long", Code: "context_length_exceeded"}}})
		_, err := openAITestClient(ms).Chat.Completions.New(modelTestContext(t), chatTestParams)
		var oerr *openai.Error
		if !errors.As(err, &oerr) || oerr.StatusCode != 400 || oerr.Code != "context_length_exceeded" || oerr.Message != "too long" || oerr.Type != "invalid_request_error" {
			t.Errorf("error %v (%+v)", err, oerr)
		}
	})
}

var responsesTestParams = responses.ResponseNewParams{
	Model: "gpt-test",
	Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
}

func checkResponse(t *testing.T, r responses.Response) {
	t.Helper()
	if r.Status != responses.ResponseStatusCompleted {
		t.Errorf("status %q", r.Status)
	}
	if got := r.OutputText(); got != modelTestTurn.Text {
		t.Errorf("output text %q", got)
	}
	var kinds []string
	for _, item := range r.Output {
		kinds = append(kinds, item.Type)
		switch item.Type {
		case "function_call":
			if item.CallID != "call_ls" || item.Name != "bash" || item.Arguments.OfString != `{"command":"ls -la"}` {
				t.Errorf("function call %s", item.RawJSON())
			}
		case "reasoning":
			if len(item.Summary) != 1 || item.Summary[0].Text != modelTestTurn.Reasoning {
				t.Errorf("reasoning %s", item.RawJSON())
			}
		}
	}
	if want := []string{"reasoning", "message", "function_call"}; !slices.Equal(kinds, want) {
		t.Errorf("output items %v, want %v", kinds, want)
	}
	u := r.Usage
	if u.InputTokens != 100 || u.OutputTokens != 20 || u.InputTokensDetails.CachedTokens != 30 || u.InputTokensDetails.CacheWriteTokens != 10 {
		t.Errorf("usage %s", u.RawJSON())
	}
}

func TestModelServerResponses(t *testing.T) {
	t.Parallel()
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, modelTestTurn)
		stream := openAITestClient(ms).Responses.NewStreaming(modelTestContext(t), responsesTestParams)
		defer stream.Close()
		var text, args, reasoning strings.Builder
		var final responses.Response
		var seq []int64
		for stream.Next() {
			ev := stream.Current()
			seq = append(seq, ev.SequenceNumber)
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.function_call_arguments.delta":
				args.WriteString(ev.Delta)
			case "response.reasoning_summary_text.delta":
				reasoning.WriteString(ev.Delta)
			case "response.completed":
				final = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != modelTestTurn.Text || args.String() != `{"command":"ls -la"}` || reasoning.String() != modelTestTurn.Reasoning {
			t.Errorf("deltas: text %q, arguments %q, reasoning %q", text.String(), args.String(), reasoning.String())
		}
		checkResponse(t, final)
		for i, n := range seq {
			if n != int64(i) {
				t.Fatalf("sequence numbers %v", seq)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, modelTestTurn)
		r, err := openAITestClient(ms).Responses.New(modelTestContext(t), responsesTestParams)
		if err != nil {
			t.Fatal(err)
		}
		checkResponse(t, *r)
	})
	t.Run("incomplete", func(t *testing.T) {
		t.Parallel()
		ms := StartModelServer(t, Turn{Text: "cut", StopReason: "max_tokens"})
		stream := openAITestClient(ms).Responses.NewStreaming(modelTestContext(t), responsesTestParams)
		defer stream.Close()
		var last responses.ResponseStreamEventUnion
		for stream.Next() {
			last = stream.Current()
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if last.Type != "response.incomplete" || last.Response.IncompleteDetails.Reason != "max_output_tokens" {
			t.Errorf("last event %s", last.RawJSON())
		}
	})
}

// TestModelServerRecords checks what a test can see of the requests: their
// headers and bodies, and whether a fault or a turn answered them.
func TestModelServerRecords(t *testing.T) {
	t.Parallel()
	ms := StartModelServer(t, Turn{Text: "one", Faults: []Fault{{Status: 500}}})
	client := anthropicTestClient(ms)
	ctx := modelTestContext(t)
	if _, err := client.Messages.New(ctx, anthropicTestParams); err == nil {
		t.Fatal("the fault did not fail the request")
	}
	if _, err := client.Messages.New(ctx, anthropicTestParams); err != nil {
		t.Fatal(err)
	}
	ms.Add(Turn{Text: "two"})
	if ms.Remaining() != 1 {
		t.Errorf("Remaining() = %d after Add, want 1", ms.Remaining())
	}
	msg, err := client.Messages.New(ctx, anthropicTestParams)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "two" {
		t.Errorf("the added turn answered %q", msg.Content[0].Text)
	}

	reqs := ms.Requests()
	type summary struct {
		Method, Path string
		Turn         int
		Fault        bool
	}
	var got []summary
	for _, r := range reqs {
		got = append(got, summary{r.Method, r.Path, r.Turn, r.Fault})
		if r.Header.Get("X-Api-Key") != "test-key" {
			t.Errorf("x-api-key %q not recorded", r.Header.Get("X-Api-Key"))
		}
		var body struct {
			Model    string `json:"model"`
			Messages []any  `json:"messages"`
		}
		if err := r.Decode(&body); err != nil || body.Model != "claude-test" || len(body.Messages) != 1 {
			t.Errorf("body %s: %v", r.Body, err)
		}
		if r.Time.IsZero() {
			t.Error("no time recorded")
		}
	}
	want := []summary{
		{"POST", "/v1/messages", 1, true},
		{"POST", "/v1/messages", 1, false},
		{"POST", "/v1/messages", 2, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// modelErrorRecorder is a testing.TB that keeps the errors reported to it, to
// test the server's own complaints.
type modelErrorRecorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *modelErrorRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *modelErrorRecorder) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

func TestModelServerComplains(t *testing.T) {
	t.Parallel()
	rec := &modelErrorRecorder{TB: t}
	ms := StartModelServer(rec)
	ctx := modelTestContext(t)

	// No turn left: an error the SDKs are told not to retry.
	client := anthropic.NewClient(
		anthropicoption.WithoutEnvironmentDefaults(),
		anthropicoption.WithBaseURL(ms.URL()),
		anthropicoption.WithHeader("x-api-key", "k"),
	)
	_, err := client.Messages.New(ctx, anthropicTestParams)
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 500 {
		t.Errorf("error %v, want a 500", err)
	}
	if n := len(ms.Requests()); n != 1 {
		t.Errorf("%d requests: the exhausted server's answer was retried", n)
	}

	// An endpoint the server does not have.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ms.OpenAIURL()+"/models", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("status %d for an unknown path", res.StatusCode)
	}

	errs := rec.recorded()
	if len(errs) != 2 || !strings.Contains(errs[0], "no turn left") || !strings.Contains(errs[1], "unexpected request") {
		t.Errorf("the server reported %q, want no turn left, then unexpected request", errs)
	}
}

func TestModelServerDelay(t *testing.T) {
	t.Parallel()
	ms := StartModelServer(t, Turn{Text: "late", Delay: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := openAITestClient(ms).Chat.Completions.New(ctx, chatTestParams)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the client's deadline", err)
	}
	// The server's cleanup does not wait out the hour: the handler returns when
	// the client goes away.
}

func TestModelServerChunks(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "ab", "abc", "abcd", "héllo wörld", `{"command":"ls -la"}`, "日本語のテキスト"} {
		chunks := modelChunks(s)
		if strings.Join(chunks, "") != s {
			t.Errorf("chunks %q do not join to %q", chunks, s)
		}
		if want := min(3, len([]rune(s))); len(chunks) != want {
			t.Errorf("%q: %d chunks, want %d", s, len(chunks), want)
		}
	}
}

// TestModelServerServerTimes checks that each request's server time is
// recorded, in request order, and nested inside what the client saw: from
// before it sent the request to after it read the last byte of the answer.
// A Delay is part of the server's time.
func TestModelServerServerTimes(t *testing.T) {
	t.Parallel()
	const delay = 20 * time.Millisecond
	ms := StartModelServer(t,
		Turn{Text: "streamed"},
		Turn{Text: "whole", Delay: delay},
		Turn{Text: "faulted", Faults: []Fault{{Status: 400}}},
	)
	client := anthropicTestClient(ms)
	ctx := modelTestContext(t)
	type call struct{ start, end time.Time }
	var seen []call
	timed := func(f func() error) {
		t.Helper()
		start := time.Now()
		err := f()
		seen = append(seen, call{start, time.Now()})
		if err != nil {
			t.Log(err) // the fault's error is expected; the times are checked below
		}
	}
	timed(func() error {
		stream := client.Messages.NewStreaming(ctx, anthropicTestParams)
		for stream.Next() {
		}
		return stream.Err()
	})
	timed(func() error { _, err := client.Messages.New(ctx, anthropicTestParams); return err })
	timed(func() error { _, err := client.Messages.New(ctx, anthropicTestParams); return err })

	served := ms.ServerTimes(ctx)
	if len(served) != len(ms.Requests()) || len(served) != 3 {
		t.Fatalf("%d server times for %d requests, want 3", len(served), len(ms.Requests()))
	}
	// The server stops its clock once the answer is flushed, which the
	// client may have read by then: its time can pass the client's by a
	// little, so only where it starts is checked against the client.
	for i, d := range served {
		arrived := ms.Requests()[i].Time
		if d <= 0 || arrived.Before(seen[i].start) || arrived.After(seen[i].end) {
			t.Errorf("request %d: server time %v from %v; want more than 0, from within the client's call %v to %v",
				i+1, d, arrived, seen[i].start, seen[i].end)
		}
	}
	if served[1] < delay {
		t.Errorf("server time %v of a turn delayed %v leaves the delay out", served[1], delay)
	}
}

// TestModelServerContentLength checks that whole (not streamed) answers and
// errors carry their Content-Length: the server flushes them to time them,
// which without it would switch them to chunked encoding.
func TestModelServerContentLength(t *testing.T) {
	t.Parallel()
	ms := StartModelServer(t, Turn{Text: strings.Repeat("long answer ", 1000), Faults: []Fault{{Status: 429}}})
	ctx := modelTestContext(t)
	for _, want := range []int{http.StatusTooManyRequests, http.StatusOK} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ms.URL()+"/v1/messages", strings.NewReader(`{"model":"m"}`))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body json.RawMessage
		err = json.NewDecoder(res.Body).Decode(&body)
		err = errors.Join(err, res.Body.Close())
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != want || res.ContentLength <= 0 || len(res.TransferEncoding) > 0 {
			t.Errorf("status %d, Content-Length %d, Transfer-Encoding %q: want %d with a length, not chunked",
				res.StatusCode, res.ContentLength, res.TransferEncoding, want)
		}
	}
}

// postModel posts body to the server's path and returns the status and the
// decoded JSON answer.
func postModel(t *testing.T, ms *ModelServer, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(modelTestContext(t), http.MethodPost, ms.URL()+path, strings.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatalf("%s: the answer is not JSON: %v", path, err)
	}
	return res.StatusCode, v
}

func TestModelServerContextWindow(t *testing.T) {
	t.Parallel()
	// 400 bytes: 100 tokens by RequestTokens.
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 400-len(`{"model":"m","messages":[{"role":"user","content":""}]}`)) + `"}]}`
	if got := RequestTokens([]byte(body)); got != 100 {
		t.Fatalf("RequestTokens = %d, want 100", got)
	}
	for _, tc := range []struct {
		path   string
		server CompatibleServer
		want   string // the error body, as JSON
	}{
		{"/v1/messages", "", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 100 tokens > 99 maximum"},"request_id":"req_modelserver_overflow_1"}`},
		{"/v1/responses", "", `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`},
		{"/v1/chat/completions", ServerOpenAI, `{"error":{"message":"This model's maximum context length is 99 tokens. However, your messages resulted in 100 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
		{"/v1/chat/completions", ServerVLLM, `{"error":{"message":"This model's maximum context length is 99 tokens. However, you requested 100 tokens (100 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`},
		{"/v1/chat/completions", ServerVLLMLegacy, `{"object":"error","message":"This model's maximum context length is 99 tokens. However, you requested 100 tokens (100 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`},
		{"/v1/chat/completions", ServerLlamaCpp, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":100,"n_ctx":99}}`},
		{"/v1/chat/completions", ServerOllama, `{"error":{"message":"prompt too long; exceeded max context length by 1 tokens","type":"invalid_request_error","param":null,"code":null}}`},
		{"/v1/chat/completions", ServerLMStudio, `{"error":"The number of tokens to keep from the initial prompt is greater than the context length (n_keep: 100>= n_ctx: 99). Try to load the model with a larger context length, or provide a shorter input."}`},
	} {
		t.Run(tc.path+"/"+string(tc.server), func(t *testing.T) {
			t.Parallel()
			ms := StartModelServer(t, Turn{Text: "it fits"})
			ms.SetContextWindow(ContextWindow{Tokens: 99, Server: tc.server})
			status, got := postModel(t, ms, tc.path, body)
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if status != http.StatusBadRequest {
				t.Errorf("status %d, want 400", status)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("overflow body (-want +got):\n%s", diff)
			}
			if ms.Remaining() != 1 {
				t.Errorf("the overflow took a turn: %d left", ms.Remaining())
			}

			// The same request fits a window of its size, and gets the turn.
			ms.SetContextWindow(ContextWindow{Tokens: 100, Server: tc.server})
			if status, _ := postModel(t, ms, tc.path, body); status != http.StatusOK {
				t.Errorf("status %d for a request that fits", status)
			}
			type rec struct {
				Turn     int
				Tokens   int64
				Overflow bool
			}
			var recs []rec
			for _, r := range ms.Requests() {
				recs = append(recs, rec{r.Turn, r.Tokens, r.Overflow})
			}
			if diff := cmp.Diff([]rec{{0, 100, true}, {1, 100, false}}, recs); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelServerPrefix(t *testing.T) {
	t.Parallel()
	ms := StartModelServer(t, Turn{Text: "a"}, Turn{Text: "b"}, Turn{Text: "c"})
	first := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	second := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"}]}`
	third := `{"model":"x"}`
	for _, b := range []string{first, second, third} {
		if status, _ := postModel(t, ms, "/v1/chat/completions", b); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
	}
	reqs := ms.Requests()
	shared := len(`{"model":"m","messages":[{"role":"user","content":"hi"}`)
	want := []int{0, shared, len(`{"model":"`)}
	for i, r := range reqs {
		if r.Prefix != want[i] {
			t.Errorf("request %d: Prefix %d, want %d", i+1, r.Prefix, want[i])
		}
	}
	if got, want := reqs[1].PrefixShare(), float64(shared)/float64(len(second)); got != want {
		t.Errorf("PrefixShare %v, want %v", got, want)
	}
	if got := reqs[0].PrefixShare(); got != 0 {
		t.Errorf("the first request's PrefixShare is %v, want 0", got)
	}
}

// TestModelServerPromptPrefix checks the prompt in the order the caches
// read it: tools first, then the system prompt, then the conversation,
// whatever the order of the body's keys.
func TestModelServerPromptPrefix(t *testing.T) {
	t.Parallel()
	ms := StartModelServer(t, Turn{Text: "a"}, Turn{Text: "b"})
	first := `{"input":[{"role":"user","content":"hi"}],"instructions":"be terse","tools":[{"name":"bash"}]}`
	second := `{"input":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"}],` +
		`"instructions":"be terse","tools":[{"name":"bash"}]}`
	for _, b := range []string{first, second} {
		if status, _ := postModel(t, ms, "/v1/responses", b); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
	}
	reqs := ms.Requests()
	const prompt = `[{"name":"bash"}]"be terse"[{"role":"user","content":"hi"},{"role":"assistant","content":"a"}]`
	if string(reqs[1].Prompt) != prompt {
		t.Errorf("Prompt %s, want %s", reqs[1].Prompt, prompt)
	}
	shared := len(`[{"name":"bash"}]"be terse"[{"role":"user","content":"hi"}`)
	if reqs[0].PromptPrefix != 0 || reqs[1].PromptPrefix != shared {
		t.Errorf("PromptPrefix %d, %d; want 0, %d", reqs[0].PromptPrefix, reqs[1].PromptPrefix, shared)
	}
	if got, want := reqs[1].PromptShare(), float64(shared)/float64(len(prompt)); got != want {
		t.Errorf("PromptShare %v, want %v", got, want)
	}
	if reqs[1].PrefixShare() >= reqs[1].PromptShare() {
		t.Errorf("the body's share %v is not below the prompt's %v: the tools after the input do not count",
			reqs[1].PrefixShare(), reqs[1].PromptShare())
	}
}

// TestModelServerConversations answers each conversation from its own
// script, by its first user message, whatever order the requests come in,
// and the rest from the main one.
func TestModelServerConversations(t *testing.T) {
	s := StartModelServer(t, Turn{Text: "main"})
	s.Conversation("task b", Turn{Text: "b1"}, Turn{Text: "b2"})
	s.Conversation("task a", Turn{Text: "a1"})
	s.Conversation("task a, longer", Turn{Text: "long"})
	ask := func(first string) string {
		t.Helper()
		body := fmt.Sprintf(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":%q}]},`+
			`{"role":"assistant","content":"x"},{"role":"user","content":"task a"}]}`, first)
		resp, err := http.Post(s.URL()+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var msg struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) == 0 {
			return ""
		}
		return msg.Content[0].Text
	}
	for _, c := range []struct{ first, want string }{
		{"task b: build", "b1"},
		{"task a, longer one", "long"},
		{"the parent's task", "main"},
		{"task a", "a1"},
		{"task b again", "b2"},
	} {
		if got := ask(c.first); got != c.want {
			t.Errorf("first message %q: answer %q, want %q", c.first, got, c.want)
		}
	}
	if n := s.Remaining(); n != 0 {
		t.Errorf("Remaining() = %d, want 0", n)
	}
	if got := firstUserText([]byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`)); got != "hi" {
		t.Errorf("firstUserText(responses) = %q, want hi", got)
	}
	if got := firstUserText([]byte(`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"yo"}]}`)); got != "yo" {
		t.Errorf("firstUserText(chat) = %q, want yo", got)
	}
}

// TestModelServerIgnoresHTTP2Preface: a cleartext HTTP/2 client's preface
// (another process's gRPC reaching a recycled port) is refused and is not
// recorded as a model request.
func TestModelServerIgnoresHTTP2Preface(t *testing.T) {
	t.Parallel()
	s := StartModelServer(t)
	addr := strings.TrimPrefix(s.URL(), "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(conn); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Logf("read: %v", err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests recorded, want none", n)
	}
}
