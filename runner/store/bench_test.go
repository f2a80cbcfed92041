package store_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
			cpu := startCPU(b)
			for b.Loop() {
				_, snap, err := st.Load(context.Background(), "tenant", id)
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
