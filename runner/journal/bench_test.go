package journal_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
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

// manySessions and the figures below are the load of a cluster's runners
// on one database: sessions journaling at once, each a turn of
// turnEntries entries then a barrier, turns times over.
const (
	manySessions = 1_000
	turns        = 5
	turnEntries  = 4
	// poolConns is the pool both sides share out, as a runner's
	// database_url sets it (pool_max_conns).
	poolConns = 16
)

// BenchmarkManySessions runs 1,000 sessions journaling to one PostgreSQL
// at once, through journal writers on one store, against the same rows
// written by 1,000 goroutines with raw pgx CopyFrom, one call a turn, on a
// pool of the same size (poolConns). An op is one round of both. It
// reports each side's entries/s and the p50 and p99 of a turn's latency
// (the barrier returning, for the journal; CopyFrom returning, for pgx).
//
//	go test -run '^$' -bench ManySessions -benchtime 3x ./runner/journal/
func BenchmarkManySessions(b *testing.B) {
	dsn := testenv.StartPostgres(b).NewDatabase(b)
	sized := dsn + sep(dsn) + fmt.Sprintf("pool_max_conns=%d", poolConns)
	ctx := context.Background()
	st, err := postgres.Open(ctx, sized)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	pool, err := pgxpool.New(ctx, sized)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	p := benchPayload()
	payload, err := transcript.EncodePayload(p)
	if err != nil {
		b.Fatal(err)
	}
	kind, text := string(p.EntryKind()), string(payload)

	viaJournal := func() ([]time.Duration, time.Duration) {
		ids := make([]uuid.UUID, manySessions)
		for i := range ids {
			ids[i] = newSession(b, st)
		}
		return fanOut(func(i int, lat []time.Duration) {
			w := journal.New(ctx, st, tenant, ids[i], 1, journal.Options{})
			for t := range turns {
				start := time.Now()
				for range turnEntries {
					w.Append(p)
				}
				if err := w.Barrier(ctx); err != nil {
					b.Error(err)
				}
				lat[t] = time.Since(start)
			}
			if err := w.Close(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	viaCopy := func() ([]time.Duration, time.Duration) {
		ids := make([]uuid.UUID, manySessions)
		for i := range ids {
			ids[i] = newSession(b, st)
		}
		return fanOut(func(i int, lat []time.Duration) {
			for t := range turns {
				start := time.Now()
				_, err := pool.CopyFrom(ctx, pgx.Identifier{"entries"},
					[]string{"session_id", "tenant", "seq", "kind", "payload", "created_at"},
					pgx.CopyFromSlice(turnEntries, func(j int) ([]any, error) {
						return []any{ids[i], tenant, int64(t*turnEntries + j + 1), kind, text, start}, nil
					}))
				if err != nil {
					b.Error(err)
				}
				lat[t] = time.Since(start)
			}
		})
	}

	var jLat, cLat []time.Duration
	var jTook, cTook time.Duration
	for i := range b.N {
		first, second := viaJournal, viaCopy
		if i%2 == 1 {
			first, second = viaCopy, viaJournal
		}
		l1, t1 := first()
		l2, t2 := second()
		if i%2 == 1 {
			l1, l2, t1, t2 = l2, l1, t2, t1
		}
		jLat, cLat = append(jLat, l1...), append(cLat, l2...)
		jTook, cTook = jTook+t1, cTook+t2
	}
	entries := float64(b.N * manySessions * turns * turnEntries)
	jp50, jp99 := percentiles(jLat)
	cp50, cp99 := percentiles(cLat)
	b.ReportMetric(entries/jTook.Seconds(), "journal-entries/s")
	b.ReportMetric(entries/cTook.Seconds(), "copyfrom-entries/s")
	b.ReportMetric(jp50/1e3, "journal-turn-p50-ms")
	b.ReportMetric(jp99/1e3, "journal-turn-p99-ms")
	b.ReportMetric(cp50/1e3, "copyfrom-turn-p50-ms")
	b.ReportMetric(cp99/1e3, "copyfrom-turn-p99-ms")
}

// fanOut runs session(i, lat) for every session at once, each filling its
// turns' latencies, and returns them all and the time the whole took.
func fanOut(session func(i int, lat []time.Duration)) ([]time.Duration, time.Duration) {
	lat := make([]time.Duration, manySessions*turns)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range manySessions {
		wg.Go(func() { session(i, lat[i*turns:(i+1)*turns]) })
	}
	wg.Wait()
	return lat, time.Since(start)
}

// sep is what joins a parameter to dsn: a URL's query or a key=value
// string's space.
func sep(dsn string) string {
	switch {
	case !strings.Contains(dsn, "://"):
		return " "
	case strings.Contains(dsn, "?"):
		return "&"
	default:
		return "?"
	}
}
