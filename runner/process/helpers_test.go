package process

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// alive reports whether pid is the process that started at start and has
// not exited: a zombie, or another process with the PID, is not.
func alive(pid int, start uint64) bool {
	st, err := readStat(pid)
	return err == nil && st.start == start && !st.dead()
}

// eventually polls cond until it holds or 10 s pass. It is
// testenv.Eventually's twin: hack/testenv imports this package (its
// RunSubreaped makes test binaries subreapers), so this package's own
// tests cannot import hack/testenv.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	const timeout = 10 * time.Second
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// markerCarriers lists the living processes whose environment carries
// MarkerEnv=id: whatever a group started and has not yet ended.
func markerCarriers(t *testing.T, id string) []int {
	t.Helper()
	snap, err := takeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for pid, st := range snap.procs {
		if st.dead() || snap.excluded[pid] {
			continue
		}
		if v, found, err := readMarker(pid); err == nil && found && v == id {
			pids = append(pids, pid)
		}
	}
	return pids
}

// proc is a process a test script reported, with its start time.
type proc struct {
	pid   int
	start uint64
}

// script is a shell script running in its own group, with a pipe on which
// it reports the processes it started as "name pid" lines.
type script struct {
	wait  func() error // reaps the leader; safe to call more than once, concurrently
	cmd   *exec.Cmd
	group Group
	lines *bufio.Scanner
	out   *os.File
}

// startScript starts sh -c src as a group. The test owns the leader and
// must reap it with s.wait.
func startScript(t *testing.T, src string) *script {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", src)
	cmd.Stdout = w
	g, err := Start(cmd, NewID())
	err = errors.Join(err, w.Close())
	if err != nil {
		_ = r.Close() // the test stops here anyway
		t.Fatal(err)
	}
	s := &script{cmd: cmd, group: g, lines: bufio.NewScanner(r), out: r, wait: sync.OnceValue(cmd.Wait)}
	t.Cleanup(func() {
		// Whatever a failed test left behind.
		_, _ = Teardown(t.Context(), g, 10*time.Millisecond)
		_ = s.wait() // its status is the teardown's doing
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// expect reads one "name pid" report line for each name, in any order
// (background processes race to print), and returns the processes.
func (s *script) expect(t *testing.T, names ...string) map[string]proc {
	t.Helper()
	want := make(map[string]bool)
	for _, n := range names {
		want[n] = true
	}
	got := make(map[string]proc)
	for len(got) < len(names) {
		if !s.lines.Scan() {
			t.Fatalf("script ended after reporting %v: %v", got, s.lines.Err())
		}
		f := strings.Fields(s.lines.Text())
		if len(f) != 2 || !want[f[0]] {
			t.Fatalf("script reported %q, want one of %v", s.lines.Text(), names)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatal(err)
		}
		st, err := readStat(pid)
		if err != nil {
			t.Fatalf("%s (%d): %v", f[0], pid, err)
		}
		got[f[0]] = proc{pid, st.start}
	}
	return got
}

// requireGone fails unless every process is dead.
func requireGone(t *testing.T, ps map[string]proc) {
	t.Helper()
	for name, p := range ps {
		if alive(p.pid, p.start) {
			t.Errorf("%s (pid %d) is still alive", name, p.pid)
		}
	}
}
