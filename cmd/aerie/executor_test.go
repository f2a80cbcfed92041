package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/mtls"
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
// drives it over its socket, and over TCP and TLS with the files of `aerie
// executor credentials`: a cancelled command leaves nothing behind, not
// even a zombie; on SIGTERM the executor tears down what runs, its client
// sees the exits, and it exits 0.
func TestExecutorServe(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"socket", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			testExecutorServe(t, transport)
		})
	}
}

// servedExecutor is an `aerie executor serve` process under test.
type servedExecutor struct {
	srv    *exec.Cmd
	logs   *syncBuffer
	exited chan error
}

// startExecutor starts `aerie executor serve` with args, killed at the end
// of the test.
func startExecutor(t *testing.T, args ...string) *servedExecutor {
	t.Helper()
	e := &servedExecutor{logs: &syncBuffer{}, exited: make(chan error, 1)}
	e.srv = exec.Command(os.Args[0], append([]string{"executor", "serve"}, args...)...)
	e.srv.Env = append(os.Environ(), runMainEnv+"=1", "ANTHROPIC_API_KEY=sk-secret")
	e.srv.Stdout, e.srv.Stderr = e.logs, e.logs
	if err := e.srv.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.exited <- e.srv.Wait() }()
	t.Cleanup(func() {
		_ = e.srv.Process.Kill()
		err := <-e.exited // the kill's, unless the test saw the executor exit
		if t.Failed() {
			t.Logf("executor exited with %v; its logs:\n%s", err, e.logs.String())
		}
	})
	return e
}

// records are the executor's log records so far.
func (e *servedExecutor) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(e.logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// logged returns the first record with the message msg, or nil.
func (e *servedExecutor) logged(t *testing.T, msg string) map[string]any {
	t.Helper()
	for _, rec := range e.records(t) {
		if rec["msg"] == msg {
			return rec
		}
	}
	return nil
}

func testExecutorServe(t *testing.T, transport string) {
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
	var (
		e    *servedExecutor
		r    *executor.Remote
		addr string
	)
	switch transport {
	case "socket":
		e = startExecutor(t, "--socket", sock, "--workspace", ws, "--grace", "200ms")
		testenv.Eventually(t, 15*time.Second, "the executor listens", func() bool {
			r, err = executor.Dial(t.Context(), sock)
			return err == nil
		})
		fi, err := os.Stat(sock)
		if err != nil || fi.Mode().Perm() != executor.SocketMode {
			t.Errorf("socket: %v, %v; want mode %v", fi, err, executor.SocketMode)
		}
	case "tcp":
		creds := filepath.Join(dir, "creds")
		if res := (harness{}).aerie(t, "executor", "credentials", "--out", creds, "tools"); res.err != nil {
			t.Fatal(res.err)
		}
		e = startExecutor(t, "--listen", "127.0.0.1:0", "--credential", filepath.Join(creds, "tools.pem"),
			"--workspace", ws, "--grace", "200ms")
		testenv.Eventually(t, 15*time.Second, "the executor listens", func() bool {
			rec := e.logged(t, "executor serving")
			addr, _ = rec["listen"].(string)
			return addr != ""
		})
		runner, err := mtls.Load(filepath.Join(creds, "runner.pem"))
		if err != nil {
			t.Fatal(err)
		}
		if r, err = executor.DialTCP(t.Context(), addr, "tools", runner); err != nil {
			t.Fatal(err)
		}
		// A peer without the set's runner certificate is refused, and
		// the executor serves on.
		if conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
			_, _ = conn.Read(make([]byte, 1))
			_ = conn.Close()
		}
		testenv.Eventually(t, 15*time.Second, "the refused peer is logged", func() bool {
			rec := e.logged(t, "executor peer refused")
			return rec != nil && strings.HasPrefix(fmt.Sprint(rec["peer"]), "tcp 127.0.0.1:") && rec["reason"] != nil
		})
	}
	if r.Workspace() != ws {
		t.Errorf("workspace %q, want %q", r.Workspace(), ws)
	}
	driveExecutor(t, e, r)

	switch transport {
	case "socket":
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket is still there: %v", err)
		}
	case "tcp":
		if conn, err := net.Dial("tcp", addr); err == nil {
			_ = conn.Close()
			t.Errorf("%s still accepts connections after the executor exited", addr)
		}
	}
	var messages []string
	for _, rec := range e.records(t) {
		messages = append(messages, fmt.Sprint(rec["msg"]))
	}
	for _, want := range []string{"executor serving", "executor client connected", "executor stopping: tearing down every process group", "process group torn down", "executor stopped"} {
		if !slices.Contains(messages, want) {
			t.Errorf("no %q in the logs:\n%s", want, e.logs.String())
		}
	}
	if strings.Contains(e.logs.String(), "sk-secret") {
		t.Error("a secret reached the logs")
	}
}

// driveExecutor cancels a command, runs one that must not see the
// executor's secrets, then stops the executor with SIGTERM while a
// command runs: nothing is left behind, and the executor exits 0.
func driveExecutor(t *testing.T, e *servedExecutor, r *executor.Remote) {
	t.Helper()
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
	testenv.Eventually(t, 15*time.Second, "the executor has no child left, not even a zombie", func() bool { return len(children(e.srv.Process.Pid)) == 0 })

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
	if err := e.srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exit, err = bg.Wait(t.Context())
	if err != nil || !exit.TornDown {
		t.Errorf("Wait after SIGTERM = %+v, %v; want torn down", exit, err)
	}
	select {
	case err := <-e.exited:
		e.exited <- err
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
	if _, err := r.List(t.Context()); err == nil {
		t.Error("List succeeded after the executor exited")
	}
	_ = r.Close(context.Background())
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
	creds := t.TempDir()
	if r := (harness{}).aerie(t, "executor", "credentials", "--out", creds, "tools"); r.err != nil {
		t.Fatal(r.err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a credential"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	_, old, err := mtls.NewSetBetween([]string{"tools"}, now.Add(-2*time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired := filepath.Join(t.TempDir(), "tools.pem")
	if err := os.WriteFile(expired, old["tools"].Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	tools, runner := filepath.Join(creds, "tools.pem"), filepath.Join(creds, "runner.pem")
	tests := []struct {
		args []string
		want string
	}{
		{nil, `required flag(s) "workspace" not set`},
		{[]string{"--workspace", ws}, "give --socket PATH (a runner pod's workspace container) or --listen ADDR"},
		{[]string{"--socket", sock, "--listen", "127.0.0.1:0", "--workspace", ws}, "give --socket or --listen, not both"},
		{[]string{"--socket", sock, "--credential", tools, "--workspace", ws}, "--credential is for --listen"},
		{[]string{"--listen", "127.0.0.1:0", "--workspace", ws}, "--listen needs --credential FILE"},
		{[]string{"--listen", "127.0.0.1:0", "--credential", filepath.Join(creds, "missing.pem"), "--workspace", ws},
			"--credential: load credential: open " + filepath.Join(creds, "missing.pem")},
		{[]string{"--listen", "127.0.0.1:0", "--credential", garbage, "--workspace", ws},
			"--credential: credential " + garbage + ": 0 PEM blocks, want 3"},
		{[]string{"--listen", "127.0.0.1:0", "--credential", runner, "--workspace", ws},
			"--credential: " + runner + " is the runner's credential; serve with the executor's NAME.pem"},
		{[]string{"--listen", "127.0.0.1:0", "--credential", expired, "--workspace", ws},
			"--credential: " + expired + " expired at "},
		{[]string{"--socket", sock, "--workspace", filepath.Join(t.TempDir(), "missing")}, "--workspace: stat "},
		{[]string{"--socket", sock, "--workspace", ws, "--grace", "0s"}, "--grace must be positive"},
	}
	for _, tt := range tests {
		args := append([]string{"executor", "serve"}, tt.args...)
		r := harness{}.aerie(t, args...)
		if r.code != exitFailure || r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("aerie %s: exit %d, %v; want %q", strings.Join(args, " "), r.code, r.err, tt.want)
		}
	}
}

// TestExecutorCredentials: one file per side, mode 0600, each holding the
// credential of its name, of one set; existing files are never
// overwritten, and nothing is written then.
func TestExecutorCredentials(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "creds")
	r := harness{}.aerie(t, "executor", "credentials", "--out", dir, "--validity", "2h", "tools", "gpu")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var files []string
	for _, name := range []string{"runner", "tools", "gpu"} {
		files = append(files, filepath.Join(dir, name+".pem"))
	}
	if got := strings.Fields(r.stdout); !slices.Equal(got, files) {
		t.Errorf("stdout %q, want the files %q", got, files)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, %v; want mode 0700", fi, err)
	}
	for i, file := range files {
		fi, err := os.Stat(file)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", file, fi, err)
		}
		c, err := mtls.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{mtls.RunnerName, "tools", "gpu"}[i]; c.Name() != want {
			t.Errorf("%s holds %q's credential", file, c.Name())
		}
		if left := time.Until(c.NotAfter()); left > 2*time.Hour || left < time.Hour {
			t.Errorf("%s expires in %s, want 2h", file, left)
		}
	}
	before := readFile(t, files[0])

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--out", dir, "build", "tools"},
			filepath.Join(dir, "runner.pem") + ", " + filepath.Join(dir, "tools.pem") + " exist already: remove them, or choose another --out"},
		{[]string{"tools"}, "--out DIR is required"},
		{[]string{"--out", t.TempDir()}, "name the executors, one or more DNS labels: aerie executor credentials --out DIR NAME [NAME]"},
		{[]string{"--out", t.TempDir(), "Tools"}, `executor name "Tools" is not a DNS label`},
		{[]string{"--out", t.TempDir(), "runner"}, `executor name "runner" is the runner's`},
		{[]string{"--out", t.TempDir(), "--validity", "-1h", "tools"}, "validity -1h0m0s is not positive"},
	}
	for _, tt := range tests {
		args := append([]string{"executor", "credentials"}, tt.args...)
		r := harness{}.aerie(t, args...)
		if r.code != exitFailure || r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("aerie %s: exit %d, %v; want %q", strings.Join(args, " "), r.code, r.err, tt.want)
		}
	}
	if readFile(t, files[0]) != before {
		t.Error("runner.pem was overwritten")
	}
	if _, err := os.Stat(filepath.Join(dir, "build.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("build.pem was written by the refused run: %v", err)
	}
}
