package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

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
