package executor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/process"
)

// testReaper reaps for the whole test binary. The executor runs as a
// child subreaper with a Reaper, and so do these tests: orphans of a
// torn-down group come back to this process, and the tests can check
// that not even a zombie is left. (runner/process tests the case without
// a subreaper.) It is set once, before any test runs.
var testReaper *process.Reaper

func TestMain(m *testing.M) {
	r, stop, err := process.Subreap()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testReaper = r
	code := m.Run()
	stop()
	os.Exit(code)
}

// newLocal returns a Local on a fresh workspace, closed at the end of the
// test.
func newLocal(t testing.TB, opts Options) *Local {
	t.Helper()
	if opts.Reaper == nil {
		opts.Reaper = testReaper
	}
	l, err := NewLocal(t.TempDir(), opts)
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

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
