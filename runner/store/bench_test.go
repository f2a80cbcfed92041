package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/store/storetest"
)

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
			st, err := dburl.Open(context.Background(), bk.url(b))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			id := storetest.Seed(b, st, entries)
			b.ReportAllocs()
			// The CPU time of all threads — decoding goroutines, the garbage
			// collector, SQLite — which a busy machine distorts less than
			// the wall time.
			report := testenv.ReportCPU(b)
			for b.Loop() {
				_, snap, err := st.Load(context.Background(), "tenant", id)
				if err != nil {
					b.Fatal(err)
				}
				if len(snap.Entries) != entries {
					b.Fatalf("loaded %d entries, want %d", len(snap.Entries), entries)
				}
			}
			report()
		})
	}
}
