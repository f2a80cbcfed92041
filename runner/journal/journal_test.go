package journal_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	_ "modernc.org/sqlite"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// helperEnv makes the test binary act as a second process that holds a
// SQLite write lock; see TestMain and helperLock.
const helperEnv = "AERIE_JOURNAL_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "lock" {
		n := len(os.Args)
		os.Exit(helperLock(os.Args[n-2], os.Args[n-1]))
	}
	os.Exit(m.Run())
}

// helperLock takes the write lock of the SQLite database at path, says
// "locked", and holds the lock for the given duration.
func helperLock(path, hold string) int {
	d, err := time.ParseDuration(hold)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	time.Sleep(d)
	if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// lockSQLite holds the write lock of the database at path from another
// process for hold; the process is killed at the end of the test at the
// latest.
func lockSQLite(t *testing.T, path string, hold time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", path, hold.String())
	cmd.Env = append(os.Environ(), helperEnv+"=lock")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}
}

const tenant = "tenant"

// journalStore is what the tests need of a store besides Append.
type journalStore interface {
	Create(ctx context.Context, tenant string, s store.NewSession) (store.Session, error)
}

func openStore(t testing.TB, url string) store.Store {
	t.Helper()
	st, err := dburl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

func newSession(t testing.TB, st journalStore) uuid.UUID {
	t.Helper()
	s, err := st.Create(context.Background(), tenant, store.NewSession{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func message(i int) transcript.UserMessage {
	return transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: "message " + strconv.Itoa(i)}}}
}

// stored reads a session back, in order.
func stored(t *testing.T, st store.Store, id uuid.UUID) []transcript.Entry {
	t.Helper()
	es, err := st.Entries(context.Background(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// checkStream asserts that the session holds exactly entries 1..last,
// each once, in order, with the payloads message(seq) made.
func checkStream(t *testing.T, st store.Store, id uuid.UUID, last int64) {
	t.Helper()
	const first = 1
	es := stored(t, st, id)
	if int64(len(es)) != last-first+1 {
		t.Errorf("session has %d entries, want %d (%d..%d)", len(es), last-first+1, first, last)
	}
	for i, e := range es {
		want := first + int64(i)
		if e.Seq != want {
			t.Fatalf("entry %d has sequence number %d, want %d", i, e.Seq, want)
		}
		if diff := cmp.Diff(message(int(want)), e.Payload); diff != "" {
			t.Fatalf("entry %d (-want +got):\n%s", want, diff)
		}
	}
	s, err := st.Session(context.Background(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	if s.EntryCount != int64(len(es)) {
		t.Errorf("session entry count %d, want %d", s.EntryCount, len(es))
	}
}

// withLog sends the writer's log to the test's output.
func withLog(t testing.TB, opts journal.Options) journal.Options {
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	return opts
}

func appendMessages(w *journal.Writer, from, to int) {
	for i := from; i <= to; i++ {
		w.Append(message(i))
	}
}

func closeWriter(t *testing.T, w *journal.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestJournal(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		runJournalCases(t, func(t *testing.T) store.Store {
			return openStore(t, filepath.Join(t.TempDir(), "sessions.db"))
		})
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		pg := testenv.StartPostgres(t)
		runJournalCases(t, func(t *testing.T) store.Store {
			return openStore(t, pg.NewDatabase(t))
		})
	})
}

// runJournalCases runs the journal's cases against stores from open, each on
// a fresh database.
func runJournalCases(t *testing.T, open func(t *testing.T) store.Store) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, st store.Store)
	}{
		{"OrderAndSequenceNumbers", testOrder},
		{"Batching", testBatching},
		{"ConcurrentSessions", testConcurrentSessions},
		{"ConcurrentAppenders", testConcurrentAppenders},
		{"BarrierMeansDurable", testBarrier},
		{"SyncMeansDurableUpTo", testSync},
		{"CloseDrains", testCloseDrains},
		{"SwitchSessions", testSwitch},
		{"Resume", testResume},
		{"CompactionThroughJournal", testCompaction},
		{"PermanentFailure", testPermanentFailure},
		{"FailureMidStream", testFailureMidStream},
		{"LostAcknowledgement", testLostAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, open(t))
		})
	}
}

func testOrder(t *testing.T, st store.Store) {
	id := newSession(t, st)
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{}))
	for i := 1; i <= 500; i++ {
		if seq := w.Append(message(i)); seq != int64(i) {
			t.Fatalf("Append %d returned sequence number %d", i, seq)
		}
	}
	if err := w.Barrier(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkStream(t, st, id, 500)
	closeWriter(t, w)
	if s := w.Stats(); s.Entries != 500 || s.Skipped != 0 || s.Batches < 1 {
		t.Errorf("stats %+v", s)
	}
}

// gate holds the first Append until it is opened, so that entries pile up
// behind it.
type gate struct {
	journal.Store
	entered chan struct{} // closed when the first Append arrives
	open    chan struct{}
	once    sync.Once
	batches [][]int64
	mu      sync.Mutex
}

func (g *gate) Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error {
	g.once.Do(func() { close(g.entered) })
	<-g.open
	g.mu.Lock()
	var seqs []int64
	for _, e := range entries {
		seqs = append(seqs, e.Seq)
	}
	g.batches = append(g.batches, seqs)
	g.mu.Unlock()
	return g.Store.Append(ctx, tenant, session, entries)
}

func testBatching(t *testing.T, st store.Store) {
	id := newSession(t, st)
	g := &gate{Store: st, entered: make(chan struct{}), open: make(chan struct{})}
	w := journal.New(t.Context(), g, tenant, id, 1, withLog(t, journal.Options{MaxBatch: 150}))
	w.Append(message(1))
	<-g.entered // the goroutine is now writing entry 1, alone
	appendMessages(w, 2, 400)
	close(g.open)
	if err := w.Barrier(t.Context()); err != nil {
		t.Fatal(err)
	}
	closeWriter(t, w)
	// Everything queued behind the first batch went out in batches of at
	// most MaxBatch: [1], [2..151], [152..301], [302..400].
	var sizes []int
	for _, b := range g.batches {
		sizes = append(sizes, len(b))
	}
	if diff := cmp.Diff([]int{1, 150, 150, 99}, sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	checkStream(t, st, id, 400)
}

func testConcurrentSessions(t *testing.T, st store.Store) {
	const sessions, entries = 6, 300
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, sessions)
	for i := range ids {
		ids[i] = newSession(t, st)
	}
	for _, id := range ids {
		wg.Go(func() {
			w := journal.New(context.Background(), st, tenant, id, 1, withLog(t, journal.Options{}))
			for i := 1; i <= entries; i++ {
				w.Append(message(i))
				if i%50 == 0 { // a turn ends
					if err := w.Barrier(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}
			if err := w.Close(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		checkStream(t, st, id, entries)
	}
}

// testConcurrentAppenders appends to one writer from several goroutines
// (tools finishing in parallel): the stored order is the order of the
// sequence numbers Append handed out.
func testConcurrentAppenders(t *testing.T, st store.Store) {
	id := newSession(t, st)
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{}))
	var (
		mu   sync.Mutex
		sent = map[int64]string{}
		wg   sync.WaitGroup
	)
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				text := fmt.Sprintf("g%d-%d", g, i)
				// Append and record under one lock so the map knows which
				// text got which number.
				mu.Lock()
				seq := w.Append(transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: text}}})
				sent[seq] = text
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	closeWriter(t, w)
	es := stored(t, st, id)
	if len(es) != 400 {
		t.Fatalf("%d entries stored, want 400", len(es))
	}
	for i, e := range es {
		if e.Seq != int64(i+1) || e.Payload.(transcript.UserMessage).Content[0].Text != sent[e.Seq] {
			t.Fatalf("entry %d: seq %d, payload %v, want %q", i, e.Seq, e.Payload, sent[e.Seq])
		}
	}
}

func testBarrier(t *testing.T, st store.Store) {
	id := newSession(t, st)
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{}))
	defer closeWriter(t, w)
	for turn := 1; turn <= 5; turn++ {
		appendMessages(w, (turn-1)*20+1, turn*20)
		if err := w.Barrier(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Read by another connection, right after the barrier.
		checkStream(t, st, id, int64(turn*20))
	}
	// A barrier with nothing pending returns at once.
	if err := w.Barrier(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// testSync is the agent's turn-complete barrier: each turn waits for the
// entries of the turn before, and its own are written in the background,
// without waiting for Linger.
func testSync(t *testing.T, st store.Store) {
	id := newSession(t, st)
	// A linger longer than the test: only Sync's hand-off writes the
	// entries it does not wait for before Close.
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{Linger: time.Hour}))
	defer closeWriter(t, w)
	var prev int64
	for turn := 1; turn <= 5; turn++ {
		appendMessages(w, (turn-1)*20+1, turn*20)
		if err := w.Sync(t.Context(), prev); err != nil {
			t.Fatal(err)
		}
		if es := stored(t, st, id); int64(len(es)) < prev {
			t.Fatalf("turn %d: %d entries stored after a sync up to %d", turn, len(es), prev)
		}
		prev = int64(turn * 20)
	}
	// Waiting for the last turn's entries finds them written or being
	// written: Sync handed them over; it is not the linger that writes them.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := w.Sync(ctx, prev); err != nil {
		t.Fatal(err)
	}
	checkStream(t, st, id, prev)
	// Beyond the last entry means the last entry.
	if err := w.Sync(ctx, prev+100); err != nil {
		t.Fatal(err)
	}
}

func testCloseDrains(t *testing.T, st store.Store) {
	id := newSession(t, st)
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{MaxBatch: 64}))
	appendMessages(w, 1, 1000)
	closeWriter(t, w)
	checkStream(t, st, id, 1000)
	// Closing again is harmless; appending after Close is not written.
	closeWriter(t, w)
	w.Append(message(1001))
	if s := w.Stats(); s.Skipped != 1 {
		t.Errorf("skipped %d entries after close, want 1", s.Skipped)
	}
	checkStream(t, st, id, 1000)
}

// testSwitch is a session switch: the old session's queue is drained before
// the new session's writer takes over.
func testSwitch(t *testing.T, st store.Store) {
	a, b := newSession(t, st), newSession(t, st)
	w := journal.New(t.Context(), st, tenant, a, 1, withLog(t, journal.Options{}))
	appendMessages(w, 1, 300)
	closeWriter(t, w)
	checkStream(t, st, a, 300)
	w = journal.New(t.Context(), st, tenant, b, 1, withLog(t, journal.Options{}))
	appendMessages(w, 1, 10)
	closeWriter(t, w)
	checkStream(t, st, b, 10)
	checkStream(t, st, a, 300)
}

func testResume(t *testing.T, st store.Store) {
	id := newSession(t, st)
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{}))
	appendMessages(w, 1, 25)
	closeWriter(t, w)
	_, snap, err := st.Load(t.Context(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	w = journal.New(t.Context(), st, tenant, id, snap.LastSeq+1, withLog(t, journal.Options{}))
	if seq := w.Append(message(26)); seq != 26 {
		t.Errorf("first resumed entry got sequence number %d, want 26", seq)
	}
	closeWriter(t, w)
	checkStream(t, st, id, 26)
}

func testCompaction(t *testing.T, st store.Store) {
	id := newSession(t, st)
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{}))
	appendMessages(w, 1, 10)
	c := transcript.Compaction{Replacement: []transcript.Block{{Type: transcript.BlockText, Text: "summary"}}, FirstKept: 8,
		Provenance: transcript.Provenance{Trigger: "auto"}}
	if seq := w.Append(c); seq != 11 {
		t.Fatalf("compaction got %d", seq)
	}
	w.Append(message(12))
	closeWriter(t, w)
	_, snap, err := st.Load(t.Context(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	var tail []int64
	for _, e := range snap.Entries {
		tail = append(tail, e.Seq)
	}
	if snap.CompactionSeq != 11 || !cmp.Equal(tail, []int64{8, 9, 10, 12}) {
		t.Errorf("resume: compaction %d, tail %v; want 11, [8 9 10 12]", snap.CompactionSeq, tail)
	}
}

// failures records OnFailure calls.
type failures struct {
	mu   sync.Mutex
	errs []error
}

func (f *failures) record(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
}

func (f *failures) get() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs
}

func testPermanentFailure(t *testing.T, st store.Store) {
	var f failures
	missing := uuid.New() // never created: the store answers ErrNotFound
	w := journal.New(t.Context(), st, tenant, missing, 1, withLog(t, journal.Options{OnFailure: f.record}))
	appendMessages(w, 1, 5)
	err := w.Barrier(t.Context())
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Barrier = %v, want ErrNotFound", err)
	}
	if !errors.Is(w.Err(), store.ErrNotFound) {
		t.Errorf("Err = %v, want ErrNotFound", w.Err())
	}
	// The agent goes on; its entries are skipped, with their numbers.
	if seq := w.Append(message(6)); seq != 6 {
		t.Errorf("Append after failure returned %d, want 6", seq)
	}
	if err := w.Barrier(t.Context()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("later Barrier = %v, want the failure", err)
	}
	if err := w.Close(t.Context()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Close = %v, want the failure", err)
	}
	if got := f.get(); len(got) != 1 || !errors.Is(got[0], store.ErrNotFound) {
		t.Errorf("OnFailure calls: %v, want one with ErrNotFound", got)
	}
	if s := w.Stats(); s.Skipped != 6 || s.Entries != 0 || s.Retries != 0 {
		t.Errorf("stats %+v, want 6 skipped, none written or retried", s)
	}
}

func testFailureMidStream(t *testing.T, st store.Store) {
	id := newSession(t, st)
	var f failures
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{OnFailure: f.record}))
	appendMessages(w, 1, 10)
	if err := w.Barrier(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The session disappears under the writer.
	if err := st.Delete(t.Context(), tenant, id); err != nil {
		t.Fatal(err)
	}
	appendMessages(w, 11, 20)
	if err := w.Barrier(t.Context()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Barrier = %v, want ErrNotFound", err)
	}
	_ = w.Close(t.Context())
	if len(f.get()) != 1 {
		t.Errorf("OnFailure called %d times, want once", len(f.get()))
	}
	// What was written before the failure stays.
	all, err := st.List(t.Context(), tenant, store.ListOptions{IncludeDeleted: true})
	if err != nil || len(all) != 1 || all[0].EntryCount != 10 {
		t.Errorf("deleted session: %v, %v; want 10 entries kept", all, err)
	}
}

// lostAck commits the first batch and then reports a transient error, as if
// the connection died before the commit was acknowledged.
type lostAck struct {
	journal.Store
	lost atomic.Bool
}

func (s *lostAck) Append(ctx context.Context, tenant string, session uuid.UUID, entries []transcript.Entry) error {
	if err := s.Store.Append(ctx, tenant, session, entries); err != nil {
		return err
	}
	if s.lost.CompareAndSwap(false, true) {
		return fmt.Errorf("connection reset after commit: %w", store.ErrTransient)
	}
	return nil
}

func testLostAck(t *testing.T, st store.Store) {
	id := newSession(t, st)
	for _, n := range []int{3, 500} { // both of the Postgres store's write paths
		id := id
		if n > 3 {
			id = newSession(t, st)
		}
		w := journal.New(t.Context(), &lostAck{Store: st}, tenant, id, 1, withLog(t, journal.Options{MaxBatch: n}))
		appendMessages(w, 1, n)
		closeWriter(t, w)
		if s := w.Stats(); s.Retries != 1 {
			t.Errorf("batch of %d: %d retries, want 1", n, s.Retries)
		}
		checkStream(t, st, id, int64(n))
	}
}

// flaky fails every Append transiently.
type flaky struct{ calls atomic.Int64 }

func (f *flaky) Append(context.Context, string, uuid.UUID, []transcript.Entry) error {
	f.calls.Add(1)
	return fmt.Errorf("connection refused: %w", store.ErrTransient)
}

// TestJournalRetriesRunOut: a store that keeps failing transiently fails the
// writer after RetryFor, once.
func TestJournalRetriesRunOut(t *testing.T) {
	t.Parallel()
	var (
		f  flaky
		fs failures
	)
	w := journal.New(t.Context(), &f, tenant, uuid.New(), 1, withLog(t, journal.Options{RetryFor: 500 * time.Millisecond, OnFailure: fs.record}))
	start := time.Now()
	w.Append(message(1))
	err := w.Barrier(t.Context())
	if !errors.Is(err, store.ErrTransient) {
		t.Fatalf("Barrier = %v, want the transient error once retries ran out", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("gave up after %s, want about RetryFor", took)
	}
	if f.calls.Load() < 3 {
		t.Errorf("%d attempts, want several", f.calls.Load())
	}
	_ = w.Close(t.Context())
	if len(fs.get()) != 1 {
		t.Errorf("OnFailure called %d times, want once", len(fs.get()))
	}
}

// stuck never completes an Append before its context ends.
type stuck struct{}

func (stuck) Append(ctx context.Context, _ string, _ uuid.UUID, _ []transcript.Entry) error {
	<-ctx.Done()
	return ctx.Err()
}

// stalling never completes an Append before its context ends, as a
// connection through which nothing flows, and records when the first
// attempt began and every attempt's deadline.
type stalling struct {
	mu        sync.Mutex
	first     time.Time
	deadlines []time.Time
}

func (s *stalling) Append(ctx context.Context, _ string, _ uuid.UUID, _ []transcript.Entry) error {
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = time.Now()
	}
	d, _ := ctx.Deadline()
	s.deadlines = append(s.deadlines, d)
	s.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// TestJournalRetryWindowBoundsAttempts: on a store that stalls, the writer
// fails once RetryFor has passed since the batch's first attempt, however
// long AttemptTimeout is: no attempt's deadline is past the window, the
// barrier's own first attempt included.
func TestJournalRetryWindowBoundsAttempts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                     string
		retryFor, attemptTimeout time.Duration
		minAttempts              int
	}{
		{name: "attempt longer than the window", retryFor: 300 * time.Millisecond, attemptTimeout: time.Hour, minAttempts: 1},
		{name: "several attempts in the window", retryFor: 800 * time.Millisecond, attemptTimeout: 100 * time.Millisecond, minAttempts: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				st stalling
				fs failures
			)
			w := journal.New(t.Context(), &st, tenant, uuid.New(), 1, withLog(t, journal.Options{
				RetryFor: tc.retryFor, AttemptTimeout: tc.attemptTimeout, OnFailure: fs.record,
			}))
			w.Append(message(1))
			if err := w.Barrier(t.Context()); err == nil {
				t.Fatal("Barrier returned nil on a store that never answers")
			}
			_ = w.Close(t.Context())
			st.mu.Lock()
			defer st.mu.Unlock()
			if len(st.deadlines) < tc.minAttempts {
				t.Errorf("%d attempts, want at least %d", len(st.deadlines), tc.minAttempts)
			}
			end := st.first.Add(tc.retryFor)
			for i, d := range st.deadlines {
				if d.IsZero() || d.After(end) {
					t.Errorf("attempt %d has deadline %v, past the retry window's end %v", i+1, d, end)
				}
			}
			if len(fs.get()) != 1 {
				t.Errorf("OnFailure called %d times, want once", len(fs.get()))
			}
		})
	}
}

// TestJournalCloseDeadline: a Close whose context ends before the queue is
// written reports it.
func TestJournalCloseDeadline(t *testing.T) {
	t.Parallel()
	var fs failures
	w := journal.New(t.Context(), stuck{}, tenant, uuid.New(), 1, withLog(t, journal.Options{OnFailure: fs.record}))
	appendMessages(w, 1, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); err == nil {
		t.Fatal("Close returned nil although nothing was written")
	}
	if len(fs.get()) != 1 {
		t.Errorf("OnFailure called %d times, want once", len(fs.get()))
	}
}

// TestJournalSQLiteLockedByAnotherProcess: another process holds the
// database's write lock. Held for a while, the journal waits it out and
// writes everything; held past the retry limit, the writer fails clearly.
func TestJournalSQLiteLockedByAnotherProcess(t *testing.T) {
	t.Run("Released", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "sessions.db")
		st := openStore(t, path)
		id := newSession(t, st)
		w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{}))
		appendMessages(w, 1, 10)
		if err := w.Barrier(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Longer than SQLite's 5 s busy timeout, so the journal must retry.
		lockSQLite(t, path, 7*time.Second)
		appendMessages(w, 11, 20)
		start := time.Now()
		if err := w.Barrier(t.Context()); err != nil {
			t.Fatalf("Barrier while locked: %v", err)
		}
		t.Logf("barrier waited %s; stats %+v", time.Since(start).Round(time.Millisecond), w.Stats())
		closeWriter(t, w)
		if s := w.Stats(); s.Retries == 0 {
			t.Errorf("no retries recorded: %+v", s)
		}
		checkStream(t, st, id, 20)
	})
	t.Run("HeldPastTheLimit", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "sessions.db")
		st := openStore(t, path)
		id := newSession(t, st)
		var fs failures
		w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{RetryFor: time.Second, OnFailure: fs.record}))
		lockSQLite(t, path, time.Minute)
		appendMessages(w, 1, 10)
		err := w.Barrier(t.Context())
		if !errors.Is(err, store.ErrTransient) {
			t.Fatalf("Barrier = %v, want a failure wrapping ErrTransient", err)
		}
		t.Logf("failed clearly: %v", err)
		if err := w.Close(t.Context()); !errors.Is(err, store.ErrTransient) {
			t.Errorf("Close = %v, want the failure", err)
		}
		if len(fs.get()) != 1 {
			t.Errorf("OnFailure called %d times, want once", len(fs.get()))
		}
	})
}

// TestJournalPostgresRestart restarts the server while a journal is writing:
// no entry may be lost or duplicated, and the order must hold. It has a
// server of its own, since a restart would disturb other tests.
func TestJournalPostgresRestart(t *testing.T) {
	pg := testenv.StartPostgres(t)
	st := openStore(t, pg.NewDatabase(t))
	id := newSession(t, st)
	w := journal.New(t.Context(), st, tenant, id, 1, withLog(t, journal.Options{}))

	// A steady stream of entries, with turn barriers, from before the
	// restart until after it.
	stop := make(chan struct{})
	var (
		wg    sync.WaitGroup
		total int64
	)
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				total = int64(i - 1)
				return
			default:
			}
			w.Append(message(i))
			if i%20 == 0 {
				time.Sleep(time.Millisecond)
			}
			if i%500 == 0 {
				if err := w.Barrier(t.Context()); err != nil {
					t.Errorf("Barrier at %d: %v", i, err)
				}
			}
		}
	})
	time.Sleep(300 * time.Millisecond)
	pg.Restart(t)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := w.Barrier(t.Context()); err != nil {
		t.Fatalf("Barrier after restart: %v", err)
	}
	closeWriter(t, w)
	s := w.Stats()
	t.Logf("%d entries; stats %+v", total, s)
	if s.Retries == 0 {
		t.Errorf("no retries: the restart did not hit a write")
	}
	checkStream(t, st, id, total)
}
