package store

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aerie-run/aerie/runner/transcript"
)

// checkCut reports whether a fork may copy a session through sequence number
// at. toolEntries are the session's tool calls and completions up to at, in
// order. A cut is valid when no tool call at or before it is still waiting
// for its completion: the copy must not end in the middle of a tool
// exchange, which no provider would accept as a conversation.
func checkCut(toolEntries []transcript.Entry, at int64) error {
	open := make(map[string]int64) // call id -> sequence number of the call
	for _, e := range toolEntries {
		if e.Seq > at {
			break
		}
		switch p := e.Payload.(type) {
		case transcript.ToolCall:
			open[p.CallID] = e.Seq
		case transcript.ToolCompletion:
			delete(open, p.CallID)
		}
	}
	if len(open) == 0 {
		return nil
	}
	calls := make([]string, 0, len(open))
	for id, seq := range open {
		calls = append(calls, fmt.Sprintf("%s (entry %d)", id, seq))
	}
	slices.Sort(calls)
	return fmt.Errorf("cut at %d is inside open tool calls %s: %w", at, strings.Join(calls, ", "), ErrInvalidCut)
}
