package executor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-run/aerie/runner/executor/mtls"
	"github.com/aerie-run/aerie/runner/process"
)

// BenchmarkForegroundCommand runs `true` the way the bash tool runs a
// foreground command: start, read the output to its end, wait, tear the
// group down. What it measures beyond the fork and exec is the executor's
// own work after each command: reaping, and finding out that nothing of
// the group is left.
//
//	go test -run '^$' -bench ForegroundCommand -count 10 ./runner/executor/
func BenchmarkForegroundCommand(b *testing.B) {
	l := newLocal(b, Options{})
	ctx := context.Background()
	for b.Loop() {
		runForeground(ctx, b, l, Command{Argv: []string{"true"}, CombinedOutput: true})
	}
}

// runForeground runs cmd on l as the bash tool runs a foreground command:
// start, read the output to its end, wait for exit 0, tear the group down
// (not found: settled already, as most are).
func runForeground(ctx context.Context, b *testing.B, l Commands, cmd Command) {
	b.Helper()
	p, err := l.Start(ctx, cmd)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadAll(p.Stdout()); err != nil {
		b.Fatal(err)
	}
	if exit, err := p.Wait(ctx); err != nil || exit.Code != 0 {
		b.Fatalf("Wait = %+v, %v", exit, err)
	}
	if _, err := l.Teardown(ctx, p.ID()); err != nil && !errors.Is(err, ErrNotFound) {
		b.Fatal(err)
	}
}

// benchServeEnv makes the test binary serve an executor instead of running
// its tests, for the benchmarks that drive one in another process: its
// value is the transport, "socket" or "tcp". The workspace and the socket
// or the credential file are in benchDirEnv. The child prints its address
// on standard output and serves until its standard input ends; for each
// line it reads there it prints the peak of its Go heap since the last
// line, sampled every millisecond, in bytes.
const (
	benchServeEnv = "AERIE_EXECUTOR_BENCH_SERVE"
	benchDirEnv   = "AERIE_EXECUTOR_BENCH_DIR"
)

// serveForBench is the child's main; it returns its exit status.
func serveForBench(transport string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir := os.Getenv(benchDirEnv)
	reaper, stop, err := process.Subreap()
	if err != nil {
		return fail(err)
	}
	defer stop()
	l, err := NewLocal(filepath.Join(dir, "ws"), Options{Reaper: reaper})
	if err != nil {
		return fail(err)
	}
	defer l.Close(context.Background())
	var (
		ln   net.Listener
		addr = filepath.Join(dir, "executor.sock")
	)
	if transport == "tcp" {
		cred, err := mtls.Load(filepath.Join(dir, testExecutorName+".pem"))
		if err != nil {
			return fail(err)
		}
		ln, err = ListenTCP("127.0.0.1:0", cred)
		if err != nil {
			return fail(err)
		}
		addr = ln.Addr().String()
	} else if ln, err = Listen(addr); err != nil {
		return fail(err)
	}
	fmt.Println(addr)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		stopHeap, heapPeak := sampleHeap()
		defer stopHeap()
		for sc := bufio.NewScanner(os.Stdin); sc.Scan(); {
			fmt.Println(heapPeak())
		}
		cancel()
	}()
	if err := Serve(ctx, ln, l, ServeOptions{}); err != nil {
		return fail(err)
	}
	return 0
}

// benchServer is an executor served by a child process.
type benchServer struct {
	pid  int
	dial func(context.Context) (*Remote, error)
	// heapPeak is the peak of the child's Go heap since the last call.
	heapPeak func() uint64
}

// startBenchServer starts a child serving an executor over transport,
// stopped at the end of the benchmark.
func startBenchServer(b *testing.B, transport string) benchServer {
	b.Helper()
	dir, err := os.MkdirTemp("", "aerie-bench-") // a socket's path must be short
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		b.Fatal(err)
	}
	runner, exec := newCredentials(b)
	if err := os.WriteFile(filepath.Join(dir, testExecutorName+".pem"), exec.Marshal(), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := osexec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), benchServeEnv+"="+transport, benchDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := testReaper.Start(cmd, process.NewID()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		if err := testReaper.Wait(cmd); err != nil {
			b.Errorf("the executor child: %v", err)
		}
	})
	br := bufio.NewReader(stdout)
	line, err := br.ReadString('\n')
	if err != nil {
		b.Fatalf("the executor child's address: %v", err)
	}
	addr := strings.TrimSpace(line)
	s := benchServer{pid: cmd.Process.Pid, heapPeak: func() uint64 {
		if _, err := io.WriteString(stdin, "peak\n"); err != nil {
			b.Fatal(err)
		}
		line, err := br.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}}
	if transport == "tcp" {
		s.dial = func(ctx context.Context) (*Remote, error) { return DialTCP(ctx, addr, testExecutorName, runner) }
	} else {
		s.dial = func(ctx context.Context) (*Remote, error) { return Dial(ctx, addr) }
	}
	return s
}

// connect starts a child serving over transport and connects to it.
func connect(b *testing.B, transport string) (*Remote, benchServer) {
	b.Helper()
	s := startBenchServer(b, transport)
	r, err := s.dial(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(context.Background()) })
	return r, s
}

// BenchmarkRoundTrip is a `bash true` tool call's command through an
// executor in another process, over the unix socket and over TCP and
// TLS on loopback: start, read the output to its end, wait, tear down.
// Besides ns/op it reports the median and the 90th percentile of the
// calls (p50-us, p90-us). "local" is the same through a Local in this
// process: the command's own cost, without a connection.
//
//	go test -run '^$' -bench RoundTrip -benchtime 2000x -count 6 ./runner/executor/
func BenchmarkRoundTrip(b *testing.B) {
	for _, transport := range append([]string{"local"}, transports...) {
		b.Run(transport, func(b *testing.B) {
			var e Commands
			if transport == "local" {
				e = newLocal(b, Options{})
			} else {
				e, _ = connect(b, transport)
			}
			ctx := context.Background()
			cmd := Command{Script: "true", Shell: "bash", CombinedOutput: true}
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				runForeground(ctx, b, e, cmd)
				took = append(took, time.Since(t0))
			}
			slices.Sort(took)
			at := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) }
			b.ReportMetric(at(0.5), "p50-us")
			b.ReportMetric(at(0.9), "p90-us")
		})
	}
}

// BenchmarkCall is the round trip of a call that runs no command, a Stat,
// to an executor in another process over the unix socket and over TCP
// and TLS: the connection's own latency.
//
//	go test -run '^$' -bench Call -count 6 ./runner/executor/
func BenchmarkCall(b *testing.B) {
	for _, transport := range transports {
		b.Run(transport, func(b *testing.B) {
			r, _ := connect(b, transport)
			ctx := context.Background()
			for b.Loop() {
				if _, err := r.Stat(ctx, "."); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStreamOutput streams 1 MiB of a command's output from an
// executor in another process, over the unix socket and over TCP and
// TLS. The memory of both sides stays bounded however much is streamed:
// it reports the resident set of the executor's process when the run
// starts (server-start-MiB: mostly the test binary's own pages) and its
// peak over the run (server-peak-MiB), the same of this process
// (client-start-MiB, client-peak-MiB), and the peaks of the Go heaps of
// both (server-heap-MiB, client-heap-MiB), sampled every millisecond. The
// Go runtime returns freed memory to the system lazily: the peak
// resident sets grow with the run's length a while, the heaps do not.
//
//	go test -run '^$' -bench StreamOutput -benchtime 50x -count 6 ./runner/executor/
func BenchmarkStreamOutput(b *testing.B) {
	const size = 1 << 20
	for _, transport := range transports {
		b.Run(transport, func(b *testing.B) {
			r, s := connect(b, transport)
			ctx := context.Background()
			cmd := Command{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}}
			runForeground(ctx, b, r, cmd) // warm
			serverStart, clientStart := resetPeakRSS(b, s.pid), resetPeakRSS(b, os.Getpid())
			s.heapPeak()
			stopHeap, heapPeak := sampleHeap()
			b.SetBytes(size)
			for b.Loop() {
				runForeground(ctx, b, r, cmd)
			}
			stopHeap()
			b.ReportMetric(float64(serverStart)/(1<<20), "server-start-MiB")
			b.ReportMetric(float64(clientStart)/(1<<20), "client-start-MiB")
			b.ReportMetric(float64(peakRSS(b, s.pid))/(1<<20), "server-peak-MiB")
			b.ReportMetric(float64(s.heapPeak())/(1<<20), "server-heap-MiB")
			b.ReportMetric(float64(peakRSS(b, os.Getpid()))/(1<<20), "client-peak-MiB")
			b.ReportMetric(float64(heapPeak())/(1<<20), "client-heap-MiB")
		})
	}
}

// resetPeakRSS resets the peak resident set size of pid (VmHWM) to its
// current one, which it returns, in bytes.
func resetPeakRSS(b *testing.B, pid int) int64 {
	b.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Fatalf("reset the peak RSS of %d: %v", pid, err)
	}
	return rss(b, pid, "VmRSS:")
}

// peakRSS is the peak resident set size of pid, in bytes.
func peakRSS(b *testing.B, pid int) int64 {
	b.Helper()
	return rss(b, pid, "VmHWM:")
}

// rss reads the field of /proc/<pid>/status, in bytes.
func rss(b *testing.B, pid int, field string) int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// sampleHeap samples this process's Go heap every millisecond until stop;
// peak returns the largest sample since its last call.
func sampleHeap() (stop func(), peak func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var (
		mu   sync.Mutex
		high uint64
	)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			mu.Lock()
			high = max(high, sample[0].Value.Uint64())
			mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }, func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		h := high
		high = 0
		return h
	}
}
