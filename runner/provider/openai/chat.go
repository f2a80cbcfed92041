package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"iter"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/aerie-run/aerie/runner/provider"
)

// Chat is the Chat Completions API (POST /chat/completions), streamed:
// OpenAI's own, or an OpenAI-compatible server's (vLLM, Ollama, LiteLLM, ...).
type Chat struct {
	name      string
	compat    bool
	client    openai.ChatCompletionService
	model     string
	maxTokens int64
	timeout   time.Duration
	guard     provider.Guard
}

// NewChat returns a Chat Completions client for provider openai or
// openai-compatible (cfg.Provider says which).
//
// The client reads nothing from the environment (no OPENAI_API_KEY,
// OPENAI_BASE_URL, organization or project): everything comes from cfg.
func NewChat(cfg provider.Config) (*Chat, error) {
	opts, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	return &Chat{
		name:      cfg.Provider,
		compat:    cfg.Provider == provider.NameOpenAICompatible,
		client:    openai.NewChatCompletionService(opts...),
		model:     cfg.Model,
		maxTokens: cfg.MaxOutputTokens,
		timeout:   cfg.CallTimeout(),
		guard:     cfg.Guard(cfg.Provider),
	}, nil
}

// Name returns "openai" or "openai-compatible".
func (o *Chat) Name() string { return o.name }

// Stream sends req to the Chat Completions API and streams the answer.
func (o *Chat) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	call := streamCall{name: o.name, op: "stream chat completion", timeout: o.timeout, guard: o.guard}
	return streamed(ctx, call, func() (openai.ChatCompletionNewParams, error) { return o.params(req) },
		func(ctx context.Context, p openai.ChatCompletionNewParams) *ssestream.Stream[openai.ChatCompletionChunk] {
			return o.client.NewStreaming(ctx, p)
		},
		func() decoder[openai.ChatCompletionChunk] { return &chatDecoder{calls: map[int64]*chatCall{}} })
}

func (o *Chat) params(req provider.Request) (openai.ChatCompletionNewParams, error) {
	system, conv, err := provider.SplitSystem(req.Messages)
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

func chatMessages(m provider.Message) []openai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case provider.RoleUser:
		return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(m.Text())}
	case provider.RoleTool:
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
	usage  provider.Usage
	finish string
}

type chatCall struct {
	id    string
	ended bool
}

func (d *chatDecoder) decode(ch openai.ChatCompletionChunk, yield func(provider.Part, error) bool) (bool, error) {
	if ch.JSON.Usage.Valid() && ch.Usage.JSON.PromptTokens.Valid() {
		u := ch.Usage
		d.usage = provider.Usage{
			InputTokens:      u.PromptTokens,
			OutputTokens:     u.CompletionTokens,
			CacheReadTokens:  u.PromptTokensDetails.CachedTokens,
			CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
		}
	}
	if len(ch.Choices) == 0 {
		return true, nil
	}
	c := ch.Choices[0]
	// Servers that reason in the open (vLLM, DeepSeek, Ollama, OpenRouter)
	// stream it in a field of their own; OpenAI streams none.
	for _, field := range []string{"reasoning_content", "reasoning"} {
		if f, ok := c.Delta.JSON.ExtraFields[field]; ok {
			var text string
			if json.Unmarshal([]byte(f.Raw()), &text) == nil && text != "" {
				if !yield(provider.Part{Type: provider.PartReasoningDelta, Text: text}, nil) {
					return false, nil
				}
			}
		}
	}
	if c.Delta.Content != "" {
		if !yield(provider.Part{Type: provider.PartTextDelta, Text: c.Delta.Content}, nil) {
			return false, nil
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
			if !yield(provider.Part{Type: provider.PartToolCallStart, ToolCallID: call.id, ToolName: tc.Function.Name}, nil) {
				return false, nil
			}
		}
		if tc.Function.Arguments != "" {
			if !yield(provider.Part{Type: provider.PartToolCallDelta, ToolCallID: call.id, Text: tc.Function.Arguments}, nil) {
				return false, nil
			}
		}
	}
	if c.FinishReason != "" {
		d.finish = c.FinishReason
	}
	return true, nil
}

// complete ends every tool call and the answer. [DONE] and a dropped
// connection both end the stream without an error; only a finish reason
// says the answer is complete.
func (d *chatDecoder) complete(yield func(provider.Part, error) bool) error {
	if d.finish == "" {
		return provider.ErrIncomplete
	}
	if d.endCalls(yield) {
		yield(provider.Part{Type: provider.PartFinish, Usage: d.usage, StopReason: chatStop(d.finish, len(d.order) > 0)}, nil)
	}
	return nil
}

// endCalls ends every tool call, in the order they started.
func (d *chatDecoder) endCalls(yield func(provider.Part, error) bool) bool {
	for _, i := range d.order {
		call := d.calls[i]
		if call.ended {
			continue
		}
		call.ended = true
		if !yield(provider.Part{Type: provider.PartToolCallEnd, ToolCallID: call.id}, nil) {
			return false
		}
	}
	return true
}

// chatStop normalizes a finish reason. Some compatible servers say "stop"
// after tool calls; the calls are what matters.
func chatStop(reason string, toolCalls bool) provider.StopReason {
	switch reason {
	case "stop":
		if toolCalls {
			return provider.StopToolUse
		}
		return provider.StopEndTurn
	case "tool_calls", "function_call":
		return provider.StopToolUse
	case "length":
		return provider.StopMaxTokens
	case "content_filter":
		return provider.StopRefusal
	}
	return provider.StopReason(reason)
}

// Encode returns the JSON body Stream sends for req, without sending it
// (and without "stream", which the SDK adds on sending).
func (o *Chat) Encode(req provider.Request) ([]byte, error) {
	p, err := o.params(req)
	if err != nil {
		return nil, err
	}
	return p.MarshalJSON()
}
