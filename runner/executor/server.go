package executor

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ServeOptions configure Serve. The zero value is usable.
type ServeOptions struct {
	// Logger receives connections, their ends and protocol errors. Nil
	// discards.
	Logger *slog.Logger
	// HandshakeTimeout bounds the TLS handshake of a client of a
	// ListenTCP listener; a peer that has not completed it by then is
	// refused. Zero is DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
}

// Serve serves l to the clients that connect to ln (Listen and Dial, or
// ListenTCP and DialTCP), speaking the executor protocol, until ctx is done. Then it stops accepting, closes
// every connection — which tears down the groups started over each, as
// connection loss does — waits for the connections' handlers and returns
// nil. To give the clients the exits of their commands first, close l
// (which tears every group down) before ctx is done.
//
// Serve closes ln. It returns an error only when ln fails.
func Serve(ctx context.Context, ln net.Listener, l *Local, opts ServeOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		mu    sync.Mutex
		conns = make(map[*serverConn]struct{})
		wg    sync.WaitGroup
		done  bool
	)
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		done = true
		for c := range conns {
			c.conn.Close()
		}
		mu.Unlock()
	})
	defer stop()

	var err error
	for pause := time.Duration(0); ; {
		var conn net.Conn
		conn, err = ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				err = nil
				break
			}
			if !retryable(err) {
				err = fmt.Errorf("accept executor connection: %w", err)
				break
			}
			// Out of file descriptors or memory: wait for some to be
			// released rather than give up serving.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			log.Error("accept executor connection", "error", err, "retry_in", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		c := newServerConn(conn, l, log)
		c.handshakeTimeout = cmp.Or(opts.HandshakeTimeout, DefaultHandshakeTimeout)
		mu.Lock()
		if done {
			mu.Unlock()
			conn.Close()
			continue
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			c.serve()
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		})
	}
	ln.Close()
	mu.Lock()
	for c := range conns {
		c.conn.Close()
	}
	mu.Unlock()
	wg.Wait()
	return err
}

// retryable reports whether an error of Accept is a shortage that may
// pass, or a connection that went away before it was accepted.
func retryable(err error) bool {
	for _, errno := range []syscall.Errno{
		syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// serverConn is one client's connection.
type serverConn struct {
	l    *Local
	log  *slog.Logger
	conn net.Conn
	w    *wire
	// ctx is the connection's life: every stream's context derives from
	// it, so its end tears down every group started over it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	streams map[uint32]*serverStream
	lastID  uint32
	closing bool // close was requested: no more commands

	handlers sync.WaitGroup
	// handshakeTimeout bounds a TLS client's handshake.
	handshakeTimeout time.Duration
}

// serverStream is one call on a connection.
type serverStream struct {
	id     uint32
	ctx    context.Context
	cancel context.CancelFunc
	in     *inbound  // chIn
	out    *outbound // chOut
	errOut *outbound // chErr
	group  string    // the group started on the stream; under serverConn.mu
	done   chan struct{}
}

func newServerConn(conn net.Conn, l *Local, log *slog.Logger) *serverConn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &serverConn{l: l, conn: conn, w: newWire(conn), ctx: ctx, cancel: cancel, streams: make(map[uint32]*serverStream)}
	c.log = log.With("peer", peerOf(conn))
	return c
}

// peerOf describes who is driving this executor: the process at the
// other end of a unix socket, from the kernel's credentials of it; the
// address of a TCP peer (which tlsHandshake names once authenticated).
func peerOf(conn net.Conn) string {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		a := conn.RemoteAddr()
		return a.Network() + " " + a.String()
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return "unknown"
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return "unknown"
	}
	return fmt.Sprintf("pid=%d uid=%d gid=%d", cred.Pid, cred.Uid, cred.Gid)
}

func (c *serverConn) serve() {
	if err := c.tlsHandshake(); err != nil {
		// Not the runner: nothing was started for it.
		c.log.Warn("executor peer refused", "reason", err.Error())
		c.conn.Close()
		c.cancel()
		return
	}
	r := bufio.NewReaderSize(c.conn, 64<<10)
	err := c.handshake(r)
	if err == nil {
		c.log.Info("executor client connected")
		err = c.readLoop(r)
	}
	// Closing first makes the handlers' writes fail at once rather than
	// wait for a client that stopped reading.
	c.conn.Close()
	c.cancel()
	c.mu.Lock()
	for _, s := range c.streams {
		s.in.fail(errConnLost)
		s.out.fail(errConnLost)
		s.errOut.fail(errConnLost)
	}
	c.mu.Unlock()
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Info("executor client disconnected")
	default:
		c.log.Warn("executor connection failed", "error", err)
	}
	c.handlers.Wait()
}

// errConnLost is what the streams of a connection that ended see.
var errConnLost = errors.New("executor connection lost")

func (c *serverConn) handshake(r *bufio.Reader) error {
	f, err := readFrame(r)
	if err != nil {
		return err
	}
	if f.typ != frameHello {
		return protocolErrorf("first frame is %s, want hello", f.typ)
	}
	var h hello
	if err := decodeJSON(f, &h); err != nil {
		return err
	}
	if h.Protocol != protocolVersion {
		err := fmt.Errorf("executor protocol version %d is not supported; this executor speaks %d",
			h.Protocol, protocolVersion)
		_ = c.w.sendJSON(0, frameHello, hello{Protocol: protocolVersion, Error: toWire(err)})
		return err
	}
	return c.w.sendJSON(0, frameHello, hello{Protocol: protocolVersion, Workspace: c.l.dir})
}

func (c *serverConn) readLoop(r *bufio.Reader) error {
	for {
		f, err := readFrame(r)
		if err != nil {
			return err
		}
		if err := c.dispatch(f); err != nil {
			return err
		}
	}
}

// dispatch acts on one frame from the client. It never blocks: data goes
// into bounded buffers, calls run on goroutines of their own.
func (c *serverConn) dispatch(f frame) error {
	switch f.typ {
	case frameRequest:
		return c.open(f)
	case frameData, frameClose, frameWindow, frameCancel:
	default:
		return protocolErrorf("unexpected %s frame from the client", f.typ)
	}
	c.mu.Lock()
	s := c.streams[f.id]
	c.mu.Unlock()
	if s == nil {
		// Ended here while the client was still sending: nothing to do.
		return nil
	}
	switch f.typ {
	case frameData:
		if f.ch != chIn {
			return protocolErrorf("client sent data on channel %d", f.ch)
		}
		return s.in.push(f.payload)
	case frameClose:
		switch f.ch {
		case chIn:
			s.in.end()
		case chOut:
			s.out.stop(errReaderStopped)
		case chErr:
			s.errOut.stop(errReaderStopped)
		}
		return nil
	case frameWindow:
		n, err := f.window()
		if err != nil {
			return err
		}
		switch f.ch {
		case chOut:
			return s.out.grant(n)
		case chErr:
			return s.errOut.grant(n)
		}
		return protocolErrorf("client acknowledged its own channel %d", f.ch)
	default: // frameCancel
		s.cancel()
		return nil
	}
}

// errReaderStopped is what writes to a channel whose reader closed it
// return.
var errReaderStopped = errors.New("reader closed the channel")

// open starts the call a request frame opens.
func (c *serverConn) open(f frame) error {
	c.mu.Lock()
	if f.id <= c.lastID {
		last := c.lastID
		c.mu.Unlock()
		return protocolErrorf("stream %d opened after stream %d", f.id, last)
	}
	c.lastID = f.id
	s := c.newStream(f.id)
	c.streams[f.id] = s
	c.mu.Unlock()
	req, err := decodeRequest(f.payload)
	c.handlers.Go(func() {
		defer c.end(s)
		if err != nil {
			c.respond(s, response{}, err)
			return
		}
		c.handle(s, req)
	})
	return nil
}

func (c *serverConn) newStream(id uint32) *serverStream {
	ctx, cancel := context.WithCancel(c.ctx)
	s := &serverStream{id: id, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	s.in = newInbound(
		func(n int) { _ = c.w.sendWindow(id, chIn, n) },
		func() { _ = c.w.send(id, frameClose, chIn, nil) })
	output := func(ch channel) *outbound {
		return newOutbound(
			func(p []byte) error { return c.w.send(id, frameData, ch, p) },
			func() error { return c.w.send(id, frameClose, ch, nil) })
	}
	s.out, s.errOut = output(chOut), output(chErr)
	return s
}

// end ends a stream: the client is told, and the server forgets it.
func (c *serverConn) end(s *serverStream) {
	_ = c.w.send(s.id, frameEnd, chNone, nil)
	c.mu.Lock()
	delete(c.streams, s.id)
	c.mu.Unlock()
	s.in.fail(os.ErrClosed)
	s.cancel()
	close(s.done)
}

// respond sends a call's response, with err as its error.
func (c *serverConn) respond(s *serverStream, resp response, err error) {
	resp.Error = toWire(err)
	b, merr := json.Marshal(resp)
	if merr == nil && len(b) > maxPayload {
		merr = fmt.Errorf("%d bytes, more than %d", len(b), maxPayload)
	}
	if merr != nil {
		b, _ = json.Marshal(response{Error: toWire(fmt.Errorf("encode response: %w", merr))})
	}
	_ = c.w.send(s.id, frameResponse, chNone, b)
}

func (c *serverConn) handle(s *serverStream, req request) {
	ctx := s.ctx
	switch req.Op {
	case opStart:
		c.start(s, *req.Command)
	case opSignal:
		c.respond(s, response{}, c.l.Signal(ctx, req.ID, syscall.Signal(req.Signal)))
	case opList:
		infos, err := c.l.List(ctx)
		c.respond(s, response{Infos: infos}, err)
	case opTeardown:
		rep, err := c.l.Teardown(ctx, req.ID)
		c.respond(s, response{Report: &rep}, err)
	case opTeardownAll:
		reps, err := c.l.TeardownAll(ctx)
		c.respond(s, response{Reports: reps}, err)
	case opClose:
		c.respond(s, response{}, c.closeGroups(ctx))
	default:
		// The file operations: a cancel must also interrupt waiting on
		// a channel.
		stop := context.AfterFunc(ctx, func() {
			s.in.fail(ctx.Err())
			s.out.fail(ctx.Err())
		})
		defer stop()
		c.file(s, req)
	}
}

// file serves the file operations.
func (c *serverConn) file(s *serverStream, req request) {
	ctx := s.ctx
	switch req.Op {
	case opStat:
		fi, err := c.l.Stat(ctx, req.Name)
		c.respond(s, response{File: &fi}, err)
	case opRemove:
		c.respond(s, response{}, c.l.Remove(ctx, req.Name))
	case opWriteFile:
		data, err := io.ReadAll(s.in)
		if err == nil {
			err = c.l.WriteFile(ctx, req.Name, data, req.Perm)
		}
		c.respond(s, response{}, err)
	case opReadFile:
		data, err := c.l.ReadFile(ctx, req.Name)
		c.respond(s, response{}, err)
		if err == nil {
			if _, err := s.out.Write(data); err == nil {
				_ = s.out.Close()
			}
		}
	case opReadDir:
		infos, err := c.l.ReadDir(ctx, req.Name)
		c.respond(s, response{}, err)
		if err == nil {
			c.items(s, func(yield func(FileInfo, error) bool) {
				for _, fi := range infos {
					if !yield(fi, nil) {
						return
					}
				}
			})
		}
	case opWalk:
		var opts WalkOptions
		if req.Walk != nil {
			opts = *req.Walk
		}
		c.respond(s, response{}, nil)
		c.items(s, c.l.Walk(ctx, req.Name, opts))
	}
}

// items sends entries as JSON lines on channel out, then closes it.
func (c *serverConn) items(s *serverStream, seq func(yield func(FileInfo, error) bool)) {
	bw := bufio.NewWriterSize(s.out, 32<<10)
	enc := json.NewEncoder(bw)
	var werr error
	seq(func(fi FileInfo, err error) bool {
		werr = enc.Encode(item{File: fi, Error: toWire(err)})
		return werr == nil
	})
	if werr == nil {
		werr = bw.Flush()
	}
	if werr == nil {
		_ = s.out.Close()
	}
}

// start runs a command for the stream's whole life: its context is the
// group's, its channels carry the command's streams.
func (c *serverConn) start(s *serverStream, cmd Command) {
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		c.respond(s, response{}, ErrClosed)
		return
	}
	p, err := c.l.Start(s.ctx, cmd)
	if err != nil {
		c.respond(s, response{}, err)
		return
	}
	lp := p.(*localProcess)
	c.mu.Lock()
	s.group = p.ID()
	closing = c.closing
	c.mu.Unlock()
	if closing {
		// close went through the groups before this one was started.
		s.cancel()
	}
	info := p.Info()
	c.respond(s, response{Info: &info}, nil)

	var pumps sync.WaitGroup
	pumps.Go(func() { pumpOut(p.Stdout(), s.out) })
	pumps.Go(func() { pumpOut(p.Stderr(), s.errOut) })
	if stdin := p.Stdin(); stdin != nil {
		go pumpIn(s.in, stdin)
	}
	exit, err := p.Wait(context.Background())
	_ = c.w.sendJSON(s.id, frameExit, exitMessage{Exit: exit, Error: toWire(err)})
	pumps.Wait()
	// Until the group has finished, the client's cancel must reach it;
	// a group detached meanwhile is no longer the client's.
	select {
	case <-lp.finished:
	case <-lp.released:
	}
}

// pumpOut copies a command's output to its channel, and discards the rest
// of it if the client stops reading.
func pumpOut(src io.ReadCloser, dst *outbound) {
	dst.whenStopped(func() { _ = src.Close() })
	buf := make([]byte, maxData)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
}

// pumpIn copies the client's input to a command's standard input. When
// the command no longer reads it, the client is told to stop writing.
func pumpIn(src *inbound, dst io.WriteCloser) {
	if _, err := io.Copy(dst, src); err != nil {
		_ = src.Close()
	}
	_ = dst.Close()
}

// closeGroups tears down every group started over the connection and
// refuses further commands, for the client's Close.
func (c *serverConn) closeGroups(ctx context.Context) error {
	c.mu.Lock()
	c.closing = true
	var ss []*serverStream
	for _, s := range c.streams {
		if s.group != "" {
			ss = append(ss, s)
		}
	}
	c.mu.Unlock()
	for _, s := range ss {
		// The client will read no more: output it has not read must not
		// keep the streams from ending.
		s.out.stop(ErrClosed)
		s.errOut.stop(ErrClosed)
		s.cancel()
	}
	for _, s := range ss {
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
