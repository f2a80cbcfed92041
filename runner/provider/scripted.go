package provider

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sync"
)

// ErrScriptExhausted is returned by a Scripted provider asked for more turns
// than its script has.
var ErrScriptExhausted = errors.New("the script has no turn left")

// Scripted replays a script of model turns, one per request, for demos and CI
// dry runs that need no model API. See ParseScript for the file format.
//
// It checks each request as the real providers do, so a dry run fails on a
// conversation a real model API would reject; it does not check that the
// scripted tool calls name the request's tools, so that a script can exercise
// the agent's handling of an unknown tool.
type Scripted struct {
	name  string
	turns []Response

	mu   sync.Mutex
	next int
}

// NewScripted returns a provider that replays turns. name identifies the
// script in errors.
func NewScripted(name string, turns []Response) *Scripted {
	return &Scripted{name: name, turns: turns}
}

// LoadScript reads and parses the script file at path.
func LoadScript(path string) (*Scripted, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	turns, err := ParseScript(filepath.Base(path), data)
	if err != nil {
		return nil, err
	}
	return NewScripted(filepath.Base(path), turns), nil
}

// LoadScripted returns the scripted provider cfg configures: it checks that
// cfg names a script and no API or key, and loads cfg.ScriptPath.
func LoadScripted(cfg Config) (*Scripted, error) {
	var errs []error
	if cfg.ScriptPath == "" {
		errs = append(errs, errors.New("Config.ScriptPath is empty; name the script file to replay"))
	}
	if cfg.API != "" {
		errs = append(errs, fmt.Errorf("Config.API %q: only the OpenAI providers have a choice of API", cfg.API))
	}
	if cfg.APIKey != "" {
		errs = append(errs, errors.New("Config.APIKey is set; the scripted provider calls no API and takes no key"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("provider: scripted: %w", err)
	}
	return LoadScript(cfg.ScriptPath)
}

// Name returns "scripted".
func (s *Scripted) Name() string { return NameScripted }

// Remaining returns the number of turns not yet replayed.
func (s *Scripted) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns) - s.next
}

// Stream answers req with the script's next turn.
func (s *Scripted) Stream(ctx context.Context, req Request) iter.Seq2[Part, error] {
	return func(yield func(Part, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(Part{}, fmt.Errorf("scripted: %w", err))
			return
		}
		if _, _, err := SplitSystem(req.Messages); err != nil {
			yield(Part{}, fmt.Errorf("scripted: %w", err))
			return
		}
		turn, n, ok := s.take()
		if !ok {
			yield(Part{}, fmt.Errorf("scripted: %s: request %d: %w (the script has %d turns)",
				s.name, n, ErrScriptExhausted, len(s.turns)))
			return
		}
		for _, p := range turnParts(turn) {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// take returns the next turn and the 1-based number of the request.
func (s *Scripted) take() (Response, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.next + 1
	if s.next >= len(s.turns) {
		return Response{}, n, false
	}
	s.next++
	return s.turns[n-1], n, true
}

// turnParts is the stream that Collect turns back into r.
func turnParts(r Response) []Part {
	var parts []Part
	for _, c := range r.Message.Content {
		switch c.Type {
		case ContentText:
			parts = append(parts, Part{Type: PartTextDelta, Text: c.Text})
		case ContentReasoning:
			if c.Text != "" {
				parts = append(parts, Part{Type: PartReasoningDelta, Text: c.Text})
			}
			parts = append(parts, Part{Type: PartReasoningEnd, Signature: c.Signature, Redacted: c.Redacted})
		case ContentToolCall:
			parts = append(parts,
				Part{Type: PartToolCallStart, ToolCallID: c.ToolCallID, ToolName: c.ToolName},
				Part{Type: PartToolCallDelta, ToolCallID: c.ToolCallID, Text: c.Arguments},
				Part{Type: PartToolCallEnd, ToolCallID: c.ToolCallID})
		}
	}
	return append(parts, Part{Type: PartFinish, Usage: r.Usage, StopReason: r.StopReason})
}
