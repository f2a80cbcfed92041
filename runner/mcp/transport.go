package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/process"
)

// Commands is the part of the executor stdio servers run through.
type Commands interface {
	Start(ctx context.Context, cmd executor.Command) (executor.Process, error)
	Teardown(ctx context.Context, id string) (process.Report, error)
}

// processTransport is an MCP transport over a command the executor
// runs: its standard input and output carry the protocol, newline-
// delimited JSON, and its standard error is kept for error messages. The
// command runs in a process group of its own, in the workspace, and
// closing the connection closes its input, gives it a moment to exit,
// then tears the group down — the server and whatever it started.
type processTransport struct {
	cmds Commands
	cmd  executor.Command
	// exitWait is how long a closed server may take to exit by itself.
	exitWait time.Duration

	mu     sync.Mutex
	proc   executor.Process
	in     *stdin
	stderr *tail
}

// Connect starts the command. Its process group lives no longer than
// ctx: the executor tears it down when ctx ends, even if the connection
// is never closed.
func (t *processTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	p, err := t.cmds.Start(ctx, t.cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", t.cmd.Argv[0], err)
	}
	stderr := &tail{max: 4 << 10, done: make(chan struct{})}
	go func() {
		// The server's log: it must be read, or the server blocks on
		// writing it.
		_, _ = io.Copy(stderr, p.Stderr())
		close(stderr.done)
	}()
	in := &stdin{t: t, p: p}
	t.mu.Lock()
	t.proc, t.in, t.stderr = p, in, stderr
	t.mu.Unlock()
	tr := &sdk.IOTransport{Reader: p.Stdout(), Writer: in}
	return tr.Connect(ctx)
}

// close ends the server, if it was started.
func (t *processTransport) close() {
	t.mu.Lock()
	in := t.in
	t.mu.Unlock()
	if in != nil {
		_ = in.Close()
	}
}

// failure describes why the server is gone, after a failed connection:
// its exit status and the end of its standard error, when there are.
func (t *processTransport) failure() string {
	t.mu.Lock()
	p, stderr := t.proc, t.stderr
	t.mu.Unlock()
	if p == nil {
		return ""
	}
	var parts []string
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if exit, err := p.Wait(ctx); err == nil {
		// The server has exited, but the last of what it wrote may still
		// be in the pipe: read it to the end (which a descendant holding
		// the pipe open could delay, hence the same short bound).
		select {
		case <-stderr.done:
		case <-ctx.Done():
		}
		switch {
		case exit.TornDown:
		case exit.Signal != "":
			parts = append(parts, "the server was killed by "+exit.Signal)
		default:
			parts = append(parts, fmt.Sprintf("the server exited with status %d", exit.Code))
		}
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		parts = append(parts, "its standard error ends: "+s)
	}
	return strings.Join(parts, "; ")
}

// stdin writes to the server's standard input; closing it ends the
// server.
type stdin struct {
	t    *processTransport
	p    executor.Process
	once sync.Once
	err  error
}

func (w *stdin) Write(b []byte) (int, error) { return w.p.Stdin().Write(b) }

// Close closes the server's input, which tells a stdio MCP server to
// exit, waits a moment for it to, and tears its process group down.
func (w *stdin) Close() error {
	w.once.Do(func() {
		_ = w.p.Stdin().Close()
		ctx, cancel := context.WithTimeout(context.Background(), w.t.exitWait)
		_, _ = w.p.Wait(ctx)
		cancel()
		// Whatever the server started goes with its group, and so does
		// the server if it did not exit.
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := w.t.cmds.Teardown(ctx, w.p.ID()); err != nil && !errors.Is(err, executor.ErrNotFound) {
			w.err = fmt.Errorf("tear down the MCP server: %w", err)
		}
	})
	return w.err
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
	// done is closed when the stream has been read to its end.
	done chan struct{}
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// stdioCommand is the command that starts srv: in dir, with the
// allow-listed variables of base (and those pass names), then srv's env
// as written.
func stdioCommand(srv Server, dir string, base, pass []string) executor.Command {
	if base == nil {
		base = os.Environ()
	}
	set := make([]string, 0, len(srv.Env))
	for k, v := range srv.Env {
		set = append(set, k+"="+v)
	}
	sort.Strings(set)
	return executor.Command{
		Argv:  append([]string{srv.Command}, srv.Args...),
		Dir:   dir,
		Env:   executor.Environ(base, pass, set),
		Stdin: true,
	}
}

// headerTransport adds a server's headers to every request, except
// those the SDK sets itself (Accept, Content-Type, Mcp-Session-Id,
// ...), which the protocol needs as they are.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			if req.Header.Get(k) == "" {
				req.Header.Set(k, v)
			}
		}
	}
	return t.base.RoundTrip(req)
}

// httpClient returns the client that reaches srv: base's transport
// with srv's headers. It sets no overall timeout: the stream of server
// messages lasts the whole session; each call has its own deadline.
func httpClient(srv Server, base *http.Client) *http.Client {
	rt := http.DefaultTransport
	if base != nil && base.Transport != nil {
		rt = base.Transport
	}
	c := &http.Client{Transport: &headerTransport{base: rt, headers: srv.Headers}}
	if base != nil {
		c.CheckRedirect, c.Jar = base.CheckRedirect, base.Jar
	}
	return c
}

// boundTransport connects its transport with the context of the
// connection's whole life rather than that of the connection attempt:
// transports keep what they start with the context they are given (the
// SSE stream, a stdio server's process group).
type boundTransport struct {
	sdk.Transport
	ctx context.Context
}

func (b boundTransport) Connect(context.Context) (sdk.Connection, error) {
	return b.Transport.Connect(b.ctx)
}
