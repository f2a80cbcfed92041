package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Transcript returns n entries shaped like a coding session: a user
// message, then rounds of an assistant tool call, the call record, a tool
// result of a few hundred bytes and the completion, and now and then a
// usage snapshot.
func Transcript(n int) []transcript.Entry {
	var es []transcript.Entry
	add := func(p transcript.Payload) { es = append(es, transcript.Entry{Seq: int64(len(es) + 1), Payload: p}) }
	add(transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "Fix the flaky test in runner/journal and explain the cause."}}})
	output := strings.Repeat("ok  \tgithub.com/aerie-run/aerie/runner/journal\t0.123s\n", 6)
	for i := 0; len(es) < n; i++ {
		id := fmt.Sprintf("call-%d", i)
		input := json.RawMessage(fmt.Sprintf(`{"command":"go test -run TestJournal/%d ./runner/journal/"}`, i))
		add(transcript.AssistantMessage{Content: []transcript.Block{
			{Type: transcript.BlockText, Text: "Let me run the test again to see whether it still fails."},
			{Type: transcript.BlockToolUse, ID: id, Name: "bash", Input: input},
		}, StopReason: "tool_use"})
		add(transcript.ToolCall{CallID: id, Name: "bash", Input: input})
		add(transcript.ToolResult{CallID: id, Content: []transcript.Block{{Type: transcript.BlockText, Text: output}}})
		add(transcript.ToolCompletion{CallID: id, Status: transcript.ToolOK, Duration: 1234567})
		if i%10 == 9 {
			add(transcript.Usage{InputTokens: int64(i) * 1000, OutputTokens: int64(i) * 100, Requests: int64(i)})
		}
	}
	return es[:n]
}

// Seed stores a session of tenant "tenant" holding Transcript(n), appended
// in batches of 1,000.
func Seed(tb testing.TB, st store.Store, n int) uuid.UUID {
	tb.Helper()
	ctx := context.Background()
	s, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		tb.Fatal(err)
	}
	es := Transcript(n)
	for len(es) > 0 {
		k := min(1000, len(es))
		if err := st.Append(ctx, "tenant", s.ID, es[:k]); err != nil {
			tb.Fatal(err)
		}
		es = es[k:]
	}
	return s.ID
}

// SeedCompacted stores a session of tenant "tenant" of n entries shaped like
// Transcript's, compactions of them compaction checkpoints, as the journal
// writes them: one append per round (an assistant message and what follows
// it), a checkpoint opening the round after it was made. The checkpoints
// come at even intervals, each with a summary of a few KiB and a kept tail
// of about 100 entries starting at a round. It returns the session and the
// number of entries Load returns for it: the latest checkpoint's tail.
func SeedCompacted(tb testing.TB, st store.Store, n, compactions int) (uuid.UUID, int) {
	tb.Helper()
	const keep = 100
	ctx := context.Background()
	s, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		tb.Fatal(err)
	}
	summary := strings.Repeat("The flaky test in runner/journal fails when the writer's batch is retried. ", 60)
	every := n / (compactions + 1)
	var (
		batch     []transcript.Entry
		rounds    []int64 // the sequence numbers of the rounds' assistant messages
		seq       int64
		made      int
		firstKept int64
	)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if err := st.Append(ctx, "tenant", s.ID, batch); err != nil {
			tb.Fatal(err)
		}
		batch = nil
	}
	add := func(p transcript.Payload) {
		seq++
		batch = append(batch, transcript.Entry{Seq: seq, Payload: p})
	}
	for _, e := range Transcript(n - compactions) {
		if _, ok := e.Payload.(transcript.AssistantMessage); ok {
			flush()
			if made < compactions && len(rounds) > 0 && seq >= int64((made+1)*every) {
				firstKept = rounds[0]
				for _, r := range rounds {
					if r <= seq-keep {
						firstKept = r
					}
				}
				made++
				add(transcript.Compaction{
					Replacement: []transcript.Block{{Type: transcript.BlockText, Text: summary}},
					FirstKept:   firstKept,
					Provenance: transcript.Provenance{
						Trigger: "auto", Provider: "anthropic", Model: "claude-sonnet-4-5",
						Messages: int(seq - firstKept), TokensBefore: 27_000, TokensAfter: 4_000,
					},
				})
			}
			rounds = append(rounds, seq+1)
		}
		add(e.Payload)
	}
	flush()
	if made != compactions {
		tb.Fatalf("seeded %d compactions, want %d", made, compactions)
	}
	// The tail: every entry from the latest checkpoint's first kept one on,
	// but the checkpoint itself.
	return s.ID, int(seq-firstKept+1) - 1
}
