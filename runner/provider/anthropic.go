package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// Anthropic is the Anthropic Messages API (POST /v1/messages), streamed.
type Anthropic struct {
	client    anthropic.Client
	model     string
	maxTokens int64
	timeout   time.Duration

	// blocks holds the encoding of each content block of the last request.
	// Every request carries the whole conversation, and the SDK encodes it
	// by reflection: over a long session that grew to milliseconds a turn,
	// nearly all of it spent on blocks already sent.
	mu     sync.Mutex
	blocks map[Content]encodedBlock
}

// encodedBlock is a content block as the Messages API takes it; ok is false
// for content that is not sent (see anthropicBlock).
type encodedBlock struct {
	json json.RawMessage
	ok   bool
}

// NewAnthropic returns a client for the Anthropic Messages API.
//
// The client reads nothing from the environment (no ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL or profile): the key and endpoint are cfg's alone.
func NewAnthropic(cfg Config) (*Anthropic, error) {
	if err := cfg.check(NameAnthropic, true); err != nil {
		return nil, err
	}
	if cfg.API != "" {
		return nil, fmt.Errorf("provider: anthropic: Config.API %q: only the OpenAI providers have a choice of API", cfg.API)
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(cfg.httpClient()),
		// The documented header for API keys. The SDK's WithAPIKey sends
		// "Authorization: Bearer", which Anthropic-compatible proxies may not
		// accept.
		option.WithHeader("x-api-key", string(cfg.APIKey)),
		// Retries are the SDK's: it retries 408, 409, 429, 5xx and connection
		// errors with exponential backoff, waiting what retry-after-ms or
		// retry-after say when the server sends them.
		option.WithMaxRetries(cfg.maxRetries()),
		option.WithMiddleware(retryLog(cfg.logger(), NameAnthropic, cfg.Model)),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	maxTokens := cfg.MaxOutputTokens
	if maxTokens == 0 {
		maxTokens = DefaultAnthropicMaxOutputTokens
	}
	return &Anthropic{
		client:    anthropic.NewClient(opts...),
		model:     cfg.Model,
		maxTokens: maxTokens,
		timeout:   cfg.timeout(),
	}, nil
}

// Name returns "anthropic".
func (a *Anthropic) Name() string { return NameAnthropic }

// Stream sends req to the Messages API and streams the answer.
func (a *Anthropic) Stream(ctx context.Context, req Request) iter.Seq2[Part, error] {
	return func(yield func(Part, error) bool) {
		params, err := a.params(req)
		if err != nil {
			yield(Part{}, fmt.Errorf("anthropic: %w", err))
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, a.timeout)
		defer cancel()
		stream := a.client.Messages.NewStreaming(callCtx, params)
		defer stream.Close()

		var dec anthropicDecoder
		for stream.Next() {
			if !dec.event(stream.Current(), yield) {
				return
			}
			if dec.err != nil {
				yield(Part{}, fmt.Errorf("anthropic: stream messages: %w", dec.err))
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(Part{}, callError(callCtx, ctx, a.timeout, "anthropic: stream messages", err))
			return
		}
		if !dec.stopped {
			yield(Part{}, fmt.Errorf("anthropic: stream messages: %w", ErrIncomplete))
		}
	}
}

// params translates req into the Messages API's request.
func (a *Anthropic) params(req Request) (anthropic.MessageNewParams, error) {
	system, conv, err := splitSystem(req.Messages)
	if err != nil {
		return anthropic.MessageNewParams{}, err
	}
	p := anthropic.MessageNewParams{
		Model:     a.model,
		MaxTokens: a.maxTokens,
		// Automatic prompt caching: the API puts a cache breakpoint on the last
		// cacheable block, so each turn reads the conversation so far from the
		// cache instead of paying for it again.
		CacheControl: anthropic.NewCacheControlEphemeralParam(),
	}
	if req.MaxOutputTokens > 0 {
		p.MaxTokens = req.MaxOutputTokens
	}
	for _, text := range system {
		p.System = append(p.System, anthropic.TextBlockParam{Text: text})
	}
	if n := len(p.System); n > 0 {
		// A breakpoint of its own, so that the system prompt and the tools stay
		// cached even when the conversation's prefix changes (compaction).
		p.System[n-1].CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	for _, t := range req.Tools {
		tool, err := anthropicTool(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	// Tool results travel in user messages. Consecutive messages of one side
	// are merged, because the API wants the sides to alternate.
	var turns [][]json.RawMessage
	var assistant []bool
	a.mu.Lock()
	defer a.mu.Unlock()
	used := make(map[Content]encodedBlock, len(a.blocks)+4)
	for _, m := range conv {
		var blocks []json.RawMessage
		for _, c := range m.Content {
			b, seen := a.blocks[c]
			if !seen {
				if b, seen = used[c]; !seen {
					var err error
					if b, err = encodeAnthropicBlock(c); err != nil {
						return p, err
					}
				}
			}
			used[c] = b
			if b.ok {
				blocks = append(blocks, b.json)
			}
		}
		if len(blocks) == 0 {
			// The API rejects empty messages; an assistant turn that produced
			// nothing (cut off at once) has nothing to send back.
			continue
		}
		isAssistant := m.Role == RoleAssistant
		if n := len(turns); n > 0 && assistant[n-1] == isAssistant {
			turns[n-1] = append(turns[n-1], blocks...)
			continue
		}
		turns = append(turns, blocks)
		assistant = append(assistant, isAssistant)
	}
	a.blocks = used // what the conversation no longer holds (compacted) goes
	for i, blocks := range turns {
		role := "user"
		if assistant[i] {
			role = "assistant"
		}
		p.Messages = append(p.Messages, param.Override[anthropic.MessageParam](anthropicMessage(role, blocks)))
	}
	return p, nil
}

// anthropicMessage is the JSON of a message of encoded blocks, as the SDK
// would write it.
func anthropicMessage(role string, blocks []json.RawMessage) json.RawMessage {
	n := len(`{"content":[],"role":""}`) + len(role) + len(blocks)
	for _, b := range blocks {
		n += len(b)
	}
	out := make([]byte, 0, n)
	out = append(out, `{"content":[`...)
	for i, b := range blocks {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	out = append(out, `],"role":"`...)
	out = append(out, role...)
	out = append(out, `"}`...)
	return out
}

// encodeAnthropicBlock encodes c as the Messages API takes it.
func encodeAnthropicBlock(c Content) (encodedBlock, error) {
	block, ok := anthropicContentBlock(c)
	if !ok {
		return encodedBlock{}, nil
	}
	b, err := block.MarshalJSON() // the SDK's encoder, which the request's goes through anyway
	if err != nil {
		return encodedBlock{}, fmt.Errorf("encode %s content: %w", c.Type, err)
	}
	return encodedBlock{json: b, ok: true}, nil
}

// anthropicContentBlock translates c; ok is false for content that is not
// sent.
func anthropicContentBlock(c Content) (block anthropic.ContentBlockParamUnion, ok bool) {
	switch c.Type {
	case ContentText:
		if c.Text != "" {
			return anthropic.NewTextBlock(c.Text), true
		}
	case ContentReasoning:
		// Thinking goes back only with the signature Anthropic gave it;
		// reasoning from another provider cannot be verified and is dropped.
		switch {
		case c.Signature == "":
		case c.Redacted:
			return anthropic.NewRedactedThinkingBlock(c.Signature), true
		default:
			return anthropic.NewThinkingBlock(c.Signature, c.Text), true
		}
	case ContentToolCall:
		return anthropic.NewToolUseBlock(c.ToolCallID, toolInput(c.Arguments), c.ToolName), true
	case ContentToolResult:
		tr := anthropic.ToolResultBlockParam{ToolUseID: c.ToolCallID}
		if c.Text != "" {
			tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: c.Text}}}
		}
		if c.IsError {
			tr.IsError = anthropic.Bool(true)
		}
		return anthropic.ContentBlockParamUnion{OfToolResult: &tr}, true
	}
	return anthropic.ContentBlockParamUnion{}, false
}

// toolInput is a tool call's arguments as the JSON object the API wants. The
// model may have produced arguments that are not a JSON object; the call is
// still sent back (its result says what was wrong), with empty input.
func toolInput(arguments string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(arguments), &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(arguments)
}

func anthropicTool(t Tool) (anthropic.ToolParam, error) {
	tool := anthropic.ToolParam{Name: t.Name}
	if t.Description != "" {
		tool.Description = anthropic.String(t.Description)
	}
	schema, err := schemaObject(t)
	if err != nil {
		return tool, err
	}
	// The SDK models the schema's well-known keys as fields; the rest of a
	// JSON schema travels as extra fields.
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			tool.InputSchema.Properties = v
		case "required":
			var required []string
			if err := json.Unmarshal(v, &required); err != nil {
				return tool, fmt.Errorf("tool %q: input schema: required: %w", t.Name, err)
			}
			tool.InputSchema.Required = required
		default:
			if tool.InputSchema.ExtraFields == nil {
				tool.InputSchema.ExtraFields = map[string]any{}
			}
			tool.InputSchema.ExtraFields[k] = v
		}
	}
	return tool, nil
}

// anthropicDecoder turns stream events into parts. Content blocks are
// addressed by index, and more than one can be open at a time.
type anthropicDecoder struct {
	blocks  map[int64]*anthropicBlock
	usage   Usage
	stop    StopReason
	stopped bool
	err     error
}

type anthropicBlock struct {
	kind      string // text, thinking, tool_use; anything else is ignored
	id        string
	signature string
	input     string // the input of a tool_use start event, when not "{}"
	deltas    bool
}

// event handles one event. It returns false when yield asks to stop; a stream
// that breaks the protocol sets d.err.
func (d *anthropicDecoder) event(ev anthropic.MessageStreamEventUnion, yield func(Part, error) bool) bool {
	if d.blocks == nil {
		d.blocks = map[int64]*anthropicBlock{}
	}
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		d.usage = Usage{
			InputTokens:      u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			OutputTokens:     u.OutputTokens,
			CacheReadTokens:  u.CacheReadInputTokens,
			CacheWriteTokens: u.CacheCreationInputTokens,
		}
	case "content_block_start":
		cb := ev.ContentBlock
		b := &anthropicBlock{kind: cb.Type}
		d.blocks[ev.Index] = b
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				return yield(Part{Type: PartTextDelta, Text: cb.Text}, nil)
			}
		case "thinking":
			b.signature = cb.Signature
			if cb.Thinking != "" {
				return yield(Part{Type: PartReasoningDelta, Text: cb.Thinking}, nil)
			}
		case "redacted_thinking":
			return yield(Part{Type: PartReasoningEnd, Signature: cb.Data, Redacted: true}, nil)
		case "tool_use":
			b.id = cb.ID
			if raw := cb.JSON.Input.Raw(); raw != "" && raw != "{}" && raw != "null" {
				b.input = raw
			}
			return yield(Part{Type: PartToolCallStart, ToolCallID: cb.ID, ToolName: cb.Name}, nil)
		}
	case "content_block_delta":
		b, ok := d.blocks[ev.Index]
		if !ok {
			d.err = fmt.Errorf("delta for content block %d that never started", ev.Index)
			return true
		}
		switch ev.Delta.Type {
		case "text_delta":
			return yield(Part{Type: PartTextDelta, Text: ev.Delta.Text}, nil)
		case "thinking_delta":
			return yield(Part{Type: PartReasoningDelta, Text: ev.Delta.Thinking}, nil)
		case "signature_delta":
			b.signature += ev.Delta.Signature
		case "input_json_delta":
			if b.kind == "tool_use" && ev.Delta.PartialJSON != "" {
				b.deltas = true
				return yield(Part{Type: PartToolCallDelta, ToolCallID: b.id, Text: ev.Delta.PartialJSON}, nil)
			}
		}
	case "content_block_stop":
		b, ok := d.blocks[ev.Index]
		if !ok {
			d.err = fmt.Errorf("stop for content block %d that never started", ev.Index)
			return true
		}
		delete(d.blocks, ev.Index)
		switch b.kind {
		case "thinking":
			return yield(Part{Type: PartReasoningEnd, Signature: b.signature}, nil)
		case "tool_use":
			// A server that sends the whole input with the start event and no
			// deltas (a proxy replaying a non-streamed answer) still delivers it.
			if !b.deltas && b.input != "" {
				if !yield(Part{Type: PartToolCallDelta, ToolCallID: b.id, Text: b.input}, nil) {
					return false
				}
			}
			return yield(Part{Type: PartToolCallEnd, ToolCallID: b.id}, nil)
		}
	case "message_delta":
		d.stop = anthropicStop(string(ev.Delta.StopReason))
		// The counts are cumulative totals; those that are absent keep the
		// value message_start gave.
		u := ev.Usage
		d.usage.OutputTokens = u.OutputTokens
		if u.JSON.CacheReadInputTokens.Valid() {
			d.usage.CacheReadTokens = u.CacheReadInputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			d.usage.CacheWriteTokens = u.CacheCreationInputTokens
		}
		if u.JSON.InputTokens.Valid() {
			d.usage.InputTokens = u.InputTokens + d.usage.CacheReadTokens + d.usage.CacheWriteTokens
		}
	case "message_stop":
		d.stopped = true
		return yield(Part{Type: PartFinish, Usage: d.usage, StopReason: d.stop}, nil)
	}
	return true
}

func anthropicStop(reason string) StopReason {
	switch reason {
	case "model_context_window_exceeded":
		return StopContextWindow
	case "":
		return StopEndTurn
	}
	// end_turn, tool_use, max_tokens, stop_sequence and refusal are already
	// the normalized names; pause_turn and future reasons pass through.
	return StopReason(reason)
}
