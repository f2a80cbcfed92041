package store_test

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
	"testing"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/storetest"
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
	st, err := store.Open(ctx, path)
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

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, sqliteURL)
}

func TestSQLiteCreatesDirectoryAndFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a", "b", "sessions.db")
	st, err := store.OpenSQLite(t.Context(), path)
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

// TestSQLitePragmas checks the connection settings the spec requires on
// connections of both pools, as a connection sees them.
func TestSQLitePragmas(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	st, err := store.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, pool := range []string{"write", "read"} {
		got := store.SQLitePragmasForTest(t, st, pool)
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

func TestSQLiteCloseTruncatesWAL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	st, err := store.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create(t.Context(), "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	var batch []store.Entry
	for i := range 100 {
		batch = append(batch, store.Entry{Seq: int64(i + 1), Payload: store.UserMessage{
			Content: []store.Block{{Type: store.BlockText, Text: strings.Repeat("x", 1000)}}}})
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

// TestSQLiteConcurrentProcessesOpenNewFile starts two processes that open
// the same, not yet existing database at the same moment: both must
// succeed, whoever wins the races on creating the file, switching it to WAL
// and migrating it.
func TestSQLiteConcurrentProcessesOpenNewFile(t *testing.T) {
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
			r.Close()
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("helper: %q, %v", line, err)
			}
			procs = append(procs, p)
		}
		for _, p := range procs {
			fmt.Fprintln(p.stdin, "go")
		}
		for i, p := range procs {
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("round %d: process %d: %v\n%s", round, i, err, p.stderr.String())
			}
			p.stdin.Close()
		}
		st, err := store.OpenSQLite(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		list, err := st.List(t.Context(), "tenant", store.ListOptions{})
		st.Close()
		if err != nil || len(list) != 2 {
			t.Errorf("round %d: %d sessions, %v; want one from each process", round, len(list), err)
		}
	}
}

// TestSQLiteOpenWaitsForALockedFile: another process holds an exclusive
// lock on a new database file for longer than the 5 s busy timeout while the
// store opens it. Opening retries and succeeds once the lock is released.
func TestSQLiteOpenWaitsForALockedFile(t *testing.T) {
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
	st, err := store.OpenSQLite(t.Context(), path)
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

// TestSQLiteOpenBesideAWriter: opening a database whose schema is current
// needs no write lock, so it succeeds while another connection holds one
// (a session of another aerie writing its journal) for longer than opening
// would wait, and the store reads at once.
func TestSQLiteOpenBesideAWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	st, err := store.OpenSQLite(t.Context(), path)
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
	st, err = store.OpenSQLite(t.Context(), path)
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

// TestSQLiteCorruptEntry writes undecodable rows behind the store's back.
// Reading the affected session fails with an error naming it and the
// sequence number; other sessions read fine and nothing is lost.
func TestSQLiteCorruptEntry(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sessions.db")
	st, err := store.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testCorruptEntry(t, st, func(session uuid.UUID, seq int64, kind, payload string) error {
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

// testCorruptEntry is the corrupt-entry scenario for either backend: insert
// writes a raw row, count counts a session's stored rows.
func testCorruptEntry(t *testing.T, st store.Store, insert func(session uuid.UUID, seq int64, kind, payload string) error, count func(uuid.UUID) int) {
	ctx := t.Context()
	good, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	msg := store.UserMessage{Content: []store.Block{{Type: store.BlockText, Text: "fine"}}}
	var goodSeq int64
	for _, tc := range []struct {
		name, kind, payload string
	}{
		{"unknown kind", "telepathy", `{"thought":"x"}`},
		{"truncated JSON", "user_message", `{"content":[{"type":"te`},
		{"wrong type", "tool_call", `{"call_id":7,"name":"bash"}`},
		{"missing field", "tool_call", `{"call_id":"c1"}`},
		{"not an object", "usage", `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, err := st.Create(ctx, "tenant", store.NewSession{Dir: "/"})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Append(ctx, "tenant", bad.ID, []store.Entry{{Seq: 1, Payload: msg}}); err != nil {
				t.Fatal(err)
			}
			if err := insert(bad.ID, 2, tc.kind, tc.payload); err != nil {
				// PostgreSQL's json type refuses malformed JSON outright,
				// so this corruption cannot happen there.
				t.Logf("the database refuses to store it: %v", err)
				return
			}
			if err := st.Append(ctx, "tenant", bad.ID, []store.Entry{{Seq: 3, Payload: msg}}); err != nil {
				t.Fatalf("appending after a corrupt entry: %v", err)
			}
			goodSeq++
			if err := st.Append(ctx, "tenant", good.ID, []store.Entry{{Seq: goodSeq, Payload: msg}}); err != nil {
				t.Fatal(err)
			}

			for op, read := range map[string]func() error{
				"Load":    func() error { _, err := st.Load(ctx, "tenant", bad.ID); return err },
				"Entries": func() error { _, err := st.Entries(ctx, "tenant", bad.ID); return err },
			} {
				err := read()
				var entryErr *store.EntryError
				if !errors.Is(err, store.ErrCorruptEntry) || !errors.As(err, &entryErr) {
					t.Fatalf("%s: error %v, want a corrupt entry error", op, err)
				}
				if entryErr.Session != bad.ID || entryErr.Seq != 2 {
					t.Errorf("%s: error names session %s entry %d, want %s entry 2", op, entryErr.Session, entryErr.Seq, bad.ID)
				}
				if msg := err.Error(); !strings.Contains(msg, bad.ID.String()) || !strings.Contains(msg, "entry 2") {
					t.Errorf("%s: message %q does not name the session and entry", op, msg)
				}
			}
			// Other sessions are unaffected.
			if _, err := st.Load(ctx, "tenant", good.ID); err != nil {
				t.Errorf("Load of another session: %v", err)
			}
			// Nothing stored was lost.
			if n := count(bad.ID); n != 3 {
				t.Errorf("%d rows stored for the corrupt session, want 3", n)
			}
		})
	}
}
