package provider

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// OpenAIChat is the Chat Completions API (POST /chat/completions), streamed:
// OpenAI's own, or an OpenAI-compatible server's (vLLM, Ollama, LiteLLM, ...).
type OpenAIChat struct {
	name      string
	compat    bool
	client    openai.ChatCompletionService
	model     string
	maxTokens int64
	timeout   time.Duration
}

// NewOpenAIChat returns a Chat Completions client for provider openai or
// openai-compatible (cfg.Provider says which).
//
// The client reads nothing from the environment (no OPENAI_API_KEY,
// OPENAI_BASE_URL, organization or project): everything comes from cfg.
func NewOpenAIChat(cfg Config) (*OpenAIChat, error) {
	opts, err := openAIOptions(cfg)
	if err != nil {
		return nil, err
	}
	return &OpenAIChat{
		name:      cfg.Provider,
		compat:    cfg.Provider == NameOpenAICompatible,
		client:    openai.NewChatCompletionService(opts...),
		model:     cfg.Model,
		maxTokens: cfg.MaxOutputTokens,
		timeout:   cfg.timeout(),
	}, nil
}

// openAIOptions checks cfg for an OpenAI provider and returns the SDK options
// both OpenAI APIs share.
func openAIOptions(cfg Config) ([]option.RequestOption, error) {
	if cfg.Provider != NameOpenAI && cfg.Provider != NameOpenAICompatible {
		return nil, fmt.Errorf("provider: Config.Provider %q is not an OpenAI provider; want %s or %s", cfg.Provider, NameOpenAI, NameOpenAICompatible)
	}
	if err := cfg.check(cfg.Provider, cfg.Provider == NameOpenAI); err != nil {
		return nil, err
	}
	if _, err := cfg.openAIAPI(); err != nil {
		return nil, err
	}
	base := cfg.BaseURL
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	// The services are built without openai.NewClient, which would read
	// OPENAI_* variables from the environment of the runner.
	opts := []option.RequestOption{
		option.WithHTTPClient(cfg.httpClient()),
		option.WithBaseURL(base),
		// Retries are the SDK's: it retries 408, 409, 429, 5xx and connection
		// errors with exponential backoff, waiting what retry-after-ms or
		// retry-after say (up to two minutes; a longer wait ends the retries).
		option.WithMaxRetries(cfg.maxRetries()),
		option.WithMiddleware(retryLog(cfg.logger(), cfg.Provider, cfg.Model)),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(string(cfg.APIKey)))
	}
	return opts, nil
}

// Name returns "openai" or "openai-compatible".
func (o *OpenAIChat) Name() string { return o.name }

// Stream sends req to the Chat Completions API and streams the answer.
func (o *OpenAIChat) Stream(ctx context.Context, req Request) iter.Seq2[Part, error] {
	return func(yield func(Part, error) bool) {
		params, err := o.params(req)
		if err != nil {
			yield(Part{}, fmt.Errorf("%s: %w", o.name, err))
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		stream := o.client.NewStreaming(callCtx, params)
		defer stream.Close()

		dec := chatDecoder{calls: map[int64]*chatCall{}}
		for stream.Next() {
			if !dec.chunk(stream.Current(), yield) {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(Part{}, callError(callCtx, ctx, o.timeout, o.name+": stream chat completion", err))
			return
		}
		// [DONE] and a dropped connection both end the stream without an
		// error; only a finish reason says the answer is complete.
		if dec.finish == "" {
			yield(Part{}, fmt.Errorf("%s: stream chat completion: %w", o.name, ErrIncomplete))
			return
		}
		if !dec.endCalls(yield) {
			return
		}
		yield(Part{Type: PartFinish, Usage: dec.usage, StopReason: chatStop(dec.finish, len(dec.order) > 0)}, nil)
	}
}

func (o *OpenAIChat) params(req Request) (openai.ChatCompletionNewParams, error) {
	system, conv, err := splitSystem(req.Messages)
	if err != nil {
		return openai.ChatCompletionNewParams{}, err
	}
	p := openai.ChatCompletionNewParams{
		Model: o.model,
		// Without it the stream carries no token counts.
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if max := cmp.Or(req.MaxOutputTokens, o.maxTokens); max > 0 {
		// OpenAI's reasoning models reject max_tokens; servers that implement
		// the API after the fact (Ollama, older vLLM) know only max_tokens.
		if o.compat {
			p.MaxTokens = openai.Int(max)
		} else {
			p.MaxCompletionTokens = openai.Int(max)
		}
	}
	for _, text := range system {
		p.Messages = append(p.Messages, openai.SystemMessage(text))
	}
	for _, m := range conv {
		p.Messages = append(p.Messages, chatMessages(m)...)
	}
	for _, t := range req.Tools {
		schema, err := schemaMap(t)
		if err != nil {
			return p, err
		}
		fn := openai.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return p, nil
}

func chatMessages(m Message) []openai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case RoleUser:
		return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(m.Text())}
	case RoleTool:
		// One tool message per result. The API has no error flag: the text
		// itself says that the tool failed.
		var out []openai.ChatCompletionMessageParamUnion
		for _, c := range m.Content {
			out = append(out, openai.ToolMessage(c.Text, c.ToolCallID))
		}
		return out
	}
	// The assistant. Reasoning is not sent back: Chat Completions has no
	// place for it.
	var msg openai.ChatCompletionAssistantMessageParam
	if text := m.Text(); text != "" {
		msg.Content.OfString = openai.String(text)
	}
	for _, c := range m.ToolCalls() {
		msg.ToolCalls = append(msg.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.ToolCallID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.ToolName, Arguments: c.Arguments},
			},
		})
	}
	if !msg.Content.OfString.Valid() && len(msg.ToolCalls) == 0 {
		// An empty assistant message is rejected; there is nothing to send.
		return nil
	}
	return []openai.ChatCompletionMessageParamUnion{{OfAssistant: &msg}}
}

// chatDecoder turns chunks into parts. Tool calls arrive by index: the first
// fragment of a call carries its id and name, the following ones pieces of its
// arguments, and a call has no end event of its own.
type chatDecoder struct {
	calls  map[int64]*chatCall
	order  []int64
	usage  Usage
	finish string
}

type chatCall struct {
	id    string
	ended bool
}

func (d *chatDecoder) chunk(ch openai.ChatCompletionChunk, yield func(Part, error) bool) bool {
	if ch.JSON.Usage.Valid() && ch.Usage.JSON.PromptTokens.Valid() {
		u := ch.Usage
		d.usage = Usage{
			InputTokens:      u.PromptTokens,
			OutputTokens:     u.CompletionTokens,
			CacheReadTokens:  u.PromptTokensDetails.CachedTokens,
			CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
		}
	}
	if len(ch.Choices) == 0 {
		return true
	}
	c := ch.Choices[0]
	// Servers that reason in the open (vLLM, DeepSeek, Ollama, OpenRouter)
	// stream it in a field of their own; OpenAI streams none.
	for _, field := range []string{"reasoning_content", "reasoning"} {
		if f, ok := c.Delta.JSON.ExtraFields[field]; ok {
			var text string
			if json.Unmarshal([]byte(f.Raw()), &text) == nil && text != "" {
				if !yield(Part{Type: PartReasoningDelta, Text: text}, nil) {
					return false
				}
			}
		}
	}
	if c.Delta.Content != "" {
		if !yield(Part{Type: PartTextDelta, Text: c.Delta.Content}, nil) {
			return false
		}
	}
	for _, tc := range c.Delta.ToolCalls {
		call, ok := d.calls[tc.Index]
		if !ok {
			call = &chatCall{id: tc.ID}
			if call.id == "" {
				// Some servers leave ids out; the conversation needs one to
				// pair the call with its result.
				call.id = newCallID()
			}
			d.calls[tc.Index] = call
			d.order = append(d.order, tc.Index)
			if !yield(Part{Type: PartToolCallStart, ToolCallID: call.id, ToolName: tc.Function.Name}, nil) {
				return false
			}
		}
		if tc.Function.Arguments != "" {
			if !yield(Part{Type: PartToolCallDelta, ToolCallID: call.id, Text: tc.Function.Arguments}, nil) {
				return false
			}
		}
	}
	if c.FinishReason != "" {
		d.finish = c.FinishReason
	}
	return true
}

// endCalls ends every tool call, in the order they started.
func (d *chatDecoder) endCalls(yield func(Part, error) bool) bool {
	for _, i := range d.order {
		call := d.calls[i]
		if call.ended {
			continue
		}
		call.ended = true
		if !yield(Part{Type: PartToolCallEnd, ToolCallID: call.id}, nil) {
			return false
		}
	}
	return true
}

// chatStop normalizes a finish reason. Some compatible servers say "stop"
// after tool calls; the calls are what matters.
func chatStop(reason string, toolCalls bool) StopReason {
	switch reason {
	case "stop":
		if toolCalls {
			return StopToolUse
		}
		return StopEndTurn
	case "tool_calls", "function_call":
		return StopToolUse
	case "length":
		return StopMaxTokens
	case "content_filter":
		return StopRefusal
	}
	return StopReason(reason)
}

func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b)
}
