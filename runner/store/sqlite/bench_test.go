package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/store/storetest"
	"github.com/aerie-run/aerie/runner/transcript"
)

// BenchmarkAppendTurn measures what the journal writes at the end of a
// turn: one transaction of four entries (the assistant's tool call, its
// record, the result, the completion) into a session already holding 1,000.
func BenchmarkAppendTurn(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	id := storetest.Seed(b, st, 1000)
	turn := storetest.Transcript(5)[1:]
	seq := int64(1000)
	for b.Loop() {
		batch := make([]transcript.Entry, len(turn))
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

// BenchmarkAppendConcurrent measures a turn's append (as BenchmarkAppendTurn)
// made by 16 sessions' journals at once, as 16 subagents' are: ns/op is one
// round of 16 batches, which group commit stores in few transactions.
func BenchmarkAppendConcurrent(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const writers = 16
	ids := make([]uuid.UUID, writers)
	for i := range ids {
		ids[i] = storetest.Seed(b, st, 100)
	}
	turn := storetest.Transcript(5)[1:]
	seq := int64(100)
	for b.Loop() {
		var wg sync.WaitGroup
		for _, id := range ids {
			batch := make([]transcript.Entry, len(turn))
			for i, e := range turn {
				e.Seq = seq + int64(i) + 1
				batch[i] = e
			}
			wg.Go(func() {
				if err := st.Append(ctx, "tenant", id, batch); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		seq += int64(len(turn))
	}
}
