package executor

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/process"
)

// transports are the connections a Remote makes: a unix socket, TCP and
// TLS.
var transports = []string{"socket", "tcp"}

// serveOn serves l over transport until the end of the test and returns
// how to connect a Remote to it, which the caller closes.
func serveOn(t testing.TB, transport string, l *Local, opts ServeOptions) func(context.Context) (*Remote, error) {
	t.Helper()
	if transport == "tcp" {
		addr, runner := serveTCP(t, l, opts)
		return func(ctx context.Context) (*Remote, error) { return DialTCP(ctx, addr, testExecutorName, runner) }
	}
	sock := serveSocket(t, l)
	return func(ctx context.Context) (*Remote, error) { return Dial(ctx, sock) }
}

// rawConn is the connection under a TLS connection, or conn.
func rawConn(conn net.Conn) net.Conn {
	if tc, ok := conn.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return conn
}

// These tests are about the connection itself; the behaviour a Remote shares
// with a Local is tested by the conformance tests of commands_test.go and
// files_test.go.

// wchar returns how many bytes pid has written, from /proc/<pid>/io.
func wchar(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no wchar in /proc/%d/io", pid)
	return 0
}

// TestLargeOutputIsBounded: a command writing 10 MB to an agent that does
// not read is stopped after a bounded amount — Local's buffer, the
// channel's window, the socket's buffers — and everything arrives once
// the agent reads.
func TestLargeOutputIsBounded(t *testing.T) {
	t.Parallel()
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			testLargeOutputIsBounded(t, transport)
		})
	}
}

func testLargeOutputIsBounded(t *testing.T, transport string) {
	const size = 10 << 20
	e, err := serveOn(t, transport, newLocal(t, Options{}), ServeOptions{})(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	p, err := e.Start(t.Context(), Command{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Info().PID
	last := int64(-1)
	stable := 0
	testenv.Eventually(t, 20*time.Second, "the writer is blocked", func() bool {
		n := wchar(t, pid)
		if n == last && n > 0 {
			stable++
		} else {
			stable = 0
		}
		last = n
		time.Sleep(20 * time.Millisecond)
		return stable >= 10
	})
	// Local's 1 MiB, the 512 KiB window, the pipe and both ends of the
	// socket: well under the 10 MB the command wants to write.
	if last >= 4<<20 {
		t.Errorf("the command wrote %d bytes to a reader that read nothing; want fewer than %d", last, 4<<20)
	}
	out := p.(*remoteProcess).s.out
	out.mu.Lock()
	held := out.n
	out.mu.Unlock()
	t.Logf("the command stopped after %d bytes; the client holds %d", last, held)
	n, err := io.Copy(io.Discard, p.Stdout())
	if err != nil || n != size {
		t.Errorf("read %d bytes, %v; want %d", n, err, size)
	}
	if exit, err := p.Wait(t.Context()); err != nil || exit.Code != 0 {
		t.Errorf("Wait = %+v, %v", exit, err)
	}
	out.mu.Lock()
	high := out.high
	out.mu.Unlock()
	if high > windowSize {
		t.Errorf("the client buffered %d bytes, more than the window of %d", high, windowSize)
	}
}

// TestLargeStdin: input goes through the window to a command as fast as
// it reads it.
func TestLargeStdin(t *testing.T) {
	t.Parallel()
	each(t, true, func(t *testing.T, kind string) {
		e, _ := newExecutor(t, kind, Options{})
		p, err := e.Start(t.Context(), Command{Argv: []string{"wc", "-c"}, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		out := readAll(p.Stdout())
		chunk := []byte(strings.Repeat("x", 1000) + "\n")
		for range 5000 {
			if _, err := p.Stdin().Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Stdin().Close(); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(within(t, 10*time.Second, "output", out)); got != "5005000" {
			t.Errorf("wc -c counted %s bytes, want 5005000", got)
		}
	})
}

// TestDisconnectTearsDown: when a client's connection is lost, the server
// tears down every group started over it — not those of other
// connections, nor groups the server's Local detached. Not parallel: it
// checks for zombie children.
func TestDisconnectTearsDown(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) { testDisconnectTearsDown(t, transport) })
	}
}

func testDisconnectTearsDown(t *testing.T, transport string) {
	l := newLocal(t, Options{Grace: 100 * time.Millisecond})
	dial := serveOn(t, transport, l, ServeOptions{})
	other, err := dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	kept, err := other.Start(t.Context(), Command{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}

	lost, err := dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ps := map[string]proc{}
	for i, script := range []string{escapingScript, "sleep 1000 & echo member $!"} {
		p, err := lost.Start(context.Background(), Command{Script: script})
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(p.Stdout())
		names := []string{"member"}
		if i == 0 {
			names = []string{"member", "stubborn", "escaped"}
		}
		for name, pr := range reported(t, sc, names...) {
			ps[fmt.Sprint(name, i)] = pr
		}
		ps[fmt.Sprint("leader", i)] = proc{p.Info().PID, p.Info().Birth.StartTime}
	}
	spared, err := lost.Start(context.Background(), Command{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	detached, err := l.Detach(t.Context(), spared.ID())
	if err != nil {
		t.Fatal(err)
	}

	rawConn(lost.conn).Close() // the agent died: no goodbye, not even TLS's
	testenv.Eventually(t, 10*time.Second, "every process started over the lost connection is gone", func() bool {
		for _, pr := range ps {
			if pr.present() {
				return false
			}
		}
		return true
	})
	testenv.Eventually(t, 10*time.Second, "no zombie child is left", func() bool { return len(zombieChildren()) == 0 })
	infos, err := other.List(t.Context())
	if err != nil || len(infos) != 1 || infos[0].ID != kept.ID() {
		t.Errorf("List = %+v, %v; want the other connection's group only", infos, err)
	}
	if st, ok := readProcState(detached.PID); !ok || st.start != detached.Birth.StartTime || st.state == 'Z' {
		t.Errorf("the detached group did not survive the connection: %+v, %v", st, ok)
	}
	if rep, err := process.Teardown(t.Context(), detached.Group, 100*time.Millisecond); err != nil || rep.Status != process.Terminated {
		t.Errorf("teardown of the detached group: %+v, %v", rep, err)
	}
	if _, err := lost.List(t.Context()); !errors.Is(err, errConnLost) {
		t.Errorf("List over a lost connection: %v", err)
	}
}

// TestServerGone: when the executor goes away, every call and stream of
// the client fails instead of hanging.
func TestServerGone(t *testing.T) {
	t.Parallel()
	l := newLocal(t, Options{Grace: 100 * time.Millisecond})
	sock := socketPath(t)
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, l, ServeOptions{}) }()
	r, err := Dial(t.Context(), sock)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Start(t.Context(), Command{Argv: []string{"sleep", "1000"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there after Serve: %v", err)
	}
	if _, err := p.Wait(t.Context()); !errors.Is(err, errConnLost) {
		t.Errorf("Wait: %v, want the connection lost", err)
	}
	if _, err := io.ReadAll(p.Stdout()); !errors.Is(err, errConnLost) {
		t.Errorf("read stdout: %v, want the connection lost", err)
	}
	if _, err := p.Stdin().Write([]byte("x")); !errors.Is(err, errConnLost) {
		t.Errorf("write stdin: %v, want the connection lost", err)
	}
	if _, err := r.Stat(t.Context(), "."); !errors.Is(err, errConnLost) {
		t.Errorf("stat: %v, want the connection lost", err)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Errorf("Close after the server is gone: %v", err)
	}
	if _, err := r.List(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close: %v, want %v", err, ErrClosed)
	}
}

// TestWalkStream: a walk is streamed, and stopping it early stops the
// server's walk and ends the stream.
func TestWalkStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 50 {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 100 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d", j)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r, _ := openExecutor(t, "remote", dir, Options{})
	rem := r.(*Remote)
	n := 0
	for _, err := range rem.Walk(t.Context(), "", WalkOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1+50+50*100 {
		t.Errorf("walked %d entries, want %d", n, 1+50+50*100)
	}

	n = 0
	for _, err := range rem.Walk(t.Context(), "", WalkOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 10 {
			break
		}
	}
	testenv.Eventually(t, 10*time.Second, "the stopped walk's stream ends", func() bool {
		rem.mu.Lock()
		defer rem.mu.Unlock()
		return len(rem.streams) == 0
	})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var last error
	n = 0
	for _, err := range rem.Walk(ctx, "", WalkOptions{}) {
		if n++; n == 10 {
			cancel()
		}
		last = err
	}
	if !errors.Is(last, context.Canceled) {
		t.Errorf("a walk whose context ended stopped with %v", last)
	}
}

// rawClient speaks the protocol frame by frame, as a client that is not
// a Remote would.
type rawClient struct {
	conn net.Conn
	w    *wire
	r    *bufio.Reader
}

func dialRaw(t *testing.T, sock string, version int) (*rawClient, hello) {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawClient{conn: conn, w: newWire(conn), r: bufio.NewReader(conn)}
	if err := c.w.sendJSON(0, frameHello, hello{Protocol: version}); err != nil {
		t.Fatal(err)
	}
	var h hello
	c.read(t, frameHello, &h)
	return c, h
}

// read reads the next frame, which must be of type typ, into v.
func (c *rawClient) read(t *testing.T, typ frameType, v any) {
	t.Helper()
	if err := c.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	f, err := readFrame(c.r)
	if err != nil {
		t.Fatal(err)
	}
	if f.typ != typ {
		t.Fatalf("got a %s frame %q, want %s", f.typ, f.payload, typ)
	}
	if v != nil {
		if err := json.Unmarshal(f.payload, v); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServerEnforcesBoundary: the workspace boundary is the server's,
// whatever a client sends.
func TestServerEnforcesBoundary(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t, "local")
	c, h := dialRaw(t, serveSocket(t, w.l), protocolVersion)
	if h.Workspace != w.l.dir || h.Error != nil {
		t.Errorf("hello = %+v, want the workspace %s", h, w.l.dir)
	}
	id := uint32(0)
	for _, req := range []request{
		{Op: opReadFile, Name: "../secret"},
		{Op: opReadFile, Name: w.secret},
		{Op: opReadFile, Name: "dirout/secret"},
		{Op: opStat, Name: "out"},
		{Op: opReadDir, Name: "dirout"},
		{Op: opRemove, Name: "dirout/secret"},
		{Op: opWriteFile, Name: "out"},
	} {
		id++
		if err := c.w.sendJSON(id, frameRequest, req); err != nil {
			t.Fatal(err)
		}
		if req.Op == opWriteFile {
			if err := c.w.send(id, frameData, chIn, []byte("pwned")); err != nil {
				t.Fatal(err)
			}
			if err := c.w.send(id, frameClose, chIn, nil); err != nil {
				t.Fatal(err)
			}
		}
		var resp response
		c.read(t, frameResponse, &resp)
		if err := resp.Error.err(); !errors.Is(err, ErrOutsideWorkspace) {
			t.Errorf("%s %s: %v, want %v", req.Op, req.Name, err, ErrOutsideWorkspace)
		}
		c.read(t, frameEnd, nil)
	}
	w.requireSecretIntact(t)
}

// TestProtocolErrors: a client that breaks the protocol loses its
// connection, and with it its groups; one that speaks another version is
// told so.
func TestProtocolErrors(t *testing.T) {
	t.Parallel()
	l := newLocal(t, Options{Grace: 100 * time.Millisecond})
	sock := serveSocket(t, l)

	_, h := dialRaw(t, sock, protocolVersion+1)
	if err := h.Error.err(); err == nil || !strings.Contains(err.Error(), "version 2 is not supported") {
		t.Errorf("hello in another version: %+v", h)
	}

	for name, bad := range map[string]func(c *rawClient) error{
		"unknown frame type": func(c *rawClient) error { return c.w.send(7, frameType(99), chNone, nil) },
		"reused stream id":   func(c *rawClient) error { return c.w.sendJSON(1, frameRequest, request{Op: opList}) },
		"window overrun": func(c *rawClient) error {
			return c.w.sendWindow(1, chOut, windowSize)
		},
		"data beyond the window": func(c *rawClient) error {
			// sleep reads none of it: past the pipe's and the pump's
			// buffers, it piles up in the channel. The server hangs up
			// somewhere along the way, failing the sends.
			chunk := make([]byte, maxData)
			for range 2 * windowSize / maxData {
				if c.w.send(1, frameData, chIn, chunk) != nil {
					break
				}
			}
			return nil
		},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			c, _ := dialRaw(t, sock, protocolVersion)
			cmd := Command{Argv: []string{"sleep", "1000"}, Stdin: true}
			if err := c.w.sendJSON(1, frameRequest, request{Op: opStart, Command: &cmd}); err != nil {
				t.Fatal(err)
			}
			var resp response
			c.read(t, frameResponse, &resp)
			if resp.Info == nil {
				t.Fatalf("start failed: %+v", resp.Error)
			}
			leader := proc{resp.Info.PID, resp.Info.Birth.StartTime}
			if err := bad(c); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 10*time.Second, "the group is torn down", func() bool { return !leader.present() })
			if err := c.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := readFrame(c.r); err != nil {
					// EOF, or a reset when the server left data unread.
					if errors.Is(err, os.ErrDeadlineExceeded) {
						t.Errorf("the server did not hang up: %v", err)
					}
					break
				}
			}
		})
	}
}

// TestListen: the socket gets its mode and its directory's group, a stale
// socket is replaced, a live one or another file is not.
func TestListen(t *testing.T) {
	t.Parallel()
	sock := socketPath(t)
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != SocketMode {
		t.Errorf("socket mode %v, want a socket with %v", fi.Mode(), SocketMode)
	}
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "another executor is serving it") {
		t.Errorf("Listen on a live socket: %v", err)
	}
	// A listener that dies without removing its socket leaves it stale.
	// (Until a child that other tests are forking execs, it may still
	// hold the listener: hence the retries.)
	ln.(*socketListener).UnixListener.Close()
	var ln2 net.Listener
	testenv.Eventually(t, 10*time.Second, "Listen replaces a stale socket", func() bool {
		ln2, err = Listen(sock)
		return err == nil
	})
	ln2.Close()
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there after Close: %v", err)
	}
	if err := os.WriteFile(sock, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("Listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "data" {
		t.Errorf("Listen replaced a regular file")
	}
	entries, _ := os.ReadDir(filepath.Dir(sock))
	if len(entries) != 1 {
		t.Errorf("Listen left files behind: %v", entries)
	}
}

// BenchmarkStdout100MB measures the throughput of a command's standard
// output, read as fast as it comes.
func BenchmarkStdout100MB(b *testing.B) {
	const size = 100 << 20
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			e, _ := newExecutor(b, kind, Options{})
			ctx := b.Context()
			b.SetBytes(size)
			defer testenv.ReportCPU(b)()
			for b.Loop() {
				p, err := e.Start(ctx, Command{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}})
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, p.Stdout()); err != nil || n != size {
					b.Fatalf("read %d bytes, %v", n, err)
				}
				if _, err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
