package testenv

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestPostgres(t *testing.T) {
	start := time.Now()
	p := StartPostgres(t)
	t.Logf("postgres ready in %s", time.Since(start).Round(time.Millisecond))

	t.Run("maintenance DSN", func(t *testing.T) {
		conn := connect(t, p.DSN())
		var one int
		if err := conn.QueryRow(ctx(t), "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("SELECT 1 = %d, %v", one, err)
		}
	})

	t.Run("NewDatabase DSN connects to the new database", func(t *testing.T) {
		dsn := p.NewDatabase(t)
		want := dbName(t, dsn)
		if !strings.HasPrefix(want, "t_testpostgres_newdatabase_dsn") {
			t.Errorf("database name %q does not start with the sanitized test name", want)
		}
		conn := connect(t, dsn)
		var got string
		if err := conn.QueryRow(ctx(t), "SELECT current_database()").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("current_database() = %q, want %q", got, want)
		}
		// Fresh and empty: no user tables.
		var tables int
		err := conn.QueryRow(ctx(t),
			"SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&tables)
		if err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Errorf("new database has %d tables, want 0", tables)
		}
	})

	t.Run("databases are isolated", func(t *testing.T) {
		a, b := p.NewDatabase(t), p.NewDatabase(t)
		if a == b {
			t.Fatalf("NewDatabase returned %q twice", a)
		}
		connA, connB := connect(t, a), connect(t, b)
		if _, err := connA.Exec(ctx(t), "CREATE TABLE widgets (id int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		if !tableExists(t, connA, "widgets") {
			t.Fatal("table missing from the database it was created in")
		}
		if tableExists(t, connB, "widgets") {
			t.Error("table created in one database is visible in the other")
		}
	})

	t.Run("parallel NewDatabase", func(t *testing.T) {
		for i := range 8 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				conn := connect(t, p.NewDatabase(t))
				if _, err := conn.Exec(ctx(t), "CREATE TABLE widgets (id int PRIMARY KEY); INSERT INTO widgets VALUES (1)"); err != nil {
					t.Fatal(err)
				}
			})
		}
	})

	t.Run("database dropped after cleanup", func(t *testing.T) {
		var name string
		var leftOpen *pgx.Conn
		t.Run("inner", func(t *testing.T) {
			dsn := p.NewDatabase(t)
			name = dbName(t, dsn)
			// Deliberately still open when the drop runs: WITH (FORCE) must
			// cope with tests that close their pools late.
			conn, err := pgx.Connect(ctx(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			leftOpen = conn
		})
		if leftOpen != nil {
			defer leftOpen.Close(context.Background())
		}
		if name == "" {
			t.Fatal("inner subtest did not create a database")
		}
		conn := connect(t, p.DSN())
		var exists bool
		if err := conn.QueryRow(ctx(t), "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Errorf("database %s still exists after its test's cleanup", name)
		}
	})

	// Last: it disturbs the server for everyone else.
	t.Run("restart", func(t *testing.T) {
		dsn := p.NewDatabase(t)
		conn := connect(t, dsn)
		if _, err := conn.Exec(ctx(t), "CREATE TABLE journal (seq int PRIMARY KEY); INSERT INTO journal VALUES (1), (2)"); err != nil {
			t.Fatal(err)
		}

		began := time.Now()
		p.Restart(t)
		t.Logf("restart took %s", time.Since(began).Round(time.Millisecond))

		// The fast shutdown terminated the connection...
		if _, err := conn.Exec(ctx(t), "SELECT 1"); err == nil {
			t.Error("connection survived a restart; want it terminated")
		}
		// ...a client reconnecting with the same DSN finds the server on the
		// same port, with the committed data still there.
		again := connect(t, dsn)
		var rows int
		if err := again.QueryRow(ctx(t), "SELECT count(*) FROM journal").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 2 {
			t.Errorf("journal has %d rows after restart, want 2", rows)
		}

		p.Stop(t)
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := ping(c, dsn); err == nil {
			t.Error("server accepts connections after Stop")
		}
		p.Stop(t) // idempotent
		p.Start(t)
		p.Start(t) // idempotent
		if err := ping(ctx(t), dsn); err != nil {
			t.Errorf("server does not accept connections after Start: %v", err)
		}
	})
}

// TestPostgresDiesWithTestBinary checks that a test binary killed before its
// cleanups run (a CI timeout, a ^\) does not leave its server behind.
func TestPostgresDiesWithTestBinary(t *testing.T) {
	if os.Getenv("DATABASE_URL") != "" {
		t.Skip("DATABASE_URL is set: no server of ours to leak")
	}
	if testing.Short() {
		t.Skip("integration test: starts a PostgreSQL server")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AERIE_TESTENV_POSTGRES_HELPER=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, the helper must not outlive us.
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	type started struct {
		pid int
		dir string
	}
	found := make(chan started, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var s started
			if _, err := fmt.Sscanf(sc.Text(), "postmaster pid=%d dir=%s", &s.pid, &s.dir); err == nil {
				found <- s
			}
		}
		close(found)
	}()
	var s started
	select {
	case got, ok := <-found:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("helper exited without starting postgres; stderr:\n%s", stderr.String())
		}
		s = got
	case <-time.After(time.Minute):
		t.Fatalf("helper did not start postgres within a minute; stderr:\n%s", stderr.String())
	}
	t.Cleanup(func() {
		// If the test failed, do not leak the server ourselves.
		if Alive(s.pid) {
			_ = syscall.Kill(s.pid, syscall.SIGKILL)
		}
		_ = os.RemoveAll(s.dir)
	})
	if !Alive(s.pid) {
		t.Fatalf("postmaster %d is not running while the helper is", s.pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	Eventually(t, 10*time.Second, fmt.Sprintf("postmaster %d still running after its test binary was killed", s.pid),
		func() bool { return !Alive(s.pid) })
}

// TestPostgresHelperProcess is the test binary that TestPostgresDiesWithTestBinary
// kills; it does nothing in a normal run.
func TestPostgresHelperProcess(t *testing.T) {
	if os.Getenv("AERIE_TESTENV_POSTGRES_HELPER") != "1" {
		t.Skip("helper process for TestPostgresDiesWithTestBinary")
	}
	p := StartPostgres(t)
	p.mu.Lock()
	pid := p.proc.cmd.Process.Pid
	p.mu.Unlock()
	fmt.Printf("postmaster pid=%d dir=%s\n", pid, p.baseDir)
	// Bounded, in case the parent dies before killing us.
	time.Sleep(2 * time.Minute)
}

func TestDatabaseName(t *testing.T) {
	long := "TestSomething/" + strings.Repeat("very long subtest name ", 10)
	for _, name := range []string{"TestA", "TestA/sub_test#01", long, "Tést/ü"} {
		a, b := databaseName(name), databaseName(name)
		if a == b {
			t.Errorf("databaseName(%q) returned %q twice", name, a)
		}
		if len(a) > maxIdentifierLen {
			t.Errorf("databaseName(%q) = %q: %d bytes, over PostgreSQL's %d", name, a, len(a), maxIdentifierLen)
		}
		if !strings.HasPrefix(a, "t_") {
			t.Errorf("databaseName(%q) = %q, want a t_ prefix", name, a)
		}
		for _, r := range a {
			if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_') {
				t.Errorf("databaseName(%q) = %q contains %q", name, a, r)
				break
			}
		}
	}
	if got := databaseName("TestA/sub_test#01"); !strings.HasPrefix(got, "t_testa_sub_test_01_") {
		t.Errorf("databaseName = %q, want it to start with t_testa_sub_test_01_", got)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "postgres://u:p@h:5432/t_x?sslmode=disable"},
		{"postgresql://h/", "postgresql://h/t_x"},
		{"postgres://h", "postgres://h/t_x"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=t_x"},
	} {
		got, err := withDatabase(tc.dsn, "t_x")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.dsn, got, err, tc.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Errorf("pgx cannot parse %q: %v", got, err)
		} else if cfg.Database != "t_x" {
			t.Errorf("pgx reads database %q from %q, want t_x", cfg.Database, got)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		sign int
	}{
		{"15", "9.6", 1},
		{"9.6", "10", -1},
		{"16", "16", 0},
		{"17", "16", 1},
		{"x", "9", -1},
	} {
		got := compareVersions(tc.a, tc.b)
		if (got > 0) != (tc.sign > 0) || (got < 0) != (tc.sign < 0) {
			t.Errorf("compareVersions(%q, %q) = %d, want sign %d", tc.a, tc.b, got, tc.sign)
		}
	}
}

// recordingTB stands in for a test, recording how it was ended instead of
// ending it.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordingTB) Helper()                        {}
func (r *recordingTB) Skipf(format string, a ...any)  { r.skipped = fmt.Sprintf(format, a...) }
func (r *recordingTB) Fatalf(format string, a ...any) { r.failed = fmt.Sprintf(format, a...) }

func TestRequireDependency(t *testing.T) {
	setShort := func(v bool) {
		t.Helper()
		if err := flag.Set("test.short", strconv.FormatBool(v)); err != nil {
			t.Fatal(err)
		}
	}
	defer setShort(testing.Short())

	setShort(false)
	var r recordingTB
	requireDependency(&r, "thing not found (looked in /x)", "install it with `apt-get install -y thing`")
	if want := "thing not found (looked in /x); install it with `apt-get install -y thing`"; r.failed != want || r.skipped != "" {
		t.Errorf("without -short: failed %q, skipped %q; want failed %q", r.failed, r.skipped, want)
	}

	setShort(true)
	r = recordingTB{}
	requireDependency(&r, "thing not found (looked in /x)", "install it with `apt-get install -y thing`")
	if !strings.HasPrefix(r.skipped, "integration test: thing not found") || r.failed != "" {
		t.Errorf("with -short: skipped %q, failed %q; want an integration-test skip", r.skipped, r.failed)
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx(t), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		if err := conn.Close(context.Background()); err != nil {
			t.Errorf("close the connection: %v", err)
		}
	})
	return conn
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	return cfg.Database
}

func tableExists(t *testing.T, conn *pgx.Conn, table string) bool {
	t.Helper()
	var exists bool
	if err := conn.QueryRow(ctx(t), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}
