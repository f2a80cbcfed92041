package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store"
)

// transcript returns n entries shaped like a coding session: a user
// message, then rounds of an assistant tool call, the call record, a tool
// result of a few hundred bytes and the completion, and now and then a
// usage snapshot.
func transcript(n int) []store.Entry {
	var es []store.Entry
	add := func(p store.Payload) { es = append(es, store.Entry{Seq: int64(len(es) + 1), Payload: p}) }
	add(store.UserMessage{Content: []store.Block{{Type: store.BlockText, Text: "Fix the flaky test in runner/journal and explain the cause."}}})
	output := strings.Repeat("ok  \tgithub.com/aerie-run/aerie/runner/journal\t0.123s\n", 6)
	for i := 0; len(es) < n; i++ {
		id := fmt.Sprintf("call-%d", i)
		input := json.RawMessage(fmt.Sprintf(`{"command":"go test -run TestJournal/%d ./runner/journal/"}`, i))
		add(store.AssistantMessage{Content: []store.Block{
			{Type: store.BlockText, Text: "Let me run the test again to see whether it still fails."},
			{Type: store.BlockToolUse, ID: id, Name: "bash", Input: input},
		}, StopReason: "tool_use"})
		add(store.ToolCall{CallID: id, Name: "bash", Input: input})
		add(store.ToolResult{CallID: id, Content: []store.Block{{Type: store.BlockText, Text: output}}})
		add(store.ToolCompletion{CallID: id, Status: store.ToolOK, Duration: 1234567})
		if i%10 == 9 {
			add(store.Usage{InputTokens: int64(i) * 1000, OutputTokens: int64(i) * 100, Requests: int64(i)})
		}
	}
	return es[:n]
}

// seedSession stores a session with n entries.
func seedSession(b *testing.B, st store.Store, n int) uuid.UUID {
	b.Helper()
	ctx := context.Background()
	s, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		b.Fatal(err)
	}
	es := transcript(n)
	for len(es) > 0 {
		k := min(1000, len(es))
		if err := st.Append(ctx, "tenant", s.ID, es[:k]); err != nil {
			b.Fatal(err)
		}
		es = es[k:]
	}
	return s.ID
}

// BenchmarkLoad measures resuming a 10,000-entry session. Target: < 50 ms.
func BenchmarkLoad(b *testing.B) {
	const entries = 10_000
	pg := testenv.StartPostgres(b)
	for _, bk := range []struct {
		name string
		url  func(b *testing.B) string
	}{
		{"Postgres", func(b *testing.B) string { return pg.NewDatabase(b) }},
		{"SQLite", func(b *testing.B) string { return filepath.Join(b.TempDir(), "sessions.db") }},
	} {
		b.Run(bk.name, func(b *testing.B) {
			st, err := store.Open(context.Background(), bk.url(b))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			id := seedSession(b, st, entries)
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				snap, err := st.Load(context.Background(), "tenant", id)
				if err != nil {
					b.Fatal(err)
				}
				if len(snap.Entries) != entries {
					b.Fatalf("loaded %d entries, want %d", len(snap.Entries), entries)
				}
			}
			cpu.report()
		})
	}
}

// cpuClock reports the CPU time the process spent per benchmark operation
// (all threads: decoding goroutines, the garbage collector, SQLite), a
// figure that a busy machine distorts less than wall time.
type cpuClock struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) cpuClock { return cpuClock{b: b, start: processCPU(b)} }

func (c cpuClock) report() {
	used := processCPU(c.b) - c.start
	c.b.ReportMetric(float64(used.Microseconds())/1000/float64(c.b.N), "cpu-ms/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSQLiteAppendTurn measures what the journal writes at the end of
// a turn: one transaction of four entries (the assistant's tool call, its
// record, the result, the completion) into a session already holding
// 1,000, in the SQLite store.
func BenchmarkSQLiteAppendTurn(b *testing.B) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	id := seedSession(b, st, 1000)
	turn := transcript(5)[1:]
	seq := int64(1000)
	for b.Loop() {
		batch := make([]store.Entry, len(turn))
		for i, e := range turn {
			seq++
			e.Seq = seq
			batch[i] = e
		}
		if err := st.Append(ctx, "tenant", id, batch); err != nil {
			b.Fatal(err)
		}
	}
}
