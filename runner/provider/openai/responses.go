package openai

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aerie-run/aerie/runner/provider"
)

// Responses is the OpenAI Responses API (POST /responses), streamed.
//
// Requests are stateless: every request carries the whole conversation and
// asks the server not to store the response (store: false), so no session
// state lives at OpenAI and a resumed or forked session needs nothing there.
// The price is that the reasoning items of reasoning models are not sent back
// in later requests.
type Responses struct {
	name      string
	client    responses.ResponseService
	model     string
	maxTokens int64
	timeout   time.Duration
	guard     provider.Guard
}

// NewResponses returns a Responses API client for provider openai (or
// openai-compatible, for servers that implement the Responses API).
//
// The client reads nothing from the environment: everything comes from cfg.
func NewResponses(cfg provider.Config) (*Responses, error) {
	opts, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	return &Responses{
		name:      cfg.Provider,
		client:    responses.NewResponseService(opts...),
		model:     cfg.Model,
		maxTokens: cfg.MaxOutputTokens,
		timeout:   cfg.CallTimeout(),
		guard:     cfg.Guard(cfg.Provider),
	}, nil
}

// Name returns "openai" or "openai-compatible".
func (o *Responses) Name() string { return o.name }

// Stream sends req to the Responses API and streams the answer.
func (o *Responses) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	call := streamCall{name: o.name, op: "stream response", timeout: o.timeout, guard: o.guard}
	return streamed(ctx, call, func() (responses.ResponseNewParams, error) { return o.params(req) },
		func(ctx context.Context, p responses.ResponseNewParams) *ssestream.Stream[responses.ResponseStreamEventUnion] {
			return o.client.NewStreaming(ctx, p)
		},
		func() decoder[responses.ResponseStreamEventUnion] {
			return &responsesDecoder{items: map[string]*responsesItem{}}
		})
}

func (o *Responses) params(req provider.Request) (responses.ResponseNewParams, error) {
	system, conv, err := provider.SplitSystem(req.Messages)
	if err != nil {
		return responses.ResponseNewParams{}, err
	}
	p := responses.ResponseNewParams{
		Model: o.model,
		Store: openai.Bool(false),
	}
	if len(system) > 0 {
		p.Instructions = openai.String(joinText(system))
	}
	if max := cmp.Or(req.MaxOutputTokens, o.maxTokens); max > 0 {
		p.MaxOutputTokens = openai.Int(max)
	}
	var input responses.ResponseInputParam
	for _, m := range conv {
		input = append(input, responsesItems(m)...)
	}
	p.Input.OfInputItemList = input
	for _, t := range req.Tools {
		schema, err := schemaMap(t)
		if err != nil {
			return p, err
		}
		// Not strict: strict mode accepts only schemas that list every
		// property as required and forbid additional ones, and tool schemas
		// come from layers and MCP servers that do not follow that rule.
		tool := responses.ToolParamOfFunction(t.Name, schema, false)
		if t.Description != "" {
			tool.OfFunction.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, tool)
	}
	return p, nil
}

func responsesItems(m provider.Message) []responses.ResponseInputItemUnionParam {
	var items []responses.ResponseInputItemUnionParam
	message := func(role responses.EasyInputMessageRole, text string) {
		if text == "" {
			return
		}
		items = append(items, responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
			Role:    role,
			Content: responses.EasyInputMessageContentUnionParam{OfString: openai.String(text)},
		}})
	}
	switch m.Role {
	case provider.RoleUser:
		message(responses.EasyInputMessageRoleUser, m.Text())
	case provider.RoleTool:
		// The API has no error flag: the text itself says that the tool failed.
		for _, c := range m.Content {
			items = append(items, responses.ResponseInputItemUnionParam{
				OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: openai.String(c.ToolCallID),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(c.Text)},
				},
			})
		}
	case provider.RoleAssistant:
		// Text and calls in the order the model produced them; consecutive
		// text contents make one message.
		var text string
		for _, c := range m.Content {
			switch c.Type {
			case provider.ContentText:
				text += c.Text
			case provider.ContentToolCall:
				message(responses.EasyInputMessageRoleAssistant, text)
				text = ""
				items = append(items, responses.ResponseInputItemParamOfFunctionCall(c.Arguments, c.ToolCallID, c.ToolName))
			}
		}
		message(responses.EasyInputMessageRoleAssistant, text)
	}
	return items
}

// responsesDecoder turns stream events into parts. Output items are addressed
// by item id; a function call's call_id is what pairs it with its result.
type responsesDecoder struct {
	items map[string]*responsesItem
	calls bool
	done  bool
}

// The types of the output items the decoder handles; it ignores the others.
const (
	itemFunctionCall = "function_call"
	itemMessage      = "message"
	itemReasoning    = "reasoning"
)

type responsesItem struct {
	kind   string // function_call, reasoning, message
	callID string
	deltas bool // its text, reasoning or arguments arrived in deltas
	ended  bool
}

func (d *responsesDecoder) decode(
	ev responses.ResponseStreamEventUnion, yield func(provider.Part, error) bool,
) (bool, error) {
	switch ev.Type {
	case "response.output_item.added":
		return d.start(ev.Item, yield), nil
	case "response.output_text.delta":
		if it, ok := d.items[ev.ItemID]; ok {
			it.deltas = true
		}
		return yield(provider.Part{Type: provider.PartTextDelta, Text: ev.Delta}, nil), nil
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		if it, ok := d.items[ev.ItemID]; ok {
			it.deltas = true
		}
		return yield(provider.Part{Type: provider.PartReasoningDelta, Text: ev.Delta}, nil), nil
	case "response.function_call_arguments.delta":
		it, ok := d.items[ev.ItemID]
		if !ok || it.kind != itemFunctionCall {
			return false, fmt.Errorf("arguments for function call item %q that never started", ev.ItemID)
		}
		if ev.Delta == "" {
			return true, nil
		}
		it.deltas = true
		return yield(provider.Part{Type: provider.PartToolCallDelta, ToolCallID: it.callID, Text: ev.Delta}, nil), nil
	case "response.output_item.done":
		return d.end(ev.Item, yield), nil
	case "response.completed", "response.incomplete":
		return d.finish(ev.Response, yield), nil
	case "response.failed":
		// The error's type is the event's.
		e := ev.Response.Error
		return false, &provider.APIError{StatusCode: http.StatusOK, Type: ev.Type, Code: string(e.Code), Message: e.Message}
	case "error":
		return false, &provider.APIError{StatusCode: http.StatusOK, Type: ev.Type, Code: ev.Code, Message: ev.Message}
	}
	return true, nil
}

// complete: the finish part came with response.completed or
// response.incomplete; a stream that ended without one is incomplete.
func (d *responsesDecoder) complete(func(provider.Part, error) bool) error {
	if !d.done {
		return provider.ErrIncomplete
	}
	return nil
}

func (d *responsesDecoder) start(item responses.ResponseOutputItemUnion, yield func(provider.Part, error) bool) bool {
	it := &responsesItem{kind: item.Type}
	d.items[item.ID] = it
	if item.Type == itemFunctionCall {
		// The conversation needs an id to pair the call with its result, even
		// from a server that leaves call_id out.
		it.callID = cmp.Or(item.CallID, item.ID, newCallID())
		d.calls = true
		return yield(provider.Part{Type: provider.PartToolCallStart, ToolCallID: it.callID, ToolName: item.Name}, nil)
	}
	return true
}

func (d *responsesDecoder) end(item responses.ResponseOutputItemUnion, yield func(provider.Part, error) bool) bool {
	it, ok := d.items[item.ID]
	if !ok {
		// A server that announces items only when they are done.
		if !d.start(item, yield) {
			return false
		}
		it = d.items[item.ID]
	}
	if it.ended {
		return true
	}
	it.ended = true
	switch item.Type {
	case itemFunctionCall:
		// Without argument deltas, the finished item is the only place the
		// arguments appear.
		if !it.deltas && item.Arguments.OfString != "" {
			args := provider.Part{Type: provider.PartToolCallDelta, ToolCallID: it.callID, Text: item.Arguments.OfString}
			if !yield(args, nil) {
				return false
			}
		}
		return yield(provider.Part{Type: provider.PartToolCallEnd, ToolCallID: it.callID}, nil)
	case itemMessage:
		// Likewise for text: a server that streams no deltas still sends the
		// finished message.
		if !it.deltas {
			for _, c := range item.Content {
				if c.Type == "output_text" && c.Text != "" {
					if !yield(provider.Part{Type: provider.PartTextDelta, Text: c.Text}, nil) {
						return false
					}
				}
			}
		}
	case itemReasoning:
		if !it.deltas {
			for _, sum := range item.Summary {
				if sum.Text != "" {
					it.deltas = true
					if !yield(provider.Part{Type: provider.PartReasoningDelta, Text: sum.Text}, nil) {
						return false
					}
				}
			}
		}
		// Reasoning the server kept to itself (no summary) leaves nothing to
		// show or to keep.
		if it.deltas {
			return yield(provider.Part{Type: provider.PartReasoningEnd}, nil)
		}
	}
	return true
}

func (d *responsesDecoder) finish(r responses.Response, yield func(provider.Part, error) bool) bool {
	d.done = true
	u := r.Usage
	usage := provider.Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.InputTokensDetails.CachedTokens,
		CacheWriteTokens: u.InputTokensDetails.CacheWriteTokens,
	}
	stop := provider.StopEndTurn
	switch {
	case r.Status == responses.ResponseStatusIncomplete:
		switch reason := r.IncompleteDetails.Reason; reason {
		case "max_output_tokens":
			stop = provider.StopMaxTokens
		case "content_filter":
			stop = provider.StopRefusal
		default:
			stop = provider.StopReason(reason)
		}
	case d.calls:
		stop = provider.StopToolUse
	}
	return yield(provider.Part{Type: provider.PartFinish, Usage: usage, StopReason: stop}, nil)
}

// Encode returns the JSON body Stream sends for req, without sending it
// (and without "stream", which the SDK adds on sending).
func (o *Responses) Encode(req provider.Request) ([]byte, error) {
	p, err := o.params(req)
	if err != nil {
		return nil, err
	}
	return p.MarshalJSON()
}
