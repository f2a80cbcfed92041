package provider

import (
	"errors"
	"fmt"
	"iter"
	"strings"
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
	// bufs[i] holds the text (or a tool call's arguments) of msg.Content[i]
	// as it grows: appending the deltas to a string would copy all of it
	// at each one, quadratic in the answer's size.
	bufs  []*strings.Builder
	calls map[string]int  // tool call id -> index in msg.Content
	ended map[string]bool // tool call ids whose end arrived
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
			a.openText = a.open(Content{Type: ContentText})
			a.openReasoning = -1
		}
		a.bufs[a.openText].WriteString(p.Text)
	case PartReasoningDelta:
		if p.Text == "" {
			return nil
		}
		a.bufs[a.reasoning()].WriteString(p.Text)
	case PartReasoningEnd:
		r := &a.msg.Content[a.reasoning()]
		r.Signature, r.Redacted = p.Signature, p.Redacted
		a.openReasoning = -1
	case PartToolCallStart:
		if p.ToolCallID == "" {
			return fmt.Errorf("accumulate: tool call %q starts without an id", p.ToolName)
		}
		if _, dup := a.calls[p.ToolCallID]; dup {
			return fmt.Errorf("accumulate: tool call %s starts twice", p.ToolCallID)
		}
		a.calls[p.ToolCallID] = a.open(ToolCall(p.ToolCallID, p.ToolName, ""))
		a.openText, a.openReasoning = -1, -1
	case PartToolCallDelta:
		i, err := a.call(p)
		if err != nil {
			return err
		}
		a.bufs[i].WriteString(p.Text)
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

// open adds c to the message and returns its index.
func (a *Accumulator) open(c Content) int {
	a.msg.Content = append(a.msg.Content, c)
	a.bufs = append(a.bufs, new(strings.Builder))
	return len(a.msg.Content) - 1
}

// reasoning returns the index of the open reasoning content, opening one if
// needed.
func (a *Accumulator) reasoning() int {
	if a.openReasoning < 0 {
		a.openReasoning = a.open(Content{Type: ContentReasoning})
		a.openText = -1
	}
	return a.openReasoning
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
		// String shares the builder's bytes: no copy of the answer.
		switch s := a.bufs[i].String(); {
		case c.Type != ContentToolCall:
			msg.Content[i].Text = s
		case s == "":
			msg.Content[i].Arguments = "{}"
		default:
			msg.Content[i].Arguments = s
		}
	}
	return Response{Message: msg, Usage: a.usage, StopReason: a.stop}, nil
}
