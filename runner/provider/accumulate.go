package provider

import (
	"errors"
	"fmt"
	"iter"
)

// ErrIncomplete is returned when a stream ends without its PartFinish: the
// connection dropped or the server stopped mid-answer.
var ErrIncomplete = errors.New("stream ended before the response was complete")

// Response is a complete model response.
type Response struct {
	// Message is the assistant message: reasoning, text and tool calls in the
	// order the model produced them.
	Message    Message    `json:"message"`
	Usage      Usage      `json:"usage"`
	StopReason StopReason `json:"stop_reason"`
}

// Collect reads a whole stream into a Response.
func Collect(stream iter.Seq2[Part, error]) (Response, error) {
	var acc Accumulator
	for part, err := range stream {
		if err != nil {
			return Response{}, err
		}
		if err := acc.Add(part); err != nil {
			return Response{}, err
		}
	}
	return acc.Response()
}

// Accumulator builds a Response from streamed parts, for callers that also
// forward the parts as they arrive (to the terminal, to JSONL events). The zero
// value is ready to use.
type Accumulator struct {
	msg      Message
	usage    Usage
	stop     StopReason
	finished bool
	// open is the index in msg.Content of the text or reasoning block that
	// deltas of its kind extend, or -1 when the next delta starts a new block.
	// A tool call in between closes it, so text after a tool call is its own
	// content, as the provider sent it.
	openText, openReasoning int
	started                 bool
	calls                   map[string]int  // tool call id -> index in msg.Content
	ended                   map[string]bool // tool call ids whose end arrived
}

func (a *Accumulator) init() {
	if a.started {
		return
	}
	a.started = true
	a.msg.Role = RoleAssistant
	a.openText, a.openReasoning = -1, -1
	a.calls = map[string]int{}
	a.ended = map[string]bool{}
}

// Add takes the next part of the stream. It fails on a stream that breaks the
// Provider contract (a delta for a tool call that never started, a part after
// PartFinish).
func (a *Accumulator) Add(p Part) error {
	a.init()
	if a.finished {
		return fmt.Errorf("accumulate: %s after the finish part", p.Type)
	}
	switch p.Type {
	case PartTextDelta:
		if p.Text == "" {
			return nil
		}
		if a.openText < 0 {
			a.msg.Content = append(a.msg.Content, Content{Type: ContentText})
			a.openText = len(a.msg.Content) - 1
			a.openReasoning = -1
		}
		a.msg.Content[a.openText].Text += p.Text
	case PartReasoningDelta:
		if p.Text == "" {
			return nil
		}
		a.reasoning().Text += p.Text
	case PartReasoningEnd:
		r := a.reasoning()
		r.Signature, r.Redacted = p.Signature, p.Redacted
		a.openReasoning = -1
	case PartToolCallStart:
		if p.ToolCallID == "" {
			return fmt.Errorf("accumulate: tool call %q starts without an id", p.ToolName)
		}
		if _, dup := a.calls[p.ToolCallID]; dup {
			return fmt.Errorf("accumulate: tool call %s starts twice", p.ToolCallID)
		}
		a.msg.Content = append(a.msg.Content, ToolCall(p.ToolCallID, p.ToolName, ""))
		a.calls[p.ToolCallID] = len(a.msg.Content) - 1
		a.openText, a.openReasoning = -1, -1
	case PartToolCallDelta:
		i, err := a.call(p)
		if err != nil {
			return err
		}
		a.msg.Content[i].Arguments += p.Text
	case PartToolCallEnd:
		if _, err := a.call(p); err != nil {
			return err
		}
		a.ended[p.ToolCallID] = true
	case PartFinish:
		a.usage, a.stop, a.finished = p.Usage, p.StopReason, true
	default:
		return fmt.Errorf("accumulate: unknown part type %q", p.Type)
	}
	return nil
}

// reasoning returns the open reasoning content, opening one if needed.
func (a *Accumulator) reasoning() *Content {
	if a.openReasoning < 0 {
		a.msg.Content = append(a.msg.Content, Content{Type: ContentReasoning})
		a.openReasoning = len(a.msg.Content) - 1
		a.openText = -1
	}
	return &a.msg.Content[a.openReasoning]
}

func (a *Accumulator) call(p Part) (int, error) {
	i, ok := a.calls[p.ToolCallID]
	if !ok {
		return 0, fmt.Errorf("accumulate: %s for tool call %q that never started", p.Type, p.ToolCallID)
	}
	if a.ended[p.ToolCallID] {
		return 0, fmt.Errorf("accumulate: %s for tool call %s after its end", p.Type, p.ToolCallID)
	}
	return i, nil
}

// Response returns the accumulated response, or ErrIncomplete if the stream
// has not delivered its PartFinish. A tool call without arguments gets "{}",
// the JSON of no arguments.
func (a *Accumulator) Response() (Response, error) {
	a.init()
	if !a.finished {
		return Response{}, fmt.Errorf("accumulate: %w", ErrIncomplete)
	}
	msg := Message{Role: RoleAssistant, Content: append([]Content(nil), a.msg.Content...)}
	for i, c := range msg.Content {
		if c.Type == ContentToolCall && c.Arguments == "" {
			msg.Content[i].Arguments = "{}"
		}
	}
	return Response{Message: msg, Usage: a.usage, StopReason: a.stop}, nil
}
