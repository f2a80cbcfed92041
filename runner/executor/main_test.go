package executor

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor/mtls"
	"github.com/aerie-run/aerie/runner/process"
)

// testReaper reaps for the whole test binary. The executor runs as a
// child subreaper with a Reaper, and so do these tests: orphans of a
// torn-down group come back to this process, and the tests can check
// that not even a zombie is left. (runner/process tests the case without
// a subreaper.) It is set once, before any test runs.
var testReaper *process.Reaper

func TestMain(m *testing.M) {
	if transport := os.Getenv(benchServeEnv); transport != "" {
		// A child of the benchmarks: the executor in a process of its
		// own, as in its container or pod.
		os.Exit(serveForBench(transport))
	}
	testenv.RunSubreaped(m, &testReaper)
}

// newLocal returns a Local on a fresh workspace, closed at the end of the
// test.
func newLocal(t testing.TB, opts Options) *Local {
	t.Helper()
	return openLocal(t, t.TempDir(), opts)
}

// openLocal returns a Local on the workspace dir, closed at the end of the
// test. It is executortest.NewLocal with this binary's reaper by default;
// that package imports this one, so these tests cannot import it.
func openLocal(t testing.TB, dir string, opts Options) *Local {
	t.Helper()
	if opts.Reaper == nil {
		opts.Reaper = testReaper
	}
	l, err := NewLocal(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

// testExecutor is what the conformance tests drive: a Local, or a Remote
// connected to a Local served over a unix socket or over TCP and TLS.
type testExecutor interface {
	Executor
	Close(ctx context.Context) error
}

// kinds are the implementations the conformance tests run against.
var kinds = []string{"local", "remote", "tcp"}

// each runs f as a subtest for every kind of executor.
func each(t *testing.T, parallel bool, f func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			f(t, kind)
		})
	}
}

// newExecutor returns an executor of kind on a fresh workspace, and the
// Local that runs its commands; both are closed at the end of the test.
func newExecutor(t testing.TB, kind string, opts Options) (testExecutor, *Local) {
	t.Helper()
	return openExecutor(t, kind, t.TempDir(), opts)
}

// openExecutor is newExecutor on the workspace dir.
func openExecutor(t testing.TB, kind, dir string, opts Options) (testExecutor, *Local) {
	t.Helper()
	l := openLocal(t, dir, opts)
	switch kind {
	case "local":
		return l, l
	case "tcp":
		addr, runner := serveTCP(t, l, ServeOptions{})
		return dialTCP(t, addr, runner), l
	}
	return serve(t, l), l
}

// testExecutorName is the executor the TCP tests serve.
const testExecutorName = "tools"

// newCredentials returns a fresh set of credentials for the executor
// testExecutorName.
func newCredentials(t testing.TB) (runner, exec mtls.Credential) {
	t.Helper()
	runner, execs, err := mtls.NewSet([]string{testExecutorName}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return runner, execs[testExecutorName]
}

// serveTCP serves l over TCP and TLS on 127.0.0.1 until the end of the
// test, with a fresh set of credentials, and returns the address and the
// runner's credential.
func serveTCP(t testing.TB, l *Local, opts ServeOptions) (addr string, runner mtls.Credential) {
	t.Helper()
	runner, exec := newCredentials(t)
	return serveTCPWith(t, l, opts, exec), runner
}

// serveTCPWith serves l over TCP and TLS on 127.0.0.1 with the
// executor's credential exec until the end of the test, and returns the
// address.
func serveTCPWith(t testing.TB, l *Local, opts ServeOptions, exec mtls.Credential) string {
	t.Helper()
	ln, err := ListenTCP("127.0.0.1:0", exec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, l, opts) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// dialTCP connects a Remote to the executor at addr as runner, closed at
// the end of the test.
func dialTCP(t testing.TB, addr string, runner mtls.Credential) *Remote {
	t.Helper()
	r, err := DialTCP(t.Context(), addr, testExecutorName, runner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("close remote: %v", err)
		}
	})
	return r
}

// serve serves l on a fresh socket and returns a Remote connected to it.
// At the end of the test the Remote is closed and the server stopped.
func serve(t testing.TB, l *Local) *Remote {
	t.Helper()
	return dial(t, serveSocket(t, l))
}

// serveSocket serves l on a fresh socket until the end of the test and
// returns the socket's path.
func serveSocket(t testing.TB, l *Local) string {
	t.Helper()
	sock := socketPath(t)
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, l, ServeOptions{}) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return sock
}

// dial connects a Remote to the socket, closed at the end of the test.
func dial(t testing.TB, sock string) *Remote {
	t.Helper()
	r, err := Dial(t.Context(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("close remote: %v", err)
		}
	})
	return r
}

// socketPath returns a path for a socket in a fresh directory. Not under
// t.TempDir(): a socket's path must fit in 108 bytes.
func socketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "aerie-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	return filepath.Join(dir, "executor.sock")
}

// procState is what a test reads of /proc/<pid>/stat.
type procState struct {
	state byte
	ppid  int
	start uint64
}

func readProcState(pid int) (procState, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procState{}, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procState{state: f[0][0], ppid: ppid, start: start}, true
}

// proc is a process a test script reported.
type proc struct {
	pid   int
	start uint64
}

// present reports whether p is still in /proc, alive or as a zombie.
func (p proc) present() bool {
	st, ok := readProcState(p.pid)
	return ok && st.start == p.start
}

// reported reads "name pid" lines from r until every name has reported,
// in any order, and returns the processes.
func reported(t *testing.T, sc *bufio.Scanner, names ...string) map[string]proc {
	t.Helper()
	got := make(map[string]proc)
	for len(got) < len(names) {
		if !sc.Scan() {
			t.Fatalf("output ended after %v: %v", got, sc.Err())
		}
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("unexpected output %q", sc.Text())
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatal(err)
		}
		st, ok := readProcState(pid)
		if !ok {
			t.Fatalf("%s (%d) is already gone", f[0], pid)
		}
		got[f[0]] = proc{pid, st.start}
	}
	return got
}

// zombieChildren lists the zombies waiting for this process to reap them.
func zombieChildren() []int {
	des, _ := os.ReadDir("/proc")
	var pids []int
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcState(pid); ok && st.ppid == os.Getpid() && st.state == 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readAll reads r to the end in the background; the result arrives on the
// channel.
func readAll(r io.Reader) <-chan string {
	ch := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		ch <- string(b)
	}()
	return ch
}

// within waits for a value from ch for at most d.
func within[T any](t *testing.T, d time.Duration, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s did not happen within %s", what, d)
		panic("unreachable")
	}
}
