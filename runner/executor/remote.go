package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"math"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/aerie-run/aerie/runner/process"
)

// Remote is an Executor in another process — the executor container of a
// runner pod, over a unix socket (Dial), or an executor in a pod or on a
// machine of its own, over TCP and TLS (DialTCP) — served by Serve. It behaves as
// the server's Local does: the same errors (errors.Is works), the same
// teardown when a Start context ends; and when the connection is lost,
// the server tears down every group started over it.
//
// Remote has no Detach: a record written from the returned description
// would name PIDs of the executor's PID namespace, which the agent's side
// cannot verify, and a pod's processes do not outlive the pod anyway.
type Remote struct {
	conn      net.Conn
	w         *wire
	workspace string

	// opening is held from a stream's id to its request on the wire, so
	// that the server sees ids in increasing order.
	opening sync.Mutex

	mu      sync.Mutex
	nextID  uint32
	streams map[uint32]*remoteStream // nil once the connection is over
	closing bool
	done    chan struct{} // closed when the connection is over
	err     error         // why it is over; set before done is closed
}

// remoteStream is the client's side of a call.
type remoteStream struct {
	id   uint32
	resp chan []byte // the response's payload
	// exit is set once, before exited is closed.
	exit   exitMessage
	exited chan struct{}
	ended  chan struct{}
	// release stops watching the call's context; run when the stream
	// ends.
	release func() bool

	in          *outbound // chIn
	out, errOut *inbound  // chOut, chErr
}

// Dial connects to the executor serving the socket. ctx bounds the
// connection and the handshake only.
func Dial(ctx context.Context, socket string) (*Remote, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("dial executor: %w", err)
	}
	r, err := handshake(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial executor %s: %w", socket, err)
	}
	return r, nil
}

// handshake exchanges hellos on conn and starts the Remote's reader.
func handshake(ctx context.Context, conn net.Conn) (*Remote, error) {
	expired := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	w := newWire(conn)
	br := bufio.NewReaderSize(conn, 64<<10)
	err := w.sendJSON(0, frameHello, hello{Protocol: protocolVersion})
	var f frame
	if err == nil {
		f, err = readFrame(br)
	}
	if !expired() {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if f.typ != frameHello {
		return nil, protocolErrorf("first frame is %s, want hello", f.typ)
	}
	var h hello
	if err := decodeJSON(f, &h); err != nil {
		return nil, err
	}
	if err := h.Error.err(); err != nil {
		return nil, err
	}
	if h.Protocol != protocolVersion {
		return nil, protocolErrorf("executor speaks protocol version %d, want %d", h.Protocol, protocolVersion)
	}
	r := &Remote{
		conn:      conn,
		w:         w,
		workspace: h.Workspace,
		streams:   make(map[uint32]*remoteStream),
		done:      make(chan struct{}),
	}
	go r.readLoop(br)
	return r, nil
}

// Workspace returns the workspace directory as the executor names it:
// the root of absolute names in its file operations and commands.
func (r *Remote) Workspace() string { return r.workspace }

// Close tears down every group started over this connection, waits for
// that (ctx ending stops the waiting, not the teardown), and closes the
// connection. Calls after Close fail with ErrClosed.
func (r *Remote) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		<-r.done
		return nil
	}
	r.closing = true
	r.mu.Unlock()
	_, _, err := r.call(ctx, request{Op: opClose}, callOpts{})
	r.conn.Close()
	<-r.done
	if errors.Is(err, errConnLost) {
		// Gone already: the server tears down on connection loss.
		err = nil
	}
	return err
}

func (r *Remote) readLoop(br *bufio.Reader) {
	var err error
	for {
		var f frame
		if f, err = readFrame(br); err != nil {
			break
		}
		if err = r.dispatch(f); err != nil {
			break
		}
	}
	r.conn.Close()
	r.mu.Lock()
	if r.closing {
		r.err = ErrClosed
	} else {
		r.err = fmt.Errorf("%w: %w", errConnLost, err)
	}
	streams := r.streams
	r.streams = nil
	r.mu.Unlock()
	for _, s := range streams {
		s.in.fail(r.err)
		s.out.fail(r.err)
		s.errOut.fail(r.err)
		s.release()
	}
	close(r.done)
}

// dispatch acts on one frame from the server. It never blocks.
func (r *Remote) dispatch(f frame) error {
	r.mu.Lock()
	s := r.streams[f.id]
	r.mu.Unlock()
	if s == nil {
		// A call abandoned and ended: what still arrives for it is moot.
		if f.typ == frameHello || f.typ == frameRequest || f.typ == frameCancel {
			return protocolErrorf("unexpected %s frame from the server", f.typ)
		}
		return nil
	}
	switch f.typ {
	case frameResponse:
		select {
		case s.resp <- f.payload:
			return nil
		default:
			return protocolErrorf("second response on stream %d", f.id)
		}
	case frameData:
		switch f.ch {
		case chOut:
			return s.out.push(f.payload)
		case chErr:
			return s.errOut.push(f.payload)
		}
		return protocolErrorf("server sent data on channel %d", f.ch)
	case frameClose:
		switch f.ch {
		case chOut:
			s.out.end()
		case chErr:
			s.errOut.end()
		case chIn:
			s.in.stop(errStdinClosed)
		}
		return nil
	case frameWindow:
		n, err := f.window()
		if err != nil {
			return err
		}
		if f.ch != chIn {
			return protocolErrorf("server acknowledged its own channel %d", f.ch)
		}
		return s.in.grant(n)
	case frameExit:
		select {
		case <-s.exited:
			return protocolErrorf("second exit on stream %d", f.id)
		default:
		}
		if err := decodeJSON(f, &s.exit); err != nil {
			return err
		}
		close(s.exited)
		return nil
	case frameEnd:
		r.mu.Lock()
		delete(r.streams, f.id)
		r.mu.Unlock()
		s.in.fail(errStdinClosed)
		s.out.fail(errEndedEarly)
		s.errOut.fail(errEndedEarly)
		close(s.ended)
		s.release()
		return nil
	}
	return protocolErrorf("unexpected %s frame from the server", f.typ)
}

var (
	// errStdinClosed is what writes to a command's standard input fail
	// with once the command no longer reads it, as a pipe's would.
	errStdinClosed = fmt.Errorf("write stdin: %w", syscall.EPIPE)
	// errEndedEarly means a call ended before the end of its channel.
	errEndedEarly = errors.New("executor call ended before its output")
)

// callOpts adjust call.
type callOpts struct {
	// process: the stream runs a command; the context's end tears its
	// group down, and its channels go on to their end.
	process bool
	// await: wait for the response even after the context ends, as the
	// teardowns do (their context only shortens the grace period).
	await bool
	// body is sent on channel in after the request.
	body []byte
}

// open registers a new stream for a call with ctx.
func (r *Remote) open(ctx context.Context, op string, o callOpts) (*remoteStream, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing && op != opClose {
		return nil, ErrClosed
	}
	if r.streams == nil {
		return nil, r.err
	}
	if r.nextID == math.MaxUint32 {
		return nil, errors.New("executor connection has used up its stream ids; dial again")
	}
	r.nextID++
	id := r.nextID
	s := &remoteStream{id: id, resp: make(chan []byte, 1), exited: make(chan struct{}), ended: make(chan struct{})}
	s.in = newOutbound(
		func(p []byte) error { return r.w.send(id, frameData, chIn, p) },
		func() error { return r.w.send(id, frameClose, chIn, nil) })
	input := func(ch channel) *inbound {
		return newInbound(
			func(n int) { _ = r.w.sendWindow(id, ch, n) },
			func() { _ = r.w.send(id, frameClose, ch, nil) })
	}
	s.out, s.errOut = input(chOut), input(chErr)
	// Watched for the stream's whole life: for a command that is the
	// group's, and a walk goes on after its response. Set here, under
	// mu, since the reader may end the stream as soon as it is listed.
	s.release = context.AfterFunc(ctx, func() {
		r.cancel(s)
		if !o.process {
			s.in.fail(ctx.Err())
			s.out.fail(ctx.Err())
			s.errOut.fail(ctx.Err())
		}
	})
	r.streams[id] = s
	return s, nil
}

// cancel tells the server that the context of call s has ended.
func (r *Remote) cancel(s *remoteStream) {
	r.mu.Lock()
	live := r.streams != nil && r.streams[s.id] == s
	r.mu.Unlock()
	if live {
		_ = r.w.send(s.id, frameCancel, chNone, nil)
	}
}

// call sends a request and waits for its response.
func (r *Remote) call(ctx context.Context, req request, o callOpts) (*remoteStream, response, error) {
	if err := ctx.Err(); err != nil {
		return nil, response{}, err
	}
	r.opening.Lock()
	s, err := r.open(ctx, req.Op, o)
	if err == nil {
		err = r.w.sendJSON(s.id, frameRequest, req)
	}
	r.opening.Unlock()
	if err != nil {
		return nil, response{}, err
	}
	if o.body != nil {
		if _, err := s.in.Write(o.body); err == nil {
			_ = s.in.Close()
		}
	}
	var done <-chan struct{}
	if !o.await {
		done = ctx.Done()
	}
	var b []byte
	select {
	case b = <-s.resp:
	case <-done:
		_ = s.out.Close()
		_ = s.errOut.Close()
		return nil, response{}, ctx.Err()
	case <-r.done:
		// The response may have arrived just before the end.
		select {
		case b = <-s.resp:
		default:
			return nil, response{}, r.err
		}
	}
	var resp response
	if err := json.Unmarshal(b, &resp); err != nil {
		err = protocolErrorf("response: %v", err)
		r.conn.Close()
		return nil, response{}, err
	}
	if err := resp.Error.err(); err != nil {
		return s, resp, err
	}
	return s, resp, nil
}

// Start implements Commands.
func (r *Remote) Start(ctx context.Context, c Command) (Process, error) {
	s, resp, err := r.call(ctx, request{Op: opStart, Command: &c}, callOpts{process: true})
	if err != nil {
		return nil, err
	}
	if resp.Info == nil {
		r.conn.Close()
		return nil, protocolErrorf("start response without the process")
	}
	return &remoteProcess{r: r, s: s, info: *resp.Info, stdin: c.Stdin}, nil
}

// remoteProcess is a command started by a Remote.
type remoteProcess struct {
	r     *Remote
	s     *remoteStream
	info  ProcessInfo
	stdin bool
}

func (p *remoteProcess) ID() string { return p.info.ID }

func (p *remoteProcess) Info() ProcessInfo {
	info := p.info
	select {
	case <-p.s.exited:
		info.Exited = true
	default:
	}
	return info
}

func (p *remoteProcess) Stdin() io.WriteCloser {
	if !p.stdin {
		return nil
	}
	return p.s.in
}

func (p *remoteProcess) Stdout() io.ReadCloser { return p.s.out }
func (p *remoteProcess) Stderr() io.ReadCloser { return p.s.errOut }

func (p *remoteProcess) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.s.exited:
		return p.s.exit.Exit, p.s.exit.Error.err()
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	case <-p.s.ended:
	case <-p.r.done:
	}
	select {
	case <-p.s.exited:
		return p.s.exit.Exit, p.s.exit.Error.err()
	default:
	}
	select {
	case <-p.r.done:
		return Exit{}, p.r.err
	default:
		return Exit{}, protocolErrorf("process %s ended without an exit status", p.info.ID)
	}
}

// Signal implements Commands.
func (r *Remote) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	_, _, err := r.call(ctx, request{Op: opSignal, ID: id, Signal: int(sig)}, callOpts{})
	return err
}

// List implements Commands.
func (r *Remote) List(ctx context.Context) ([]ProcessInfo, error) {
	_, resp, err := r.call(ctx, request{Op: opList}, callOpts{})
	return resp.Infos, err
}

// Teardown implements Commands. As with Local, ctx only shortens the
// grace period: the call waits for the teardown's report.
func (r *Remote) Teardown(ctx context.Context, id string) (process.Report, error) {
	_, resp, err := r.call(ctx, request{Op: opTeardown, ID: id}, callOpts{await: true})
	if resp.Report == nil {
		return process.Report{ID: id}, err
	}
	return *resp.Report, err
}

// TeardownAll implements Commands: it ends every group of the executor,
// not only those started over this connection.
func (r *Remote) TeardownAll(ctx context.Context) ([]process.Report, error) {
	_, resp, err := r.call(ctx, request{Op: opTeardownAll}, callOpts{await: true})
	return resp.Reports, err
}

// ReadFile implements Files.
func (r *Remote) ReadFile(ctx context.Context, name string) ([]byte, error) {
	s, _, err := r.call(ctx, request{Op: opReadFile, Name: name}, callOpts{})
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(s.out)
	if err != nil {
		return nil, callErr(ctx, "read", name, err)
	}
	return data, nil
}

// callErr is the error of a call whose channel failed: the context's, if
// it ended, or the channel's, as a path error.
func callErr(ctx context.Context, op, name string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// WriteFile implements Files.
func (r *Remote) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	if data == nil {
		data = []byte{}
	}
	_, _, err := r.call(ctx, request{Op: opWriteFile, Name: name, Perm: perm}, callOpts{body: data})
	return err
}

// Stat implements Files.
func (r *Remote) Stat(ctx context.Context, name string) (FileInfo, error) {
	_, resp, err := r.call(ctx, request{Op: opStat, Name: name}, callOpts{})
	if err != nil {
		return FileInfo{}, err
	}
	if resp.File == nil {
		return FileInfo{}, protocolErrorf("stat response without the file")
	}
	return *resp.File, nil
}

// Remove implements Files.
func (r *Remote) Remove(ctx context.Context, name string) error {
	_, _, err := r.call(ctx, request{Op: opRemove, Name: name}, callOpts{})
	return err
}

// ReadDir implements Files.
func (r *Remote) ReadDir(ctx context.Context, name string) ([]FileInfo, error) {
	s, _, err := r.call(ctx, request{Op: opReadDir, Name: name}, callOpts{})
	if err != nil {
		return nil, err
	}
	infos := []FileInfo{}
	for it, err := range items(s.out) {
		if err != nil {
			return nil, callErr(ctx, "readdir", name, err)
		}
		infos = append(infos, it.File)
	}
	return infos, nil
}

// Walk implements Files. The server walks ahead of the loop by at most a
// window's worth of entries.
func (r *Remote) Walk(ctx context.Context, name string, opts WalkOptions) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		s, _, err := r.call(ctx, request{Op: opWalk, Name: name, Walk: &opts}, callOpts{})
		if err != nil {
			yield(FileInfo{}, err)
			return
		}
		// Breaking out of the loop, or the end of the walk, ends the
		// stream: the server stops walking.
		defer func() {
			_ = s.out.Close()
			r.cancel(s)
		}()
		for it, err := range items(s.out) {
			if ctx.Err() != nil {
				yield(FileInfo{Name: it.File.Name}, ctx.Err())
				return
			}
			if err != nil {
				yield(FileInfo{}, callErr(ctx, "walk", name, err))
				return
			}
			if !yield(it.File, it.Error.err()) {
				return
			}
		}
	}
}

// items decodes the JSON lines of read_dir and walk, each at most
// maxPayload bytes.
func items(r io.Reader) iter.Seq2[item, error] {
	return func(yield func(item, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxPayload)
		for sc.Scan() {
			var it item
			if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
				yield(item{}, protocolErrorf("entry: %v", err))
				return
			}
			if !yield(it, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
			yield(item{}, err)
		}
	}
}

var _ Executor = (*Remote)(nil)
