package journal_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/postgres"
	"github.com/aerie-run/aerie/runner/transcript"
)

// The benchmarks compare the journal with raw pgx on the same PostgreSQL
// database. The two are interleaved in one run, alternating which goes
// first, so that a machine busy with other work slows both alike; each
// reports its own figures and the ratio the targets are stated in.

// benchPayload is a typical small entry: a tool result of about 200 bytes.
func benchPayload() transcript.ToolResult {
	return transcript.ToolResult{CallID: "call-17", Content: []transcript.Block{{Type: transcript.BlockText,
		Text: "ok  \tgithub.com/aerie-run/aerie/runner/journal\t0.123s\nok  \tgithub.com/aerie-run/aerie/runner/store\t1.234s\n"}}}
}

// benchDB is a PostgreSQL database with the store's schema, reachable
// through the store and through a raw pgx pool.
type benchDB struct {
	st   *store.DB
	pool *pgxpool.Pool
}

func newBenchDB(b *testing.B) benchDB {
	b.Helper()
	dsn := testenv.StartPostgres(b).NewDatabase(b)
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	})
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return benchDB{st: st, pool: pool}
}

// BenchmarkAppendThroughput compares the journal's sustained append rate
// (Append in a loop, then one Barrier) with a raw pgx CopyFrom of the same
// rows, already encoded, into the same table. An op is one chunk of 10,000
// entries through each. Target: journal-entries/s at least 0.8x
// copyfrom-entries/s.
func BenchmarkAppendThroughput(b *testing.B) {
	const chunk = 10_000
	db := newBenchDB(b)
	ctx := context.Background()
	p := benchPayload()
	payload, err := transcript.EncodePayload(p)
	if err != nil {
		b.Fatal(err)
	}
	kind, text := string(p.EntryKind()), string(payload)

	journalID, copyID := newSession(b, db.st), newSession(b, db.st)
	w := journal.New(ctx, db.st, tenant, journalID, 1, journal.Options{})
	defer w.Close(ctx)
	var copySeq int64

	viaJournal := func() time.Duration {
		start := time.Now()
		for range chunk {
			w.Append(p)
		}
		if err := w.Barrier(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	viaCopy := func() time.Duration {
		start := time.Now()
		now := time.Now()
		_, err := db.pool.CopyFrom(ctx, pgx.Identifier{"entries"},
			[]string{"session_id", "tenant", "seq", "kind", "payload", "created_at"},
			pgx.CopyFromSlice(chunk, func(i int) ([]any, error) {
				return []any{copyID, tenant, copySeq + int64(i) + 1, kind, text, now}, nil
			}))
		if err != nil {
			b.Fatal(err)
		}
		copySeq += chunk
		return time.Since(start)
	}

	var inJournal, inCopy time.Duration
	for i := range b.N {
		if i%2 == 0 {
			inJournal += viaJournal()
			inCopy += viaCopy()
		} else {
			inCopy += viaCopy()
			inJournal += viaJournal()
		}
	}
	entries := float64(b.N * chunk)
	journalRate, copyRate := entries/inJournal.Seconds(), entries/inCopy.Seconds()
	b.ReportMetric(journalRate, "journal-entries/s")
	b.ReportMetric(copyRate, "copyfrom-entries/s")
	b.ReportMetric(journalRate/copyRate, "journal/copyfrom")
	s := w.Stats()
	b.ReportMetric(float64(s.Entries)/float64(s.Batches), "entries/batch")
}

// BenchmarkDurableAppend compares the latency of one entry made durable,
// journal Append + Barrier, with a bare INSERT of the same row committed on
// its own (autocommit: INSERT; COMMIT in one round trip) on a connection of
// the same database. An op is one of each. Target: journal-p50 at most 1.5x
// insert-p50.
func BenchmarkDurableAppend(b *testing.B) {
	db := newBenchDB(b)
	ctx := context.Background()
	p := benchPayload()
	kind := string(p.EntryKind())

	journalID, insertID := newSession(b, db.st), newSession(b, db.st)
	w := journal.New(ctx, db.st, tenant, journalID, 1, journal.Options{})
	defer w.Close(ctx)
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()

	viaJournal := func() time.Duration {
		start := time.Now()
		w.Append(p)
		if err := w.Barrier(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var insertSeq int64
	viaInsert := func() time.Duration {
		start := time.Now()
		payload, err := transcript.EncodePayload(p) // as the journal does
		if err != nil {
			b.Fatal(err)
		}
		insertSeq++
		if _, err := conn.Exec(ctx, `INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, insertID, tenant, insertSeq, kind, string(payload), start); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}

	journalLat := make([]time.Duration, 0, b.N)
	insertLat := make([]time.Duration, 0, b.N)
	for i := range b.N {
		if i%2 == 0 {
			journalLat = append(journalLat, viaJournal())
			insertLat = append(insertLat, viaInsert())
		} else {
			insertLat = append(insertLat, viaInsert())
			journalLat = append(journalLat, viaJournal())
		}
	}
	jp50, jp99 := percentiles(journalLat)
	ip50, ip99 := percentiles(insertLat)
	b.ReportMetric(jp50, "journal-p50-µs")
	b.ReportMetric(jp99, "journal-p99-µs")
	b.ReportMetric(ip50, "insert-p50-µs")
	b.ReportMetric(ip99, "insert-p99-µs")
	b.ReportMetric(jp50/ip50, "journal/insert-p50")
}

// percentiles returns the median and the 99th percentile in microseconds.
func percentiles(lat []time.Duration) (p50, p99 float64) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	return at(0.50), at(0.99)
}
