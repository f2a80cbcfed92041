package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/store/storetest"
)

// backend is a store backend the benchmarks run on.
type backend struct {
	name string
	url  func(b *testing.B) string
}

// backends are a database of the throwaway PostgreSQL server and a new
// SQLite file.
func backends(b *testing.B) []backend {
	pg := testenv.StartPostgres(b)
	return []backend{
		{"Postgres", func(b *testing.B) string { return pg.NewDatabase(b) }},
		{"SQLite", func(b *testing.B) string { return filepath.Join(b.TempDir(), "sessions.db") }},
	}
}

// BenchmarkLoad measures resuming a 10,000-entry session. Target: < 50 ms.
func BenchmarkLoad(b *testing.B) {
	const entries = 10_000
	for _, bk := range backends(b) {
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

// BenchmarkLoadCompacted measures resuming a session of 20,000 entries
// compacted 50 times: Load reads the latest replacement and its active tail,
// not the compacted entries. Target: < 50 ms.
func BenchmarkLoadCompacted(b *testing.B) {
	const entries, compactions = 20_000, 50
	for _, bk := range backends(b) {
		b.Run(bk.name, func(b *testing.B) {
			st, err := dburl.Open(context.Background(), bk.url(b))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			id, tail := storetest.SeedCompacted(b, st, entries, compactions)
			b.ReportAllocs()
			report := testenv.ReportCPU(b)
			for b.Loop() {
				s, snap, err := st.Load(context.Background(), "tenant", id)
				if err != nil {
					b.Fatal(err)
				}
				if s.EntryCount != entries || snap.Compaction == nil || len(snap.Entries) != tail {
					b.Fatalf("loaded %d of %d entries, compaction %v; want %d active of %d and a compaction",
						len(snap.Entries), s.EntryCount, snap.Compaction != nil, tail, entries)
				}
			}
			report()
		})
	}
}
