package compaction_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/aerie-run/aerie/runner/provider"
)

// summarizer is a Summarizer whose answer is made by a function of the
// request, and which keeps the requests it gets.
type summarizer struct {
	answer func(ctx context.Context, req provider.Request) (string, error)
	// usage is what each answer reports it used.
	usage provider.Usage

	mu       sync.Mutex
	requests []provider.Request
}

func answering(text string) *summarizer {
	return &summarizer{answer: func(context.Context, provider.Request) (string, error) { return text, nil }}
}

func (s *summarizer) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	return func(yield func(provider.Part, error) bool) {
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		text, err := s.answer(ctx, req)
		if err != nil {
			yield(provider.Part{}, err)
			return
		}
		if !yield(provider.Part{Type: provider.PartTextDelta, Text: text}, nil) {
			return
		}
		yield(provider.Part{Type: provider.PartFinish, StopReason: provider.StopEndTurn, Usage: s.usage}, nil)
	}
}

func (s *summarizer) calls() []provider.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]provider.Request(nil), s.requests...)
}

// session is a conversation of a task and n turns, each a tool call and
// its result of resultBytes bytes.
func session(n, resultBytes int) []provider.Message {
	msgs := []provider.Message{provider.UserMessage("Fix the failing test in ./pkg.")}
	for i := range n {
		id := fmt.Sprintf("call_%d", i+1)
		msgs = append(msgs,
			provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{
				provider.Text(fmt.Sprintf("Step %d.", i+1)),
				provider.ToolCall(id, "bash", `{"command":"go test ./pkg"}`),
			}},
			provider.Message{Role: provider.RoleTool, Content: []provider.Content{
				provider.ToolResult(id, strings.Repeat("x", resultBytes), false),
			}},
		)
	}
	return msgs
}
