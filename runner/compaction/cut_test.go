package compaction_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/transcript"
)

// tails returns the tail estimate of msgs.
func tails(msgs []provider.Message) func(int) int64 {
	var tr compaction.Tracker
	tr.Observe(msgs, transcript.Usage{})
	return tr.Tail
}

func TestSelectCut(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("y", 40_000) // 10,000 tokens: larger than the band
	for _, tc := range []struct {
		name    string
		msgs    []provider.Message
		ceiling int64
		want    int // the cut's index; -1 for none
	}{
		{"too short", session(1, 100), 0, -1},
		// Results of 4,000 bytes: each turn is ~1,020 tokens, so the
		// largest tail within 8,000 tokens keeps 7 turns.
		{"in the band", session(20, 4_000), 0, 41 - 14},
		// Small turns: the tail is bounded by MinRemoved, not the band.
		{"below the band", session(3, 100), 0, 5}, // 4 is a tool message
		{"a large result above the band", append(session(20, 100), bigTurn(big)...), 0, 41},
		{"a large result over the ceiling", append(session(20, 100), bigTurn(big)...), 9_000, 43},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cut, ok := compaction.SelectCut(tc.msgs, tails(tc.msgs), tc.ceiling)
			if tc.want < 0 {
				if ok {
					t.Fatalf("cut %+v, want none", cut)
				}
				return
			}
			if !ok || cut.Index != tc.want {
				t.Fatalf("cut %+v (%v), want index %d", cut, ok, tc.want)
			}
			if got := tails(tc.msgs)(cut.Index); cut.TailTokens != got {
				t.Errorf("TailTokens %d, want %d", cut.TailTokens, got)
			}
		})
	}
}

func bigTurn(result string) []provider.Message {
	return []provider.Message{
		{Role: provider.RoleAssistant, Content: []provider.Content{provider.ToolCall("big", "bash", `{"command":"make"}`)}},
		{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("big", result, false)}},
	}
}

// conversation builds a well-formed conversation from data: each byte
// adds a user message, an assistant answer, or an assistant's tool calls
// with their results, of a size the byte chooses.
func conversation(data []byte) []provider.Message {
	var msgs []provider.Message
	call := 0
	for i, b := range data {
		size := int(b) * 97 % 30_000
		switch b % 3 {
		case 0:
			msgs = append(msgs, provider.UserMessage(strings.Repeat("u", size)))
		case 1:
			msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: []provider.Content{provider.Text(strings.Repeat("a", size))}})
		default:
			n := 1 + i%3
			a := provider.Message{Role: provider.RoleAssistant}
			r := provider.Message{Role: provider.RoleTool}
			for range n {
				call++
				id := fmt.Sprintf("c%d", call)
				a.Content = append(a.Content, provider.ToolCall(id, "bash", "{}"))
				r.Content = append(r.Content, provider.ToolResult(id, strings.Repeat("r", size/n), false))
			}
			msgs = append(msgs, a, r)
		}
	}
	return msgs
}

// FuzzSelectCut checks the cut's invariants on any well-formed
// conversation: it replaces at least four messages, keeps every tool call
// with its results, keeps a tail within the band whenever one exists (the
// largest such), and exists whenever the conversation is long enough.
func FuzzSelectCut(f *testing.F) {
	f.Add([]byte{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, int64(0))
	f.Add([]byte{0, 1, 2, 200, 2, 2, 1, 0, 255, 2}, int64(9_000))
	f.Add([]byte{0, 1}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, ceiling int64) {
		msgs := conversation(data)
		tail := tails(msgs)
		cut, ok := compaction.SelectCut(msgs, tail, ceiling)
		if ok != (len(msgs) >= compaction.MinRemoved) {
			t.Fatalf("%d messages: viable %v", len(msgs), ok)
		}
		if !ok {
			return
		}
		if cut.Index < compaction.MinRemoved || cut.Index > len(msgs) {
			t.Fatalf("cut at %d of %d messages", cut.Index, len(msgs))
		}
		if cut.TailTokens != tail(cut.Index) {
			t.Fatalf("TailTokens %d, want %d", cut.TailTokens, tail(cut.Index))
		}
		calls := map[string]bool{}
		for _, m := range msgs[:cut.Index] {
			for _, c := range m.ToolCalls() {
				calls[c.ToolCallID] = true
			}
		}
		for _, m := range msgs[cut.Index:] {
			for _, c := range m.Content {
				if c.Type == provider.ContentToolResult && calls[c.ToolCallID] {
					t.Fatalf("the result of %s is kept without its call", c.ToolCallID)
				}
			}
		}
		inBand := func(n int64) bool { return n >= compaction.MinTail && n <= compaction.MaxTail }
		for i := compaction.MinRemoved; i <= len(msgs); i++ {
			if i < len(msgs) && msgs[i].Role == provider.RoleTool {
				continue
			}
			if inBand(tail(i)) && (!inBand(cut.TailTokens) || tail(i) > cut.TailTokens) {
				t.Fatalf("cut at %d keeps %d tokens; the cut at %d keeps %d, within the band", cut.Index, cut.TailTokens, i, tail(i))
			}
		}
		if !inBand(cut.TailTokens) && cut.TailTokens > compaction.MaxTail && ceiling > 0 && cut.TailTokens > ceiling {
			t.Fatalf("tail of %d tokens over the ceiling %d", cut.TailTokens, ceiling)
		}
	})
}
