// Package anthropic is the provider of the Anthropic Messages API (POST
// /v1/messages), streamed through the Anthropic SDK: it translates
// provider's neutral requests into the API's wire format and the API's
// stream back into parts.
//
// The SDK waits whatever retry-after-ms or retry-after (seconds or an HTTP
// date) says before a retry; without them it backs off exponentially from
// half a second to at most eight, with jitter.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/aerie-run/aerie/runner/provider"
)

// DefaultMaxOutputTokens is sent when neither the request nor the Config
// caps the output, because the Messages API requires max_tokens. Every
// Claude 4 model accepts it.
const DefaultMaxOutputTokens = 32000

// Messages is the Anthropic Messages API (POST /v1/messages), streamed.
type Messages struct {
	client    anthropic.Client
	model     string
	maxTokens int64
	timeout   time.Duration
	guard     provider.Guard

	// blocks holds the encoding of each content block of the last request.
	// Every request carries the whole conversation, and the SDK encodes it
	// by reflection: over a long session that grew to milliseconds a turn,
	// nearly all of it spent on blocks already sent. last holds them in
	// order (see turns).
	mu   sync.Mutex
	last []keptBlock
	// head is the encoding of the system prompt and the tools of the last
	// request, which the next one nearly always repeats; size is the size
	// of the last body, the next one's first guess.
	head encodedHead
	size int
}

// keptBlock is a content block with its encoding.
type keptBlock struct {
	c provider.Content
	b encodedBlock
}

// encodedHead is the encoded system prompt and tools of a request, with
// what they were encoded from.
type encodedHead struct {
	system []string
	tools  []provider.Tool
	json   []byte // `,"system":[...],"tools":[...]`, each only when present
}

// encodedBlock is a content block as the Messages API takes it; ok is false
// for content that is not sent (see contentBlock).
type encodedBlock struct {
	json json.RawMessage
	ok   bool
}

// New returns a client for the Anthropic Messages API.
//
// The client reads nothing from the environment (no ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL or profile): the key and endpoint are cfg's alone.
func New(cfg provider.Config) (*Messages, error) {
	if err := cfg.Check(provider.NameAnthropic, true); err != nil {
		return nil, err
	}
	if cfg.API != "" {
		return nil, fmt.Errorf("provider: anthropic: Config.API %q: only the OpenAI providers have a choice of API", cfg.API)
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(cfg.Client()),
		// The documented header for API keys. The SDK's WithAPIKey sends
		// "Authorization: Bearer", which Anthropic-compatible proxies may not
		// accept.
		option.WithHeader("x-api-key", string(cfg.APIKey)),
		// Retries are the SDK's: it retries 408, 409, 429, 5xx and connection
		// errors with exponential backoff, waiting what retry-after-ms or
		// retry-after say when the server sends them.
		option.WithMaxRetries(cfg.Retries()),
		option.WithMiddleware(provider.RetryLog(cfg.Log(), provider.NameAnthropic, cfg.Model)),
		option.WithMiddleware(provider.IdleTimeout(cfg.IdleTimeout())),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	maxTokens := cfg.MaxOutputTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxOutputTokens
	}
	return &Messages{
		client:    anthropic.NewClient(opts...),
		model:     cfg.Model,
		maxTokens: maxTokens,
		timeout:   cfg.CallTimeout(),
		guard:     cfg.Guard(provider.NameAnthropic),
	}, nil
}

// Name returns "anthropic".
func (a *Messages) Name() string { return provider.NameAnthropic }

// Stream sends req to the Messages API and streams the answer, guarded as
// provider.Guard says.
func (a *Messages) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	return func(yield func(provider.Part, error) bool) {
		body, err := a.body(req)
		if err != nil {
			yield(provider.Part{}, fmt.Errorf("anthropic: %w", err))
			return
		}
		a.guard.Stream(ctx, func(ctx context.Context) iter.Seq2[provider.Part, error] {
			return func(yield func(provider.Part, error) bool) { a.attempt(ctx, req, body, yield) }
		})(yield)
	}
}

// attempt sends one request of body (req's encoding) and yields its parts.
func (a *Messages) attempt(
	ctx context.Context, req provider.Request, body []byte, yield func(provider.Part, error) bool,
) {
	callCtx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	// The SDK would encode the params by reflection, then compact the
	// result and copy it again to set "stream": over a long session that
	// is milliseconds a turn. The body is made here instead, of the SDK's
	// encodings of each part (see body); the params only name the model
	// for the SDK's telemetry.
	stream := a.client.Messages.NewStreaming(callCtx,
		anthropic.MessageNewParams{Model: a.model, MaxTokens: a.outputTokens(req)},
		option.WithRequestBody("application/json", body))
	defer stream.Close() //nolint:errcheck // read-only

	var dec decoder
	for stream.Next() {
		if !dec.event(stream.Current(), yield) {
			return
		}
		if dec.err != nil {
			yield(provider.Part{}, fmt.Errorf("anthropic: stream messages: %w", dec.err))
			return
		}
	}
	if err := stream.Err(); err != nil {
		yield(provider.Part{}, provider.CallError(callCtx, ctx, a.timeout, "anthropic: stream messages", apiError(err)))
		return
	}
	if !dec.stopped {
		yield(provider.Part{}, fmt.Errorf("anthropic: stream messages: %w", provider.ErrIncomplete))
	}
}

// outputTokens is the output token limit of req.
func (a *Messages) outputTokens(req provider.Request) int64 {
	if req.MaxOutputTokens > 0 {
		return req.MaxOutputTokens
	}
	return a.maxTokens
}

// params translates req into the Messages API's request, as the SDK's
// types hold it. Requests are sent as body makes them, which is the same
// request; params is what body is checked against.
func (a *Messages) params(req provider.Request) (anthropic.MessageNewParams, error) {
	system, conv, err := provider.SplitSystem(req.Messages)
	if err != nil {
		return anthropic.MessageNewParams{}, err
	}
	p := anthropic.MessageNewParams{
		Model:     a.model,
		MaxTokens: a.outputTokens(req),
	}
	p.System = systemBlocks(system)
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	turns, assistant, tail, err := a.turns(conv)
	if err != nil {
		return p, err
	}
	if tail.ok {
		// The rolling breakpoint, as the SDK encodes it: see body.
		block, _ := contentBlock(tail.c)
		*block.GetCacheControl() = anthropic.NewCacheControlEphemeralParam()
		js, err := block.MarshalJSON()
		if err != nil {
			return p, fmt.Errorf("encode %s content: %w", tail.c.Type, err)
		}
		turns[tail.turn][tail.block] = js
	}
	for i, blocks := range turns {
		p.Messages = append(p.Messages, param.Override[anthropic.MessageParam](messageJSON(roleName(assistant[i]), blocks)))
	}
	return p, nil
}

// systemBlocks is the system prompt as the API takes it.
func systemBlocks(system []string) []anthropic.TextBlockParam {
	if len(system) == 0 {
		return nil // no system field at all, rather than an empty one
	}
	blocks := make([]anthropic.TextBlockParam, len(system))
	for i, text := range system {
		blocks[i] = anthropic.TextBlockParam{Text: text}
	}
	// The stable breakpoint: the API caches tools, then system, then
	// messages, so this one keeps the tools and the system prompt cached
	// even when the conversation's prefix changes (compaction).
	blocks[len(blocks)-1].CacheControl = anthropic.NewCacheControlEphemeralParam()
	return blocks
}

func roleName(assistant bool) string {
	if assistant {
		return "assistant"
	}
	return "user"
}

// body is the JSON body of req's streamed Messages request: the request
// params builds, with "stream": true. Each part is encoded by the SDK's
// encoder, as the SDK would encode it within the whole, and kept for the
// next request (the system prompt and tools, each content block); only
// their joints are written here.
func (a *Messages) body(req provider.Request) ([]byte, error) {
	system, conv, err := provider.SplitSystem(req.Messages)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	head, err := a.encodeHead(system, req.Tools)
	if err != nil {
		return nil, err
	}
	model, err := json.Marshal(a.model)
	if err != nil {
		return nil, fmt.Errorf("encode the model name: %w", err)
	}
	// "stream" comes first: the SDK sets it again, and finds it there
	// without reading through the messages.
	b := make([]byte, 0, a.size+a.size/8)
	b = append(b, `{"stream":true,"model":`...)
	b = append(b, model...)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, a.outputTokens(req), 10)
	b = append(b, head...)
	// The messages are written as appendMessage writes them. No
	// messages (nothing but empty text) is left out, as the SDK leaves it,
	// for the API to refuse.
	role := ""
	tailEnd := 0 // where the last block that takes a breakpoint ends
	err = a.blocks(conv, func(assistant, first bool, c provider.Content, block json.RawMessage) {
		switch {
		case role == "":
			b = append(b, `,"messages":[{"content":[`...)
		case first:
			b = append(b, `],"role":"`...)
			b = append(b, role...)
			b = append(b, `"},{"content":[`...)
		default:
			b = append(b, ',')
		}
		b = append(b, block...)
		if cacheable(c) {
			tailEnd = len(b)
		}
		role = roleName(assistant)
	})
	if err != nil {
		return nil, err
	}
	if tailEnd > 0 {
		// The rolling breakpoint, on the last block that takes one, so that
		// each turn reads the conversation so far from the cache and caches
		// it up to its end for the next. It is the block's last key, where
		// the SDK puts it in the middle: the next request's bytes then
		// repeat this one's to the end of this block's content. The same
		// JSON value as params's.
		b = slices.Insert(b, tailEnd-1, []byte(`,"cache_control":{"type":"ephemeral"}`)...)
	}
	if role != "" {
		b = append(b, `],"role":"`...)
		b = append(b, role...)
		b = append(b, `"}]`...)
	}
	b = append(b, '}')
	a.size = len(b)
	return b, nil
}

// encodeHead returns the encoding of the system prompt and the tools,
// kept from the last request when they are the same. a.mu must be held.
func (a *Messages) encodeHead(system []string, tools []provider.Tool) ([]byte, error) {
	h := &a.head
	if h.json != nil && slices.Equal(h.system, system) && slices.EqualFunc(h.tools, tools, sameTool) {
		return h.json, nil
	}
	var b []byte
	if blocks := systemBlocks(system); len(blocks) > 0 {
		b = append(b, `,"system":[`...)
		for i, block := range blocks {
			js, err := block.MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("encode the system prompt: %w", err)
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, js...)
		}
		b = append(b, ']')
	}
	if len(tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range tools {
			tool, err := toolParam(t)
			if err != nil {
				return nil, err
			}
			js, err := anthropic.ToolUnionParam{OfTool: &tool}.MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("encode tool %q: %w", t.Name, err)
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, js...)
		}
		b = append(b, ']')
	}
	if b == nil {
		b = []byte{}
	}
	*h = encodedHead{system: slices.Clone(system), tools: slices.Clone(tools), json: b}
	return b, nil
}

func sameTool(a, b provider.Tool) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema)
}

// turns groups the conversation's encoded blocks into the API's messages
// (see blocks), and says which block takes the rolling breakpoint. a.mu
// must be held.
func (a *Messages) turns(
	conv []provider.Message,
) (turns [][]json.RawMessage, assistant []bool, tail tailBlock, err error) {
	err = a.blocks(conv, func(isAssistant, first bool, c provider.Content, b json.RawMessage) {
		if first {
			turns = append(turns, nil)
			assistant = append(assistant, isAssistant)
		}
		turns[len(turns)-1] = append(turns[len(turns)-1], b)
		if cacheable(c) {
			tail = tailBlock{c: c, turn: len(turns) - 1, block: len(turns[len(turns)-1]) - 1, ok: true}
		}
	})
	return turns, assistant, tail, err
}

// tailBlock is the block of a request that takes the rolling cache
// breakpoint: the last one sent that can carry one.
type tailBlock struct {
	c           provider.Content
	turn, block int
	ok          bool
}

// cacheable says whether a sent block of c can carry a cache breakpoint:
// thinking cannot.
func cacheable(c provider.Content) bool { return c.Type != provider.ContentReasoning }

// blocks encodes the conversation's content blocks, reusing the encodings
// of the last request, and yields those that are sent, in order, saying
// which side sends each and whether it starts a message: tool results
// travel in user messages, and consecutive messages of one side are merged,
// because the API wants the sides to alternate. a.mu must be held.
//
// A conversation that only grew since the last request, as it does turn
// after turn, finds its blocks at the same places in a.last, and the new
// ones are appended to it. Any other (compacted, forked) has its blocks
// looked up by value among the last request's.
func (a *Messages) blocks(
	conv []provider.Message,
	yield func(assistant, first bool, c provider.Content, b json.RawMessage),
) error {
	n := 0                                      // blocks so far
	var index map[provider.Content]encodedBlock // the last request's blocks, once the prefix is left
	var kept []keptBlock                        // this request's blocks, once the prefix is left
	started, side := false, false               // whether a message is open, and its side
	for _, m := range conv {
		isAssistant := m.Role == provider.RoleAssistant
		for _, c := range m.Content {
			var b encodedBlock
			switch {
			case index == nil && n < len(a.last) && a.last[n].c == c:
				b = a.last[n].b
			case index == nil && n == len(a.last):
				var err error
				if b, err = encodeBlock(c); err != nil {
					return err
				}
				a.last = append(a.last, keptBlock{c, b})
			default:
				if index == nil {
					index = make(map[provider.Content]encodedBlock, len(a.last))
					for _, k := range a.last {
						index[k.c] = k.b
					}
					kept = append(make([]keptBlock, 0, len(a.last)+8), a.last[:n]...)
				}
				var seen bool
				if b, seen = index[c]; !seen {
					var err error
					if b, err = encodeBlock(c); err != nil {
						return err
					}
					index[c] = b
				}
				kept = append(kept, keptBlock{c, b})
			}
			n++
			// A message with nothing to send (an assistant turn cut off at
			// once) is left out: the API rejects empty messages.
			if b.ok {
				first := !started || side != isAssistant
				started, side = true, isAssistant
				yield(isAssistant, first, c, b.json)
			}
		}
	}
	// What the conversation no longer holds (compacted) goes.
	if index != nil {
		a.last = kept
	} else {
		clear(a.last[n:])
		a.last = a.last[:n]
	}
	return nil
}

// messageJSON is the JSON of a message of encoded blocks, as the SDK
// would write it.
func messageJSON(role string, blocks []json.RawMessage) json.RawMessage {
	n := len(`{"content":[],"role":""}`) + len(role) + len(blocks)
	for _, b := range blocks {
		n += len(b)
	}
	return appendMessage(make([]byte, 0, n), role, blocks)
}

// appendMessage appends the JSON of a message of encoded blocks.
func appendMessage(out []byte, role string, blocks []json.RawMessage) []byte {
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

// encodeBlock encodes c as the Messages API takes it.
func encodeBlock(c provider.Content) (encodedBlock, error) {
	block, ok := contentBlock(c)
	if !ok {
		return encodedBlock{}, nil
	}
	b, err := block.MarshalJSON() // the SDK's encoder, which the request's goes through anyway
	if err != nil {
		return encodedBlock{}, fmt.Errorf("encode %s content: %w", c.Type, err)
	}
	return encodedBlock{json: b, ok: true}, nil
}

// contentBlock translates c; ok is false for content that is not
// sent.
func contentBlock(c provider.Content) (block anthropic.ContentBlockParamUnion, ok bool) {
	switch c.Type {
	case provider.ContentText:
		if c.Text != "" {
			return anthropic.NewTextBlock(c.Text), true
		}
	case provider.ContentReasoning:
		// Thinking goes back only with the signature Anthropic gave it;
		// reasoning from another provider cannot be verified and is dropped.
		switch {
		case c.Signature == "":
		case c.Redacted:
			return anthropic.NewRedactedThinkingBlock(c.Signature), true
		default:
			return anthropic.NewThinkingBlock(c.Signature, c.Text), true
		}
	case provider.ContentToolCall:
		return anthropic.NewToolUseBlock(c.ToolCallID, toolInput(c.Arguments), c.ToolName), true
	case provider.ContentToolResult:
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

func toolParam(t provider.Tool) (anthropic.ToolParam, error) {
	tool := anthropic.ToolParam{Name: t.Name}
	if t.Description != "" {
		tool.Description = anthropic.String(t.Description)
	}
	schema, err := t.Schema()
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

// decoder turns stream events into parts. Content blocks are
// addressed by index, and more than one can be open at a time.
type decoder struct {
	blocks  map[int64]*streamBlock
	usage   provider.Usage
	stop    provider.StopReason
	stopped bool
	err     error
}

type streamBlock struct {
	kind      string // text, thinking, tool_use; anything else is ignored
	id        string
	signature string
	input     string // the input of a tool_use start event, when not "{}"
	deltas    bool
}

// The kinds of content block the decoder reads; it ignores the others.
const (
	blockText     = "text"
	blockThinking = "thinking"
	blockToolUse  = "tool_use"
)

// event handles one event. It returns false when yield asks to stop; a stream
// that breaks the protocol sets d.err. The event is large, so the steps take
// it by pointer.
func (d *decoder) event(ev anthropic.MessageStreamEventUnion, yield func(provider.Part, error) bool) bool {
	if d.blocks == nil {
		d.blocks = map[int64]*streamBlock{}
	}
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		d.usage = provider.Usage{
			InputTokens:      u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			OutputTokens:     u.OutputTokens,
			CacheReadTokens:  u.CacheReadInputTokens,
			CacheWriteTokens: u.CacheCreationInputTokens,
		}
	case "content_block_start":
		return d.blockStart(&ev, yield)
	case "content_block_delta":
		return d.blockDelta(&ev, yield)
	case "content_block_stop":
		return d.blockStop(&ev, yield)
	case "message_delta":
		d.messageDelta(&ev)
	case "message_stop":
		d.stopped = true
		return yield(provider.Part{Type: provider.PartFinish, Usage: d.usage, StopReason: d.stop}, nil)
	}
	return true
}

// blockStart opens the content block ev starts and yields the part that
// starts it, if any.
func (d *decoder) blockStart(ev *anthropic.MessageStreamEventUnion, yield func(provider.Part, error) bool) bool {
	cb := &ev.ContentBlock
	b := &streamBlock{kind: cb.Type}
	d.blocks[ev.Index] = b
	switch cb.Type {
	case blockText:
		if cb.Text != "" {
			return yield(provider.Part{Type: provider.PartTextDelta, Text: cb.Text}, nil)
		}
	case blockThinking:
		b.signature = cb.Signature
		if cb.Thinking != "" {
			return yield(provider.Part{Type: provider.PartReasoningDelta, Text: cb.Thinking}, nil)
		}
	case "redacted_thinking":
		return yield(provider.Part{Type: provider.PartReasoningEnd, Signature: cb.Data, Redacted: true}, nil)
	case blockToolUse:
		b.id = cb.ID
		if raw := cb.JSON.Input.Raw(); raw != "" && raw != "{}" && raw != "null" {
			b.input = raw
		}
		return yield(provider.Part{Type: provider.PartToolCallStart, ToolCallID: cb.ID, ToolName: cb.Name}, nil)
	}
	return true
}

// blockDelta yields the part of an open block's delta; a signature is kept
// for the block's end.
func (d *decoder) blockDelta(ev *anthropic.MessageStreamEventUnion, yield func(provider.Part, error) bool) bool {
	b, ok := d.blocks[ev.Index]
	if !ok {
		d.err = fmt.Errorf("delta for content block %d that never started", ev.Index)
		return true
	}
	switch ev.Delta.Type {
	case "text_delta":
		return yield(provider.Part{Type: provider.PartTextDelta, Text: ev.Delta.Text}, nil)
	case "thinking_delta":
		return yield(provider.Part{Type: provider.PartReasoningDelta, Text: ev.Delta.Thinking}, nil)
	case "signature_delta":
		b.signature += ev.Delta.Signature
	case "input_json_delta":
		if b.kind == blockToolUse && ev.Delta.PartialJSON != "" {
			b.deltas = true
			return yield(provider.Part{Type: provider.PartToolCallDelta, ToolCallID: b.id, Text: ev.Delta.PartialJSON}, nil)
		}
	}
	return true
}

// blockStop closes an open block and yields the parts that end it.
func (d *decoder) blockStop(ev *anthropic.MessageStreamEventUnion, yield func(provider.Part, error) bool) bool {
	b, ok := d.blocks[ev.Index]
	if !ok {
		d.err = fmt.Errorf("stop for content block %d that never started", ev.Index)
		return true
	}
	delete(d.blocks, ev.Index)
	switch b.kind {
	case blockThinking:
		return yield(provider.Part{Type: provider.PartReasoningEnd, Signature: b.signature}, nil)
	case blockToolUse:
		// A server that sends the whole input with the start event and no
		// deltas (a proxy replaying a non-streamed answer) still delivers it.
		if !b.deltas && b.input != "" {
			if !yield(provider.Part{Type: provider.PartToolCallDelta, ToolCallID: b.id, Text: b.input}, nil) {
				return false
			}
		}
		return yield(provider.Part{Type: provider.PartToolCallEnd, ToolCallID: b.id}, nil)
	}
	return true
}

// messageDelta records the stop reason and the usage so far.
func (d *decoder) messageDelta(ev *anthropic.MessageStreamEventUnion) {
	d.stop = stopReason(string(ev.Delta.StopReason))
	// The counts are cumulative totals; those that are absent keep the
	// value message_start gave.
	u := &ev.Usage
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
}

func stopReason(reason string) provider.StopReason {
	switch reason {
	case "model_context_window_exceeded":
		return provider.StopContextWindow
	case "":
		return provider.StopEndTurn
	}
	// end_turn, tool_use, max_tokens, stop_sequence and refusal are already
	// the normalized names; pause_turn and future reasons pass through.
	return provider.StopReason(reason)
}

// Encode returns the JSON body Stream sends for req, without sending it.
func (a *Messages) Encode(req provider.Request) ([]byte, error) { return a.body(req) }
