package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
)

// runMainEnv makes the test binary run aerie's main instead of its tests,
// so that TestExecutorServe drives a real `aerie executor serve` process
// without building the binary separately. (AERIE_ variables never reach
// the commands the executor runs.)
const runMainEnv = "AERIE_TEST_RUN_MAIN"

func init() {
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// procStat is what the test reads of /proc/<pid>/stat.
type procStat struct {
	state byte
	ppid  int
	start uint64
}

func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procStat{state: f[0][0], ppid: ppid, start: start}, true
}

// children lists the processes whose parent is pid, zombies included.
func children(pid int) []procStat {
	des, _ := os.ReadDir("/proc")
	var out []procStat
	for _, de := range des {
		n, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(n); ok && st.ppid == pid {
			out = append(out, st)
		}
	}
	return out
}

// pidsOf reads "name pid" lines until every name has reported and
// returns the processes with their start times.
func pidsOf(t *testing.T, sc *bufio.Scanner, names ...string) map[string][2]uint64 {
	t.Helper()
	got := make(map[string][2]uint64)
	for len(got) < len(names) {
		if !sc.Scan() {
			t.Fatalf("output ended after %v: %v", got, sc.Err())
		}
		name, v, _ := strings.Cut(sc.Text(), " ")
		pid, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("unexpected output %q", sc.Text())
		}
		st, ok := readProcStat(pid)
		if !ok {
			t.Fatalf("%s (%d) is already gone", name, pid)
		}
		got[name] = [2]uint64{uint64(pid), st.start}
	}
	return got
}

// gone reports whether none of ps is in /proc any more, as a process or
// a zombie.
func gone(ps map[string][2]uint64) bool {
	for _, p := range ps {
		if st, ok := readProcStat(int(p[0])); ok && st.start == p[1] {
			return false
		}
	}
	return true
}

// leaky starts a grandchild that holds the command's output open, and a
// child that leaves the group with setsid, ignores SIGTERM and keeps
// forking.
const leaky = `
sh -c 'sleep 1000 & echo grandchild $!; wait' &
setsid sh -c 'trap "" TERM; echo escaped $$; while :; do sleep 0.05; done' &
echo leader $$
wait
`

// TestExecutorServe runs `aerie executor serve` as a real process and
// drives it over its socket: a cancelled command leaves nothing behind,
// not even a zombie; on SIGTERM the executor tears down what runs, its
// client sees the exits, and it exits 0.
func TestExecutorServe(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "aerie-exec-") // a socket's path must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	ws, sock := filepath.Join(dir, "ws"), filepath.Join(dir, "executor.sock")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	srv := exec.Command(os.Args[0], "executor", "serve", "--socket", sock, "--workspace", ws, "--grace", "200ms")
	srv.Env = append(os.Environ(), runMainEnv+"=1", "ANTHROPIC_API_KEY=sk-secret")
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		err := <-exited // the kill's, unless the test saw the executor exit
		if t.Failed() {
			t.Logf("executor exited with %v; its logs:\n%s", err, logs.String())
		}
	})

	var r *executor.Remote
	testenv.Eventually(t, 15*time.Second, "the executor listens", func() bool {
		r, err = executor.Dial(t.Context(), sock)
		return err == nil
	})
	if r.Workspace() != ws {
		t.Errorf("workspace %q, want %q", r.Workspace(), ws)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != executor.SocketMode {
		t.Errorf("socket: %v, %v; want mode %v", fi, err, executor.SocketMode)
	}

	// A command whose context is cancelled.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p, err := r.Start(ctx, executor.Command{Script: leaky})
	if err != nil {
		t.Fatal(err)
	}
	ps := pidsOf(t, bufio.NewScanner(p.Stdout()), "grandchild", "escaped", "leader")
	cancel()
	exit, err := p.Wait(t.Context())
	if err != nil || !exit.TornDown {
		t.Errorf("Wait = %+v, %v; want torn down", exit, err)
	}
	testenv.Eventually(t, 15*time.Second, "every process of the cancelled command is gone", func() bool { return gone(ps) })
	testenv.Eventually(t, 15*time.Second, "the executor has no child left, not even a zombie", func() bool { return len(children(srv.Process.Pid)) == 0 })

	// Tools run without the executor's secrets, as another program.
	_, out, _ := runRemote(t, r, executor.Command{Argv: []string{"env"}})
	if strings.Contains(out, "sk-secret") || strings.Contains(out, runMainEnv) {
		t.Errorf("the executor's secrets reached a command:\n%s", out)
	}

	// Commands still running when the executor is told to stop.
	bg, err := r.Start(t.Context(), executor.Command{Script: leaky})
	if err != nil {
		t.Fatal(err)
	}
	ps = pidsOf(t, bufio.NewScanner(bg.Stdout()), "grandchild", "escaped", "leader")
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exit, err = bg.Wait(t.Context())
	if err != nil || !exit.TornDown {
		t.Errorf("Wait after SIGTERM = %+v, %v; want torn down", exit, err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("executor exited with %v, want status 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the executor did not exit after SIGTERM")
	}
	// Killed, they may still wait a moment to be reaped by their new parent.
	if !testenv.Poll(5*time.Second, func() bool { return gone(ps) }) {
		t.Errorf("processes survived the executor: %v", ps)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there: %v", err)
	}
	if _, err := r.List(t.Context()); err == nil {
		t.Error("List succeeded after the executor exited")
	}
	_ = r.Close(context.Background())

	var messages []string
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		messages = append(messages, rec.Msg)
	}
	for _, want := range []string{"executor serving", "executor client connected", "executor stopping: tearing down every process group", "process group torn down", "executor stopped"} {
		if !strings.Contains(strings.Join(messages, "\n"), want) {
			t.Errorf("no %q in the logs:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "sk-secret") {
		t.Error("a secret reached the logs")
	}
}

// runRemote runs c to its end and returns its exit and output.
func runRemote(t *testing.T, r *executor.Remote, c executor.Command) (executor.Exit, string, string) {
	t.Helper()
	p, err := r.Start(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = stdout.ReadFrom(p.Stdout()) })
	wg.Go(func() { _, _ = stderr.ReadFrom(p.Stderr()) })
	exit, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return exit, stdout.String(), stderr.String()
}

func TestExecutorServeFlags(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "s")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"executor", "serve"}, `required flag(s) "socket", "workspace" not set`},
		{[]string{"executor", "serve", "--socket", sock, "--workspace", filepath.Join(t.TempDir(), "missing")}, "--workspace: stat "},
		{[]string{"executor", "serve", "--socket", sock, "--workspace", t.TempDir(), "--grace", "0s"}, "--grace must be positive"},
	}
	for _, tt := range tests {
		r := harness{}.aerie(t, tt.args...)
		if r.code != exitFailure || r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("aerie %s: exit %d, %v; want %q", strings.Join(tt.args, " "), r.code, r.err, tt.want)
		}
	}
}
