package testenv

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// readyTimeout bounds how long a server may take to accept connections
	// after it is started; it normally takes well under a second.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a fast shutdown before the server is killed.
	stopTimeout = 15 * time.Second
	// bindAttempts is how often a start is retried when the chosen port was
	// taken between picking it and the server binding it.
	bindAttempts = 5
	// maxIdentifierLen is PostgreSQL's NAMEDATALEN-1: longer names are
	// silently truncated by the server, so we truncate them ourselves.
	maxIdentifierLen = 63
)

// Postgres is a PostgreSQL server for tests: either one started by
// StartPostgres from the machine's server binaries, or an external one named
// by DATABASE_URL. It is safe for concurrent use.
type Postgres struct {
	dsn      string // maintenance database
	external bool   // DATABASE_URL: we neither own the process nor the data

	// The fields below are only set for a server we started.
	binDir  string
	baseDir string // everything of ours lives here; removed in cleanup
	dataDir string
	logPath string
	port    int
	cred    *syscall.Credential // who the server runs as; nil for ourselves

	mu   sync.Mutex // serialises Start and Stop; guards proc
	proc *postmaster
}

// postmaster is one run of the server process.
type postmaster struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait has returned
	err  error         // cmd.Wait's result; read only after done is closed
}

// StartPostgres returns a running PostgreSQL server for the test, stopped and
// removed in t.Cleanup.
//
// If DATABASE_URL is set, that server is used instead and nothing is started;
// NewDatabase still gives each test its own database on it, but Stop, Start
// and Restart skip the calling test.
//
// Otherwise the server binaries are taken from `pg_config --bindir`, or else
// the newest /usr/lib/postgresql/*/bin. Without them the test fails (or is
// skipped under -short) with instructions for installing them.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	if dsn := os.Getenv("DATABASE_URL"); dsn != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The URL is not printed: it may carry a password.
		if err := ping(ctx, dsn); err != nil {
			t.Fatalf("DATABASE_URL is set but its server cannot be used: %v", err)
		}
		return &Postgres{dsn: dsn, external: true}
	}

	p, stop, err := NewPostgres()
	if errors.Is(err, errNoServerBinaries) {
		requireDependency(t, err.Error(),
			"install them with `apt-get install -y postgresql` or set DATABASE_URL to a server the tests may create databases on")
		return nil // not reached: requireDependency skips or fails the test
	}
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// errNoServerBinaries is NewPostgres's error on a machine without
// PostgreSQL's server binaries.
var errNoServerBinaries = errors.New(
	"PostgreSQL server binaries not found (looked in `pg_config --bindir` and /usr/lib/postgresql/*/bin)")

// NewPostgres starts a PostgreSQL server from the machine's server binaries
// (`pg_config --bindir`, or else the newest /usr/lib/postgresql/*/bin), for a
// program rather than a test (StartPostgres); stop stops it and removes its
// data. On an error nothing is left running.
func NewPostgres() (p *Postgres, stop func() error, err error) {
	binDir, ok := findServerBinDir()
	if !ok {
		return nil, nil, errNoServerBinaries
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, nil, err
	}
	baseDir, err := makeBaseDir(cred)
	if err != nil {
		return nil, nil, err
	}
	p = &Postgres{
		binDir:  binDir,
		baseDir: baseDir,
		dataDir: filepath.Join(baseDir, "data"),
		logPath: filepath.Join(baseDir, "postgres.log"),
		cred:    cred,
	}
	stop = func() error {
		p.mu.Lock()
		err := p.stopLocked()
		p.mu.Unlock()
		if err != nil {
			err = fmt.Errorf("stop postgres: %w", err)
		}
		if rerr := os.RemoveAll(baseDir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove postgres directory: %w", rerr))
		}
		return err
	}
	if err := p.start(); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	return p, stop, nil
}

// start initialises the data directory and starts the server on a free
// port, retrying with another when one was taken between picking it and
// the server binding it.
func (p *Postgres) start() error {
	if err := p.initdb(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		p.port = port
		p.dsn = fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", ServiceHost(), port)
		err = p.startLocked()
		// Another process may have taken the port since freePort closed it;
		// a fresh port fixes that, nothing fixes the other failures.
		if err == nil || !errors.Is(err, errPortInUse) || attempt == bindAttempts {
			return err
		}
	}
}

// DSN is a connection string (postgres:// URL) to the server's maintenance
// database. With DATABASE_URL it is that variable's value, as given.
func (p *Postgres) DSN() string { return p.dsn }

// NewDatabase creates a fresh, empty database on the server and returns its
// DSN. The database is dropped in t.Cleanup, closing any connections still
// open to it. It may be called from parallel tests.
func (p *Postgres) NewDatabase(t testing.TB) string {
	t.Helper()
	name := databaseName(t.Name())
	dsn, err := withDatabase(p.dsn, name)
	if err != nil {
		t.Fatalf("new database: %v", err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// template0 rather than the default template1: it is guaranteed empty on
	// an external server, and nobody can be connected to it, which would make
	// concurrent CREATE DATABASE calls fail.
	if err := p.exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// A server of ours that the test left stopped is about to be
		// deleted with everything in it, so there is nothing to drop.
		if !p.external && !p.running() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE, because tests routinely leave pools open until their own
		// cleanups, which may run after this one.
		if err := p.exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return dsn
}

// Stop shuts the server down with a fast shutdown, which terminates open
// connections, and waits for it to exit; it is killed if that takes longer
// than 15s. Stopping a stopped server does nothing.
//
// With DATABASE_URL the server is not ours to stop, so Stop skips the test.
func (p *Postgres) Stop(t testing.TB) {
	t.Helper()
	p.skipIfExternal(t, "Stop")
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.stopLocked(); err != nil {
		t.Fatalf("stop postgres: %v", err)
	}
}

// Start starts a stopped server again on the same port and data directory,
// so DSN and the DSNs from NewDatabase stay valid, and waits until it accepts
// connections. Starting a running server does nothing.
//
// With DATABASE_URL the server is not ours to start, so Start skips the test.
func (p *Postgres) Start(t testing.TB) {
	t.Helper()
	p.skipIfExternal(t, "Start")
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		return
	}
	// The port is fixed now. It normally becomes free as soon as the old
	// server exits, but give another process that grabbed it a moment.
	var err error
	for attempt := 1; attempt <= bindAttempts; attempt++ {
		if err = p.startLocked(); !errors.Is(err, errPortInUse) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
}

// Restart stops the server (fast shutdown, terminating open connections) and
// starts it again on the same port and data directory: committed data
// survives, connections do not. It is meant for fault tests such as "Postgres
// restarted while a journal is writing".
//
// With DATABASE_URL the server is not ours to restart, so Restart skips the
// test.
func (p *Postgres) Restart(t testing.TB) {
	t.Helper()
	p.skipIfExternal(t, "Restart")
	p.Stop(t)
	p.Start(t)
}

func (p *Postgres) skipIfExternal(t testing.TB, method string) {
	t.Helper()
	if p.external {
		t.Skipf("Postgres.%s needs a server started by testenv, but DATABASE_URL points at an external server; unset DATABASE_URL to run this test", method)
	}
}

func (p *Postgres) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc != nil
}

// exec runs one statement on the maintenance database.
func (p *Postgres) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background()) //nolint:errcheck // the connection ran one statement, whose error is returned
	_, err = conn.Exec(ctx, sql)
	return err
}

func ping(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background()) //nolint:errcheck // the connection only pinged
	return conn.Ping(ctx)
}

// initdb creates the throwaway cluster.
func (p *Postgres) initdb() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.binDir, "initdb"),
		"-D", p.dataDir,
		// A fixed superuser name, whoever runs the server, so the DSN is the
		// same for root (running it as postgres or nobody) and for a developer.
		"--username=postgres",
		"--auth=trust",
		"--encoding=UTF8",
		"--locale=C",
		// The cluster is deleted after the test; syncing it is wasted time.
		"--no-sync",
	)
	// The test's working directory may not be readable by the server user,
	// and initdb fails if it cannot resolve its own working directory.
	cmd.Dir = p.baseDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// On a thread of its own for Pdeathsig's sake, as the server.
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- runCmd(cmd)
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out.String())
	}
	if RealNode() {
		// A real node's pods connect from the bridge network, the test from
		// the host's address.
		f, err := os.OpenFile(filepath.Join(p.dataDir, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("open pg_hba.conf: %w", err)
		}
		_, err = fmt.Fprintf(f, "host all all %s trust\nhost all all %s/32 trust\n", nodePodCIDR, ServiceHost())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("allow the node's pods in pg_hba.conf: %w", err)
		}
	}
	return nil
}

// postgresListen is the server's listen_addresses: 127.0.0.1, and
// ServiceHost for a real node's pods.
func postgresListen() string {
	if h := ServiceHost(); h != "127.0.0.1" {
		return "127.0.0.1," + h
	}
	return "127.0.0.1"
}

// errPortInUse marks a start that failed because the port was taken.
var errPortInUse = errors.New("port already in use")

// startLocked starts the server and waits until it accepts connections.
// p.mu must be held and the server must be stopped.
func (p *Postgres) startLocked() error {
	logFile, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	// The child gets its own descriptor; ours is not needed after Start.
	defer logFile.Close() //nolint:errcheck // the server writes its log through its own descriptor
	st, err := logFile.Stat()
	if err != nil {
		return fmt.Errorf("stat server log: %w", err)
	}
	logOffset := st.Size() // failures show only this run's part of the log

	// postgres itself rather than pg_ctl, so that the server is our child:
	// we can signal and wait for it, and Pdeathsig kills it if the test
	// binary dies without running its cleanups.
	cmd := exec.Command(filepath.Join(p.binDir, "postgres"),
		"-D", p.dataDir,
		"-p", strconv.Itoa(p.port),
		"-k", p.baseDir, // unix socket: ours, not /var/run/postgresql
		"-c", "listen_addresses="+postgresListen(),
		// Test data needs no crash safety against power loss.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		// Parallel tests each holding a pool add up quickly; "too many
		// clients" is a confusing way for a test to fail.
		"-c", "max_connections=200",
	)
	cmd.Dir = p.baseDir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	pm := &postmaster{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig is delivered when the thread that forked the child
		// exits, and Go retires the threads of goroutines that end locked
		// to them (the pod runner's, which enter mount namespaces): any
		// thread may go. This goroutine keeps the forking thread for the
		// server's whole life.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		pm.err = cmd.Wait()
		close(pm.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}

	if err := waitReady(pm, p.dsn); err != nil {
		_ = cmd.Process.Kill()
		<-pm.done
		log := p.readLog(logOffset)
		if strings.Contains(log, "could not bind") || strings.Contains(log, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return fmt.Errorf("%w\nserver log (%s):\n%s", err, p.logPath, log)
	}
	p.proc = pm
	return nil
}

// waitReady polls until the server accepts connections, it exits, or
// readyTimeout passes. A real connection, rather than a check for the socket,
// is what callers need, and it also covers crash recovery on restart.
func waitReady(pm *postmaster, dsn string) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ping(ctx, dsn)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server not ready after %s: %w", readyTimeout, err)
		}
		select {
		case <-pm.done:
			return fmt.Errorf("server exited during startup: %v", pm.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stopLocked shuts the server down if it is running. p.mu must be held.
func (p *Postgres) stopLocked() error {
	pm := p.proc
	if pm == nil {
		return nil
	}
	p.proc = nil
	// SIGINT is PostgreSQL's fast shutdown: it terminates client connections
	// instead of waiting for them (SIGTERM, a smart shutdown, would wait for
	// the test's pools forever) and still checkpoints, so data survives.
	if err := pm.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal server: %w", err)
	}
	select {
	case <-pm.done:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = pm.cmd.Process.Kill()
	<-pm.done
	return fmt.Errorf("server did not shut down within %s and was killed\nserver log (%s):\n%s",
		stopTimeout, p.logPath, p.readLog(0))
}

// readLog returns the server log from offset on, shortened to its end: the
// log is deleted with the server, so failures have to carry it.
func (p *Postgres) readLog(offset int64) string {
	const limit = 16 << 10
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read server log: %v)", err)
	}
	if offset > 0 && offset <= int64(len(b)) {
		b = b[offset:]
	}
	if len(b) > limit {
		b = append([]byte("...\n"), b[len(b)-limit:]...)
	}
	return string(b)
}

// findServerBinDir returns a directory holding the PostgreSQL server
// binaries: pg_config's bindir first, as the installation the machine
// declares, then the newest Debian-style /usr/lib/postgresql/<version>/bin.
// pg_config alone is not enough: on Debian it comes with libpq-dev and
// reports the directory of libpq's version, which need not be installed.
func findServerBinDir() (string, bool) {
	var candidates []string
	var out bytes.Buffer
	pgConfig := exec.Command("pg_config", "--bindir")
	pgConfig.Stdout = &out
	if err := runCmd(pgConfig); err == nil {
		candidates = append(candidates, strings.TrimSpace(out.String()))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versioned, func(a, b string) int {
		// Newest first.
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	candidates = append(candidates, versioned...)
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, true
		}
	}
	return "", false
}

// compareVersions orders PostgreSQL versions such as "9.6" and "15"
// numerically, component by component; non-numeric components sort lowest.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		av, bv := -1, -1
		if i < len(as) {
			if n, err := strconv.Atoi(as[i]); err == nil {
				av = n
			}
		}
		if i < len(bs) {
			if n, err := strconv.Atoi(bs[i]); err == nil {
				bv = n
			}
		}
		if av != bv {
			return av - bv
		}
	}
	return 0
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// serverCredential says whom to run initdb and postgres as. Both refuse to
// run as root, so under root (containers, CI) they run as the postgres system
// user, or nobody where PostgreSQL's packages did not create one.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []error
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uid, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
		}
		gid, err := strconv.ParseUint(u.Gid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root, which postgres refuses, and no unprivileged user to run it as: %w", errors.Join(errs...))
}

// makeBaseDir creates the directory for the cluster, its socket and its log.
// It is not t.TempDir: that path embeds the test name and can exceed the
// ~107-byte limit on unix socket paths, and under root its 0700 parent would
// keep the server user out.
func makeBaseDir(cred *syscall.Credential) (string, error) {
	parent := os.TempDir()
	if cred != nil && !traversableByOthers(parent) {
		// A private TMPDIR of root's would lock the server user out of
		// its own data directory.
		parent = "/tmp"
		if !traversableByOthers(parent) {
			return "", fmt.Errorf("neither %s nor /tmp is traversable by the unprivileged user the server runs as", os.TempDir())
		}
	}
	dir, err := os.MkdirTemp(parent, "aerie-testenv-pg-")
	if err != nil {
		return "", fmt.Errorf("create server directory: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("hand server directory to uid %d: %w", cred.Uid, err)
		}
	}
	return dir, nil
}

// traversableByOthers reports whether every directory on the way to dir
// (dir included) can be entered by any user.
func traversableByOthers(dir string) bool {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		st, err := os.Stat(dir)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago. The
// server binds it shortly after; StartPostgres retries if someone beat it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close() //nolint:errcheck // a listener closed unused
	return l.Addr().(*net.TCPAddr).Port, nil
}

// databaseName derives a database name from the test's name: recognisable
// in the server's logs and pg_stat_activity, unique per call, and within
// PostgreSQL's 63-byte identifier limit.
func databaseName(testName string) string {
	var suffix [4]byte
	for i := range suffix {
		suffix[i] = byte(rand.Uint32())
	}
	tail := "_" + hex.EncodeToString(suffix[:])

	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(testName) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	head := b.String() // ASCII only, so any byte offset is a safe cut
	if len(head) > maxIdentifierLen-len(tail) {
		head = head[:maxIdentifierLen-len(tail)]
	}
	return head + tail
}

// withDatabase returns dsn with its database replaced by name. Both forms
// pgx accepts are handled, since DATABASE_URL may be either.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			// Not wrapped: the parse error quotes the URL, password and all.
			return "", errors.New("connection string is not a valid URL")
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// Keyword/value form: a later dbname overrides an earlier one. The name
	// needs no quoting, being made of [a-z0-9_] only.
	return dsn + " dbname=" + name, nil
}
