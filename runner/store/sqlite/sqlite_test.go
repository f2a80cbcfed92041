package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/store/storetest"
	"github.com/aerie-run/aerie/runner/transcript"
)

// helperEnv makes the test binary act as a second process for the
// multi-process tests instead of running tests; see TestMain.
const helperEnv = "AERIE_STORE_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "open":
		os.Exit(helperOpen(os.Args[len(os.Args)-1]))
	case "lock":
		os.Exit(helperLock(os.Args[len(os.Args)-2], os.Args[len(os.Args)-1]))
	}
	fmt.Fprintf(os.Stderr, "unknown %s mode %q\n", helperEnv, os.Getenv(helperEnv))
	os.Exit(2)
}

// helperOpen opens (creating and migrating) the SQLite store at path, waits
// for the "go" line on stdin so that both processes open at the same moment,
// and creates one session.
func helperOpen(path string) int {
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if _, err := in.ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "read go:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := st.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperLock creates the database at path if needed, takes an exclusive
// lock on it, says "locked", and holds the lock for the given duration.
func helperLock(path, hold string) int {
	d, err := time.ParseDuration(hold)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	db, err := sql.Open("sqlite", path)
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
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
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

func sqliteURL(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "home", "sessions.db")
}

func TestConformance(t *testing.T) {
	storetest.Run(t, sqliteURL)
}

func TestCreatesDirectoryAndFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a", "b", "sessions.db")
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("database file mode %v, want 0600", perm)
	}
}

// TestPragmas checks the connection settings the spec requires on
// connections of both pools, as a connection sees them.
func TestPragmas(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	for pool, got := range sqlite.PragmasForTest(t, path) {
		want := map[string]string{
			"foreign_keys":       "1",
			"journal_mode":       "wal",
			"busy_timeout":       "5000",
			"synchronous":        "1", // NORMAL
			"wal_autocheckpoint": "500",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s pool: PRAGMA %s = %q, want %q", pool, k, got[k], v)
			}
		}
	}
}

func TestCloseTruncatesWAL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create(t.Context(), "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	var batch []transcript.Entry
	for i := range 100 {
		batch = append(batch, transcript.Entry{Seq: int64(i + 1), Payload: transcript.UserMessage{
			Content: []transcript.Block{{Type: transcript.BlockText, Text: strings.Repeat("x", 1000)}}}})
	}
	if err := st.Append(t.Context(), "tenant", s.ID, batch); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("expected a non-empty WAL before close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
		t.Errorf("WAL is %d bytes after Close, want truncated", fi.Size())
	}
	// Everything is in the database file itself.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM entries").Scan(&n); err != nil || n != 100 {
		t.Errorf("entries in the checkpointed file: %d, %v; want 100", n, err)
	}
}

// TestConcurrentProcessesOpenNewFile starts two processes that open
// the same, not yet existing database at the same moment: both must
// succeed, whoever wins the races on creating the file, switching it to WAL
// and migrating it.
func TestConcurrentProcessesOpenNewFile(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("round%d", round), "sessions.db")
		type proc struct {
			cmd    *exec.Cmd
			stdin  *os.File
			stderr strings.Builder
		}
		var procs []*proc
		for range 2 {
			p := &proc{cmd: exec.Command(os.Args[0], "-test.run=^$", path)}
			p.cmd.Env = append(os.Environ(), helperEnv+"=open")
			p.cmd.Stderr = &p.stderr
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			p.cmd.Stdin, p.stdin = r, w
			out, err := p.cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("helper: %q, %v", line, err)
			}
			procs = append(procs, p)
		}
		for _, p := range procs {
			if _, err := fmt.Fprintln(p.stdin, "go"); err != nil {
				t.Fatal(err)
			}
		}
		for i, p := range procs {
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("round %d: process %d: %v\n%s", round, i, err, p.stderr.String())
			}
			if err := p.stdin.Close(); err != nil {
				t.Error(err)
			}
		}
		st, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		list, err := st.List(t.Context(), "tenant", store.ListOptions{})
		if cerr := st.Close(); cerr != nil {
			t.Errorf("round %d: close the store: %v", round, cerr)
		}
		if err != nil || len(list) != 2 {
			t.Errorf("round %d: %d sessions, %v; want one from each process", round, len(list), err)
		}
	}
}

// TestOpenWaitsForALockedFile: another process holds an exclusive
// lock on a new database file for longer than the 5 s busy timeout while the
// store opens it. Opening retries and succeeds once the lock is released.
func TestOpenWaitsForALockedFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$", path, "6500ms")
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
	start := time.Now()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open while locked: %v", err)
	}
	defer st.Close()
	if took := time.Since(start); took < 5*time.Second {
		t.Errorf("open took %s: the lock was not in its way", took)
	}
	if _, err := st.Create(t.Context(), "tenant", store.NewSession{Dir: "/"}); err != nil {
		t.Fatal(err)
	}
}

// TestOpenBesideAWriter: opening a database whose schema is current
// needs no write lock, so it succeeds while another connection holds one
// (a session of another aerie writing its journal) for longer than opening
// would wait, and the store reads at once.
func TestOpenBesideAWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := st.Create(t.Context(), "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	// Held until the store has opened and read: a store that took the
	// write lock to open would give up after its bootstrap timeout.
	st, err = sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open beside a writer: %v", err)
	}
	got, err := st.Session(t.Context(), "tenant", sess.ID)
	if err != nil || got.ID != sess.ID {
		t.Errorf("Session = %+v, %v; want %s", got, err, sess.ID)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Error(err)
	}
	if err := st.Close(); err != nil {
		t.Error(err)
	}
}

// TestCorruptEntry writes undecodable rows behind the store's back.
// Reading the affected session fails with an error naming it and the
// sequence number; other sessions read fine and nothing is lost.
func TestCorruptEntry(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.CorruptEntry(t, st, func(session uuid.UUID, seq int64, kind, payload string) error {
		_, err := db.Exec(`INSERT INTO entries (session_id, tenant, seq, kind, payload, created_at)
			VALUES (?, 'tenant', ?, ?, ?, 0)`, session.String(), seq, kind, payload)
		return err
	}, func(session uuid.UUID) int {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM entries WHERE session_id = ?", session.String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	})
}

// TestGroupCommit appends from many goroutines at once, as the journals of
// concurrent subagents do, one of them to a session that is not live: the
// batches committed together each return once stored, the unknown
// session's batches fail alone with ErrNotFound, and every session has its
// entries in order with its counts.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const writers, batches = 16, 40
	ids := make([]uuid.UUID, writers)
	for i := range ids {
		s, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/w", Kind: store.SessionHeadless})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = s.ID
	}
	entry := func(seq int64) transcript.Entry {
		return transcript.Entry{Seq: seq, Payload: transcript.Usage{Requests: seq}, CreatedAt: time.Now()}
	}
	errs := make(chan error, writers*batches+batches)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for b := range int64(batches) {
				if err := st.Append(ctx, "tenant", id, []transcript.Entry{entry(2*b + 1), entry(2*b + 2)}); err != nil {
					errs <- fmt.Errorf("append to %s: %w", id, err)
				}
			}
		})
	}
	wg.Go(func() {
		for b := range int64(batches) {
			if err := st.Append(ctx, "tenant", uuid.New(), []transcript.Entry{entry(b + 1)}); !errors.Is(err, store.ErrNotFound) {
				errs <- fmt.Errorf("append to an unknown session: %v, want ErrNotFound", err)
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, id := range ids {
		es, err := st.Entries(ctx, "tenant", id)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 2*batches {
			t.Fatalf("session %s has %d entries, want %d", id, len(es), 2*batches)
		}
		for i, e := range es {
			if e.Seq != int64(i+1) {
				t.Fatalf("session %s: entry %d has sequence number %d", id, i, e.Seq)
			}
		}
		s, err := st.Session(ctx, "tenant", id)
		if err != nil {
			t.Fatal(err)
		}
		if s.EntryCount != 2*batches || s.LastSeq != 2*batches {
			t.Errorf("session %s: counts %d entries, last %d; want %d", id, s.EntryCount, s.LastSeq, 2*batches)
		}
	}
}

// TestListenUnsupported: SQLite tells no changes; Listen says so at once,
// for its reader to poll.
func TestListenUnsupported(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	called := false
	err = st.Listen(t.Context(), func(uuid.UUID) { called = true })
	if !errors.Is(err, errors.ErrUnsupported) || called {
		t.Errorf("Listen: %v (called %v), want errors.ErrUnsupported at once", err, called)
	}
}
